/**
 * No overlap beyond the stated bound even when the runner stalls (issue 15, found 1): the runs'
 * lease (src/execution/run-lease.ts). A runner stopped with SIGSTOP keeps its event loop from
 * seeing anything — a KILL of its lock session, a server restart — so the runner cannot stop its
 * job itself; before the lease, the job ran on beside the next fire's run for as long as the stall
 * lasted (6 s and more for a 10 s stall). The spawner now stops the runs whose lease the runner did
 * not renew, within heartbeat + deadline + margin (4.25 s) of the last answered heartbeat, SIGKILL
 * one second later: 5.25 s at most, whatever the runner does.
 *
 * Each case: three runners, a journaled 12 s job every second (`overlap: skip`). The winner is
 * stopped while its job runs; its lock session is then taken from it (a KILL 0.3 s later, or a
 * restart of the private server); another runner wins a later fire, since the lock is free. The
 * stalled winner stays stopped for 10 s. The test watches the job's process in /proc and checks:
 * - it was gone within the bound of the moment the session was taken, and so ran beside the
 *   successor's run for less than the bound (the journal says when the successor started);
 * - the stalled runner, continued, records its run `lost`, reconnects and goes on;
 * - one winner per fire, one row per runner per fire.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { createTestDatabase, runs, type RunRow, type TestDatabase } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { writeJournaledSchedule, type Journal } from '../helpers/ground-truth.js';
import mysql from 'mysql2/promise';
import { startPrivateServer } from '../helpers/private-server.js';
import { processGone } from '../helpers/procfs.js';
import { sleep, waitFor } from '../helpers/wait.js';

/** heartbeat 1 s + deadline 3 s + LEASE_MARGIN_MS 0.25 s + the SIGKILL grace 1 s. */
const BOUND_MS = 5_250;
/** What a loaded two-core machine may add to it: timers, /proc polling. */
const SLACK_MS = 750;
const STALL_MS = 10_000;

function schedule(): { config: string; journal: Journal } {
  return writeJournaledSchedule(
    (j) => `
namespace: lease
jobs:
  long:
    schedule: "* * * * * *"
    overlap: skip
    command: ${j.yaml({ work: 'sleep 12' })}
`,
  );
}

interface Stalled {
  winner: RunnerProcess;
  others: RunnerProcess[];
  runId: number;
  jobPid: number;
  /** When its job recorded its start (the machine's clock, ms). */
  startedAt: number;
  sessionId: number;
}

/** A run of `long` as its job recorded its own start (journal, or the module job's file). */
interface Start {
  runId: number;
  pid: number;
  host: string;
  /** The machine's clock, ms. */
  at: number;
}

function journalStarts(journal: Journal): () => Start[] {
  return () => journal.attempts('long').map((a) => ({ ...a, at: a.start }));
}

/**
 * Waits for a run of `long` that is live now — its job's process there, its row `running` — and
 * names its runner, job process and session. The latest start is taken, not the first: on a
 * loaded machine a runner may lose its lock session before the test stalls it, and its first run
 * with it; stalling a runner whose run is already gone would prove nothing.
 */
async function liveRun(
  db: TestDatabase,
  starts: () => Start[],
  runners: RunnerProcess[],
): Promise<Stalled> {
  return waitFor(
    'a live run of long',
    async () => {
      const attempt = starts().at(-1);
      if (!attempt || processGone(attempt.pid)) return undefined;
      const [row] = await db.query<RunRow & { lock_connection_id: number }>(
        'SELECT * FROM baton_runs WHERE id = ?',
        [attempt.runId],
      );
      if (row?.status !== 'running') return undefined;
      const winner = runners.find((r) => r.host === attempt.host)!;
      return {
        winner,
        others: runners.filter((r) => r !== winner),
        runId: attempt.runId,
        jobPid: attempt.pid,
        startedAt: attempt.at,
        sessionId: Number(row.lock_connection_id),
      };
    },
    { timeoutMs: 20_000, intervalMs: 20 },
  );
}

