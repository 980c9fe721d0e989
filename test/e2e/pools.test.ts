/**
 * Pools (docs/pools.md), with real runners and jobs that keep their own account of how many of
 * them live at once. Each job of a pool takes, at its start, one of the pool's "seats" — files it
 * holds an exclusive `flock` on for as long as any of its processes lives (the kernel drops it
 * only when the last is gone, whatever baton believes) — and journals which seat it got, or
 * `none`: then more of the pool's jobs were alive at that moment than the pool has slots.
 *
 * - a fleet pool of 2 on three runners, four jobs every 2 s that each run 3 s: never a third
 *   seat, two at once seen, skips of kind `pool` naming the holders; a runner killed (-9) while
 *   it holds a slot: its slot is free again at once, by the server's account, and taken again;
 * - `scope: host` on two runners: at most one per server, two in the fleet at once;
 * - `poolFull: queue`: a fire that meets a full pool starts when the slot frees, not at its next
 *   fire.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { poolToJson } from '../../src/fleet/status.js';
import { poolSlotLockName } from '../../src/lock-names.js';
import { baton, writeSchedule } from '../helpers/cli.js';
import { dbNow, nextGridInstant, runs, type RunRow } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { freePort } from '../helpers/private-server.js';
import { parseMetrics } from '../helpers/prometheus.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('pools', { perTest: true });

/**
 * A command job that takes one of `seats` seats (flock files `seat.<scope>.<n>` in its folder) and
 * journals `start <job> <run id> <host> <seat or none> <ms>`, works `seconds`, then `end …`.
 * `perHost`: the seats are its host's (a `scope: host` pool).
 */
function seatedJob(seats: number, seconds: number, perHost = false, ignoreTerm = false): string {
  const scope = perHost ? '$BATON_HOST' : 'fleet';
  const script = [
    'now() { date +%s%3N; }',
    'got=none',
    `for s in $(seq 1 ${seats}); do`,
    // fd 9, and the lock on it, is inherited by `sleep`: the seat is held while any process lives.
    `  exec 9>>"seat.${scope}.$s"`,
    '  if flock -n 9; then got=$s; break; fi',
    '  exec 9>&-',
    'done',
    'echo "start $BATON_JOB $BATON_RUN_ID $BATON_HOST $got $(now)" >> journal',
    // Stopped (its runner killed: the spawner stops its group), it ends too: sh runs the trap once
    // `sleep`, which got the same SIGTERM, is gone. Or, `ignoreTerm`, only SIGKILL ends it (and
    // `sleep`, which inherits the ignored signal).
    // Its pid is its process group's (the spawner starts each run in a group of its own).
    // The pid is written once TERM is ignored: a test that waits for the file never stops the
    // run before it can ignore the signal.
    ignoreTerm
      ? `trap '' TERM; echo $$ > "pid.$BATON_RUN_ID"`
      : `trap 'echo "end $BATON_JOB $BATON_RUN_ID $BATON_HOST $got $(now)" >> journal; exit 143' TERM`,
    `sleep ${seconds}`,
    'echo "end $BATON_JOB $BATON_RUN_ID $BATON_HOST $got $(now)" >> journal',
  ].join('\n');
  return JSON.stringify(['sh', '-c', script]);
}

interface Seat {
  event: 'start' | 'end';
  job: string;
  runId: number;
  host: string;
  seat: string;
  at: number;
}

function journal(config: string): Seat[] {
  const file = path.join(path.dirname(config), 'journal');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [event, job, runId, host, seat, at] = line.split(' ');
      return {
        event: event as Seat['event'],
        job: job!,
        runId: Number(runId),
        host: host!,
        seat: seat!,
        at: Number(at),
      };
    });
}

/** The most runs alive at once by the journal's starts and ends (a run with no end: until now). */
function mostAtOnce(seats: Seat[], where: (s: Seat) => boolean = () => true): number {
  const points = seats
    .filter(where)
    .map((s) => ({ at: s.at, delta: s.event === 'start' ? 1 : -1 }))
    // An end and a start at the same millisecond: the end first (the seat was let go).
    .sort((a, b) => a.at - b.at || a.delta - b.delta);
  let alive = 0;
  let most = 0;
  for (const p of points) most = Math.max(most, (alive += p.delta));
  return most;
}

const poolRows = (rows: RunRow[]) => rows.filter((r) => r.reason_kind === 'pool');

describe('a fleet-wide pool of two slots', () => {
  it('never lets a third run of its jobs live, names the holders, and frees the slot of a killed runner', async () => {
    const jobs = ['load-a', 'load-b', 'load-c', 'load-d'];
    const config = writeSchedule(`
namespace: pools
pools:
  db: {slots: 2}
defaults:
  pool: db
jobs:
${jobs.map((j) => `  ${j}: {schedule: "*/2 * * * * *", command: ${seatedJob(2, 3)}}`).join('\n')}
`);
    const db = fleet.db;
    const runners = await fleet.start(['p-1', 'p-2', 'p-3'], { config });

    await waitFor(
      'six runs done and pool skips',
      async () => {
        const rows = await runs(db);
        return rows.filter((r) => r.status === 'done').length >= 6 && poolRows(rows).length >= 6;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );

    // A runner holding a slot is killed: the server frees its slot with its session.
    const [holding] = await db.query<{ host: string; lock_connection_id: number }>(
      `SELECT host, lock_connection_id FROM baton_runs
        WHERE status = 'running' AND pool = 'db' ORDER BY id DESC LIMIT 1`,
    );
    let victim = holding ? runners.find((r) => r.host === holding.host) : undefined;
    if (!holding || !victim) {
      // Between runs: wait for the next holder.
      await waitFor(
        'a runner holding a slot',
        async () => {
          const [row] = await db.query<{ host: string }>(
            `SELECT host FROM baton_runs WHERE status = 'running' AND pool = 'db' LIMIT 1`,
          );
          victim = row ? runners.find((r) => r.host === row.host) : undefined;
          return victim != null;
        },
        { timeoutMs: 20_000, intervalMs: 50 },
      );
    }
    const [held] = await db.query<{ conn: number }>(
      `SELECT lock_connection_id AS conn FROM baton_runs
        WHERE status = 'running' AND pool = 'db' AND host = ? ORDER BY id DESC LIMIT 1`,
      [victim!.host],
    );
    const slotNames = [1, 2].map((n) => poolSlotLockName(db.name, 'pools', 'db', n, null));
    const holders = async () =>
      (
        await db.query<{ h1: number | null; h2: number | null }>(
          'SELECT IS_USED_LOCK(?) AS h1, IS_USED_LOCK(?) AS h2',
          slotNames,
        )
      ).map((r) => [r.h1, r.h2].map((h) => (h == null ? null : Number(h))))[0]!;
    if (held) expect(await holders()).toContain(Number(held.conn));
    await victim!.stop('SIGKILL');
    if (held) {
      await waitFor(
        "the killed runner's slot free again",
        async () => !(await holders()).includes(Number(held.conn)),
        { timeoutMs: 60_000, intervalMs: 100 },
      );
    }
    const killedAt = Date.now();
    // The two left go on with the pool: runs start after the kill.
    await waitFor(
      'four runs started after the kill',
      async () => journal(config).filter((s) => s.event === 'start' && s.at > killedAt).length >= 4,
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const alive = runners.filter((r) => r !== victim);
    await Promise.all(alive.map((r) => r.stop('SIGTERM')));
    expectQuiet(alive);

    const seats = journal(config);
    // The kernel's account: every run that started found a seat free — never a third alive.
    expect(seats.filter((s) => s.event === 'start' && s.seat === 'none')).toEqual([]);
    // The journal's: at most two at once, and the pool was used to its size (two at once seen).
    expect(mostAtOnce(seats)).toBe(2);

    const rows = await runs(db);
    for (const job of jobs) {
      const own = rows.filter((r) => r.job === job);
      expectOneWinnerPerFire(own, job, { noWinner: ['pool', 'overlap'], poolRows: rows });
    }
    // Every winner row names its pool; the skips of a full pool name it and its holders.
    for (const w of rows.filter((r) => (r.winner ?? 0) >= 1)) {
      expect((w as RunRow & { pool: string | null }).pool).toBe('db');
    }
    const skipped = poolRows(rows);
    expect(skipped.length).toBeGreaterThan(0);
    // A fire found full is decided for the fleet: the runners after the first asker's lead skip it
    // on the first one's row (its words), rather than take its lock again.
    expect(skipped.some((s) => /\(seen by p-\d\)$/.test(s.reason ?? ''))).toBe(true);
    for (const s of skipped) {
      expect(s.status).toBe('skipped');
      // Runs by name, or a runner that holds a slot and is writing its claim right now.
      expect(s.reason).toMatch(
        /^pool db \(2 slots\) is full \(2 of 2 taken\): (load-[a-d] on p-\d \(run \d+|p-\d \(taking (a slot|2 slots)\))/,
      );
    }
  });
});

describe('a pool of one slot per host', () => {
  it('runs at most one of its jobs on each server, two in the fleet', async () => {
    const jobs = ['sync-a', 'sync-b', 'sync-c'];
    const config = writeSchedule(`
namespace: pools
pools:
  sftp: {slots: 1, scope: host}
defaults:
  pool: sftp
jobs:
${jobs.map((j) => `  ${j}: {schedule: "*/2 * * * * *", command: ${seatedJob(1, 3, true)}}`).join('\n')}
`);
    const db = fleet.db;
    const runners = await fleet.start(['h-1', 'h-2'], { config });
    await waitFor(
      'runs on both hosts at once, and pool skips',
      async () => {
        const seats = journal(config);
        return mostAtOnce(seats) >= 2 && poolRows(await runs(db)).length >= 4;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expectQuiet(runners);

    const seats = journal(config);
    expect(seats.filter((s) => s.event === 'start' && s.seat === 'none')).toEqual([]);
    for (const host of ['h-1', 'h-2']) expect(mostAtOnce(seats, (s) => s.host === host)).toBe(1);
    expect(mostAtOnce(seats)).toBe(2);
    const rows = await runs(db);
    for (const job of jobs) {
      const own = rows.filter((r) => r.job === job);
      expectOneWinnerPerFire(own, job, { noWinner: ['pool', 'overlap'], poolRows: rows });
    }
    for (const s of poolRows(rows)) {
      expect(s.reason).toMatch(/^pool sftp \(1 slot per host\) is full on h-\d \(1 of 1 taken\)/);
    }
  });
});

describe('poolFull: queue', () => {
  it('starts a fire that met a full pool when the slot frees, before its next fire', async () => {
    // `hog` holds the only slot from each 6 s instant for 3 s; `waiter` fires a second after it.
    const config = writeSchedule(`
namespace: pools
pools:
  one: {slots: 1}
jobs:
  hog:
    schedule: "*/6 * * * * *"
    pool: one
    command: ${seatedJob(1, 3)}
  waiter:
    schedule: "1-59/6 * * * * *"
    pool: one
    poolFull: queue
    command: ${seatedJob(1, 0.2)}
`);
    const db = fleet.db;
    const runners = await fleet.start(['q-1', 'q-2'], { config });
    await waitFor(
      'two waiter runs after a hog run of the same period',
      async () => queuedRuns(await runs(db)).length >= 2,
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expectQuiet(runners);

    const seats = journal(config);
    expect(seats.filter((s) => s.event === 'start' && s.seat === 'none')).toEqual([]);
    const rows = await runs(db);
    const waiters = rows.filter((r) => r.job === 'waiter');
    expectOneWinnerPerFire(waiters, 'waiter', { noWinner: ['pool', 'overlap'], poolRows: rows });
    for (const { waiter, hog } of queuedRuns(rows)) {
      // It waited for the hog's slot (it could not start before the hog ended) and ran its own
      // fire before the next one came.
      expect(waiter.started_at.getTime()).toBeGreaterThanOrEqual(hog.finished_at!.getTime());
      expect(waiter.started_at.getTime()).toBeLessThan(waiter.scheduled_at.getTime() + 6_000);
      expect(waiter.status).toBe('done');
    }
  });
});

describe('a reload while a fire waits for a slot', () => {
  it('ends the wait rather than take a slot of the pool as it was', async () => {
    // Every 20 s: `a` and `b` take both slots at :00 and :01, `q` queues at :02 (until its next
    // fire, :22). At :03 the pool shrinks to one slot on both runners; at :06 `b` ends and frees
    // slot 2 — a slot the pool no longer has: `q` must not start there beside `a`.
    const file = (slots: number) => `
namespace: pools
pools:
  db: {slots: ${slots}}
jobs:
  a: {schedule: "0-59/20 * * * * *", pool: db, command: ${seatedJob(2, 12)}}
  b: {schedule: "1-59/20 * * * * *", pool: db, command: ${seatedJob(2, 5)}}
  q: {schedule: "2-59/20 * * * * *", pool: db, poolFull: queue, command: ${seatedJob(2, 1)}}
`;
    const config = writeSchedule(file(2));
    const db = fleet.db;
    const runners = await fleet.start(['r-1', 'r-2'], { config });
    const { instant } = await nextGridInstant(db, 20_000, 1_500);
    await waitFor(
      'q waiting for a slot',
      async () => (await dbNow(db)).getTime() >= instant + 3_000,
      {
        timeoutMs: 40_000,
        intervalMs: 100,
      },
    );
    writeFileSync(config, file(1));
    const reloaded = runners.map((r) => r.waitForLog('schedule reloaded'));
    for (const r of runners) r.child.kill('SIGHUP');
    await Promise.all(reloaded);
    const qRows = await waitFor(
      'q decided',
      async () => {
        const rows = await db.query<RunRow>(
          `SELECT * FROM baton_runs WHERE job = 'q' AND scheduled_at = ?`,
          [new Date(instant + 2_000)],
        );
        return rows.length === 2 ? rows : null;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expectQuiet(runners);

    // The fire that waited did not run; the runner that waited says why.
    expect(qRows.filter((r) => (r.winner ?? 0) >= 1)).toEqual([]);
    expect(qRows.map((r) => r.reason).join('\n')).toMatch(
      /waited for a slot until a reload changed the job's pool; pool db \(2 slots\) is full/,
    );
    // And by the jobs' own account, `q` never ran beside `a` and `b` in that cycle. (A cycle
    // before it may have begun while the runners started, before `instant` was chosen: there `q`
    // waited with the pool still two slots, and rightly ran once `b` ended.)
    expect(
      journal(config).filter((s) => s.job === 'q' && s.event === 'start' && s.at >= instant),
    ).toEqual([]);
  });
});

describe("a runner that lost the lock session its run's slot was on", () => {
  it('takes no slot of the pool until that run is gone', async () => {
    // `slow` ignores SIGTERM: once its lock session is killed it lives on for a while (the
    // lost-kill grace is longer than the test; the revoked lease has the spawner SIGKILL it a
    // second later) while the server has freed its slot at once and the runner reconnects at
    // once. The test ends it itself, if it still lives, once the runner has said it holds back.
    const config = writeSchedule(`
namespace: pools
pools:
  one: {slots: 1}
jobs:
  slow: {schedule: "*/5 * * * * *", pool: one, command: ${seatedJob(1, 60, false, true)}}
  quick: {schedule: "* * * * * *", pool: one, command: ${seatedJob(1, 0.2)}}
`);
    const db = fleet.db;
    const [runner] = await fleet.start(['k-1'], {
      config,
      timings: { runs: { lostKillGraceMs: 120_000 } },
    });
    const slow = await waitFor(
      'slow holding the slot',
      async () => {
        const [row] = await db.query<{ id: number; conn: number; startedAt: Date }>(
          `SELECT id, lock_connection_id AS conn, started_at AS startedAt FROM baton_runs
            WHERE job = 'slow' AND status = 'running'`,
        );
        return row ?? null;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    // Killed only once slow ignores SIGTERM (its pid file says so): a session killed before
    // that had its runner's SIGTERM end the run, and the test then met no process to end.
    const pidFile = path.join(path.dirname(config), `pid.${slow.id}`);
    const written = () => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '';
    await waitFor('slow ignoring SIGTERM', written, {
      timeoutMs: 20_000,
      intervalMs: 50,
    });
    await db.query(`KILL ${Number(slow.conn)}`);
    // The runner says why it holds back quick's fires, while slow's processes live on.
    const heldBack = (rows: RunRow[]) =>
      rows.filter(
        (r) =>
          r.job === 'quick' &&
          /^a run of slow in pool one is still stopping on k-1 \(this runner\)/.test(
            r.reason ?? '',
          ),
      );
    await waitFor('quick held back', async () => heldBack(await runs(db)).length > 0, {
      timeoutMs: 40_000,
      intervalMs: 200,
    });
    // Ended here if it still lives. It may be gone already: the lost session revoked the runs'
    // lease, and the spawner SIGKILLs what ignores its SIGTERM a second later (spawner.ts) — on
    // a loaded machine before this line (kill ESRCH in one CI run).
    try {
      process.kill(-Number(readFileSync(pidFile, 'utf8').trim()), 'SIGKILL');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
    await waitFor(
      'slow recorded lost, and quick run again once slow is gone',
      async () => {
        const rows = await runs(db);
        const lost = rows.find((r) => r.id === slow.id && r.status === 'lost');
        return (
          lost != null && rows.some((r) => r.job === 'quick' && r.started_at > lost.finished_at!)
        );
      },
      { timeoutMs: 40_000, intervalMs: 200 },
    );
    await runner!.stop('SIGTERM');

    // The kernel's account: quick never started while slow's processes held the seat.
    expect(journal(config).filter((s) => s.event === 'start' && s.seat === 'none')).toEqual([]);
    // And by the history: no quick run started between slow's start and its end (its row's
    // `finished_at` is when its processes were gone, as its runner saw them end).
    const [lost] = await db.query<RunRow>('SELECT * FROM baton_runs WHERE id = ?', [slow.id]);
    const during = (await runs(db, 'quick')).filter(
      (r) =>
        (r.winner ?? 0) >= 1 && r.started_at < lost!.finished_at! && r.started_at > slow.startedAt,
    );
    expect(during).toEqual([]);
  });
});

describe('the views of a pool', () => {
  it('baton status, the dashboard and /metrics show its slots and the runs holding them', async () => {
    const config = writeSchedule(`
namespace: pools
pools:
  db: {slots: 2}
  sftp: {slots: 1, scope: host}
jobs:
  hold-db: {schedule: "*/2 * * * * *", pool: db, command: ["sleep", "60"]}
  hold-sftp: {schedule: "*/2 * * * * *", pool: sftp, command: ["sleep", "60"]}
`);
    const db = fleet.db;
    const port = await freePort();
    // A second's grace: the stop at the end interrupts the minute-long runs at once.
    const grace = ['--grace', '1'];
    const [v1] = await fleet.start(['v-1'], {
      config,
      args: ['--http', `127.0.0.1:${port}`, ...grace],
    });
    const [other] = await fleet.start(['v-2'], { config, args: grace });
    const holding = await waitFor('both jobs running', async () => {
      const rows = await db.query<{ job: string; host: string; id: number; pool: string }>(
        `SELECT job, host, id, pool FROM baton_runs WHERE status = 'running' ORDER BY job`,
      );
      return rows.length === 2 ? rows : null;
    });
    const [holdDb, holdSftp] = holding;
    expect(holding.map((r) => r.pool)).toEqual(['db', 'sftp']);

    const status = await baton(['status', '--json', '--config', config, '--database-url', db.url]);
    const pools = (JSON.parse(status.stdout) as { pools: PoolJson[] }).pools;
    expect(pools.map((p) => [p.name, p.slots, p.scope, p.inUse])).toEqual([
      ['db', 2, 'fleet', 1],
      ['sftp', 1, 'host', 1],
    ]);
    expect(pools[0]!.holders).toEqual([
      expect.objectContaining({ runId: holdDb!.id, job: 'hold-db', host: holdDb!.host }),
    ]);
    // One slot per live host: taken on the host that runs it, free on the other.
    expect(pools[1]!.places.map((p) => [p.host, p.used]).sort()).toEqual(
      [
        ['v-1', holdSftp!.host === 'v-1' ? 1 : 0],
        ['v-2', holdSftp!.host === 'v-2' ? 1 : 0],
      ].sort(),
    );
    const text = await baton(['status', '--config', config, '--database-url', db.url]);
    expect(text.stdout).toContain('POOLS: 2');
    expect(text.stdout).toContain(`hold-db on ${holdDb!.host} (run ${holdDb!.id}`);

    const overview = (await (await fetch(`http://127.0.0.1:${port}/api/overview`)).json()) as {
      pools: PoolJson[];
    };
    expect(overview.pools.map((p) => [p.name, p.inUse])).toEqual([
      ['db', 1],
      ['sftp', 1],
    ]);
    expect(overview.pools[0]!.holders[0]).toMatchObject({ job: 'hold-db', runId: holdDb!.id });

    const metrics = parseMetrics(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
    const value = (name: string, pool: string) =>
      metrics.find((m) => m.name === name && m.labels.pool === pool)?.value;
    expect(value('baton_pool_slots', 'db')).toBe(2);
    expect(value('baton_pool_slots_in_use', 'db')).toBe(1);
    // A host pool's gauges are this runner's host's.
    expect(value('baton_pool_slots', 'sftp')).toBe(1);
    expect(value('baton_pool_slots_in_use', 'sftp')).toBe(holdSftp!.host === 'v-1' ? 1 : 0);

    await Promise.all([v1!, other!].map((r) => r.stop('SIGTERM')));
    expectQuiet([v1!, other!]);
  });
});

/** A pool as `baton status --json` and the dashboard's overview give it. */
type PoolJson = ReturnType<typeof poolToJson>;

/** Waiter runs whose fire came while a hog run of the same period held the slot. */
function queuedRuns(rows: RunRow[]): { waiter: RunRow; hog: RunRow }[] {
  const winners = rows.filter((r) => (r.winner ?? 0) >= 1 && r.status !== 'running');
  const hogs = winners.filter((r) => r.job === 'hog');
  return winners.flatMap((waiter) => {
    if (waiter.job !== 'waiter') return [];
    const hog = hogs.find(
      (h) =>
        h.started_at.getTime() <= waiter.scheduled_at.getTime() &&
        h.finished_at!.getTime() > waiter.scheduled_at.getTime(),
    );
    return hog ? [{ waiter, hog }] : [];
  });
}