/** Runners a, b and c on `databaseUrl` for `body`; after it, every one continued and killed. */
async function withRunners(
  config: string,
  databaseUrl: string,
  body: (runners: RunnerProcess[]) => Promise<void>,
): Promise<void> {
  const runners = ['a', 'b', 'c'].map((host) => startRunner({ config, databaseUrl, host }));
  try {
    await Promise.all(runners.map((r) => r.ready()));
    await body(runners);
  } finally {
    for (const r of runners) {
      r.child.kill('SIGCONT');
      await r.stop('SIGKILL');
    }
  }
}

/**
 * Stops the winner, then 0.3 s later takes its lock session from it (`take`); resolves with when
 * it was stopped and when the session was taken, once `take` has.
 */
async function stallAndTake(
  s: Stalled,
  take: () => Promise<unknown>,
): Promise<{ stoppedAt: number; takenAt: number }> {
  const stoppedAt = Date.now();
  s.winner.child.kill('SIGSTOP');
  await sleep(300);
  await take();
  return { stoppedAt, takenAt: Date.now() };
}

/**
 * Keeps `s.winner` stopped for STALL_MS from `stoppedAt` while watching its job: resolves with
 * when the job's process was gone (the machine's clock), or null if it outlived the stall.
 */
async function watchTheStall(s: Stalled, stoppedAt: number): Promise<number | null> {
  let goneAt: number | null = null;
  while (Date.now() - stoppedAt < STALL_MS) {
    if (goneAt == null && processGone(s.jobPid)) goneAt = Date.now();
    await sleep(20);
  }
  s.winner.child.kill('SIGCONT');
  return goneAt;
}

/** After the stall: the run is `lost`, the runner back, the history whole. */
async function expectRecovered(db: TestDatabase, s: Stalled, label: string): Promise<void> {
  const lost = await waitFor(
    `${label}: the stalled run's row to say lost`,
    async () => {
      const row = (await runs(db, 'long')).find((r) => r.id === s.runId);
      return row?.status === 'lost' ? row : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  expect(lost.error).toMatch(/^lost: /);
  await s.winner.waitForLog('lock session reopened', () => true, 20_000);
  for (const runner of [s.winner, ...s.others]) expect(await runner.stop('SIGTERM')).toBe(0);
  const rows = await runs(db, 'long');
  expect(rows.filter((r) => r.status === 'running')).toEqual([]);
  expectOneWinnerPerFire(rows, label, { noWinner: ['overlap', 'lock-being-released'] });
}

/** The job died within the bound of `takenAt`, and ran beside its successor less than that. */
function expectWithinBound(
  starts: () => Start[],
  s: Stalled,
  takenAt: number,
  goneAt: number | null,
  label: string,
): void {
  expect(goneAt, `${label}: the stalled runner's job outlived the ${STALL_MS} ms stall`).not.toBe(
    null,
  );
  const afterTaken = goneAt! - takenAt;
  console.log(`${label}: job gone ${afterTaken} ms after the session was taken`);
  expect(afterTaken, `${label}: job gone after the session was taken (ms)`).toBeLessThanOrEqual(
    BOUND_MS + SLACK_MS,
  );
  const successor = starts().find((a) => a.runId !== s.runId && a.at >= s.startedAt);
  if (successor) {
    const overlapMs = Math.max(0, goneAt! - successor.at);
    console.log(`${label}: ran ${overlapMs} ms beside ${successor.host}'s run`);
    expect(overlapMs, `${label}: overlap with the next run (ms)`).toBeLessThanOrEqual(
      BOUND_MS + SLACK_MS,
    );
  }
}

/** A new connection to `db`'s database (its own was dropped by a server restart). */
async function createTestDatabaseHandle(db: TestDatabase): Promise<TestDatabase> {
  const conn = await mysql.createConnection({ uri: db.url, timezone: 'Z' });
  await conn.query("SET time_zone = '+00:00'");
  return {
    ...db,
    conn,
    async query<T>(sql: string, params: unknown[] = []) {
      const [rows] = await conn.query(sql, params);
      return rows as T[];
    },
    async drop() {
      await conn.end();
    },
  };
}

describe('a stalled runner cannot keep its job running beside the next run', () => {
  it('stall, then KILL of its lock session: the spawner stops the job within the bound', async () => {
    const db = await createTestDatabase('lease_kill');
    const { config, journal } = schedule();
    const starts = journalStarts(journal);
    try {
      await withRunners(config, db.url, async (runners) => {
        const s = await liveRun(db, starts, runners);
        const { stoppedAt, takenAt } = await stallAndTake(s, () =>
          db.query('KILL ?', [s.sessionId]),
        );
        const goneAt = await watchTheStall(s, stoppedAt);
        expectWithinBound(starts, s, takenAt, goneAt, 'stall + KILL');
        // The lock was free: another runner ran a later fire during the stall.
        expect(
          starts().some(
            (a) => a.host !== s.winner.host && a.at > s.startedAt && a.at < stoppedAt + STALL_MS,
          ),
          'another runner started a later fire during the stall',
        ).toBe(true);
        await expectRecovered(db, s, 'stall + KILL');
      });
    } finally {
      await db.drop();
    }
  }, 90_000);

  it('stall, then a server restart: the spawner stops the job within the bound', async () => {
    const server = await startPrivateServer();
    const db = await createTestDatabase('lease_restart', server.url);
    const { config, journal } = schedule();
    const starts = journalStarts(journal);
    try {
      await withRunners(config, db.url, async (runners) => {
        const s = await liveRun(db, starts, runners);
        // A crash and restart of the server: every session, and every lock, is gone at once.
        const { stoppedAt, takenAt } = await stallAndTake(s, () => server.kill());
        await server.start();
        const goneAt = await watchTheStall(s, stoppedAt);
        expectWithinBound(starts, s, takenAt, goneAt, 'stall + restart');
        // The test's own connection went with the restart.
        await expectRecovered(await createTestDatabaseHandle(db), s, 'stall + restart');
      });
    } finally {
      await server.destroy();
    }
  }, 90_000);

  it('a module job (its own watchdog, not the spawner) is stopped within the bound too', async () => {
    const db = await createTestDatabase('lease_module');
    const config = writeSchedule(
      `
namespace: lease
jobs:
  long:
    schedule: "* * * * * *"
    overlap: skip
    module: long.mjs
`,
      {
        'long.mjs':
          "import { appendFileSync } from 'node:fs';\n" +
          'export default async () => {\n' +
          '  const e = process.env;\n' +
          "  appendFileSync('starts', `${e.BATON_RUN_ID} ${process.pid} ${e.BATON_HOST} ${Date.now()}\\n`);\n" +
          '  await new Promise((r) => setTimeout(r, 12_000));\n' +
          '};\n',
      },
    );
    const file = path.join(path.dirname(config), 'starts');
    const starts = (): Start[] =>
      existsSync(file)
        ? readFileSync(file, 'utf8')
            .trim()
            .split('\n')
            .map((l) => l.split(' '))
            .map(([runId, pid, host, at]) => ({
              runId: Number(runId),
              pid: Number(pid),
              host: host!,
              at: Number(at),
            }))
        : [];
    try {
      await withRunners(config, db.url, async (runners) => {
        const s = await liveRun(db, starts, runners);
        const { stoppedAt, takenAt } = await stallAndTake(s, () =>
          db.query('KILL ?', [s.sessionId]),
        );
        const goneAt = await watchTheStall(s, stoppedAt);
        expectWithinBound(starts, s, takenAt, goneAt, 'stall + KILL, module job');
        await expectRecovered(db, s, 'stall + KILL, module job');
      });
    } finally {
      await db.drop();
    }
  }, 90_000);
});
