/**
 * Many fires at once are contended in batches (store/batcher.ts): each step of an instant's
 * contentions — GET_LOCK, the reads, the claim, the skip rows — is one statement for all of them.
 * Here: the batched statements give every caller its own exact answer, and a fleet contending for
 * an instant of 150 jobs sends a few statements per instant, not several per fire.
 *
 * The runners are built in the test process (in-process-fleet.ts); each statement is told apart
 * by the runner that sent it (`runnerScope`), the test's own left out, as a statement log per
 * runner process did. A schedule's first instant is put a few seconds after the test starts
 * (`soonGrid`), not up to a ten-second grid away. The claims of two runners interleaved under
 * `innodb_autoinc_lock_mode = 2` need a private server: e2e/batching.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockSession } from '../../src/coordination/lock-session.js';
import { jobLockName } from '../../src/lock-names.js';
import { openPool } from '../../src/store/connect.js';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { DeadlinePool, type Queryable } from '../../src/store/deadline.js';
import { claimFires, insertSkips, type Claim } from '../../src/store/fire-writes.js';
import type { Attempt } from '../../src/store/runs.js';
import { finishRun, type RunOutcome } from '../../src/store/run-verdicts.js';
import { writeSchedule } from '../helpers/cli.js';
import { dbNow, plantRun, runs } from '../helpers/db.js';
import { expectQuiet } from '../helpers/fleet.js';
import { runnerScope, useInProcessFleet } from '../helpers/in-process-fleet.js';
import { countStatements, traceStatements } from '../helpers/statements.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('batching');
let pool: DeadlinePool;

beforeAll(() => {
  pool = new DeadlinePool(openPool(parseDatabaseUrl(fleet.db.url)), 10_000);
});
afterAll(async () => {
  await pool.end();
});

/** A unique lock name of this file (named locks are server-wide). */
const lockName = (label: string) => `baton-test:${fleet.db.name}:${label}`.slice(0, 64);

/** Every statement the runners send from now on, by runner; the test's own are not theirs. */
const traceRunners = () => traceStatements(() => runnerScope.getStore());

/**
 * A ten-second grid of instants (its seconds, for a schedule) whose first instant is at least
 * `marginMs` away by the database's clock: the runners started now meet one within seconds.
 */
async function soonGrid(marginMs: number): Promise<{ seconds: string; offsetMs: number }> {
  const now = (await dbNow(fleet.db)).getTime();
  const offsetMs = (Math.ceil((now + marginMs) / 1_000) * 1_000) % 10_000;
  const seconds = Array.from({ length: 6 }, (_, i) => offsetMs / 1_000 + 10 * i).join(',');
  return { seconds, offsetMs };
}

/** The first instant of that grid at least `marginMs` away by the database's clock. */
async function nextInstantOf(offsetMs: number, marginMs: number): Promise<number> {
  const now = (await dbNow(fleet.db)).getTime();
  return Math.ceil((now + marginMs - offsetMs) / 10_000) * 10_000 + offsetMs;
}

describe('GET_LOCK and RELEASE_LOCK asked in the same turn', () => {
  it('go to the server as one statement each, and every ask gets its own answer', async () => {
    const target = parseDatabaseUrl(fleet.db.url);
    const mine = await LockSession.open(target);
    const other = await LockSession.open(target);
    try {
      const names = Array.from({ length: 40 }, (_, i) => lockName(`l${i}`));
      // Another session holds every fourth lock.
      expect(
        await Promise.all(names.filter((_, i) => i % 4 === 0).map((n) => other.tryAcquire(n))),
      ).toEqual(Array(10).fill(true));
      const count = countStatements();
      const got = await Promise.all(names.map((n) => mine.tryAcquire(n)));
      const acquired = count.statements.length;
      const released = await Promise.all(
        names.filter((_, i) => got[i]).map((n) => mine.release(n)),
      );
      count.stop();
      expect(got).toEqual(names.map((_, i) => i % 4 !== 0));
      expect(released).toEqual(Array(30).fill(true));
      expect(acquired).toBe(1);
      expect(count.statements).toHaveLength(2);
      expect(count.statements[0]).toMatch(
        /^SELECT CASE WHEN @@global\.read_only THEN -1 ELSE GET_LOCK/,
      );
      // Released for real: every lock but the other session's is free.
      const [free] = await fleet.db.query<Record<string, number | null>>(
        `SELECT ${names.map((_, i) => `IS_FREE_LOCK(?) AS f${i}`).join(', ')}`,
        names,
      );
      expect(names.map((_, i) => free![`f${i}`])).toEqual(
        names.map((_, i) => (i % 4 === 0 ? 0 : 1)),
      );
    } finally {
      await mine.close();
      await other.close();
    }
  });

  it('answers a second ask for a name this session holds or asks for as busy, never nesting it', async () => {
    const session = await LockSession.open(parseDatabaseUrl(fleet.db.url));
    try {
      const name = lockName('twice');
      // Asked together (the second before the first is answered), and again while held.
      const [first, second] = await Promise.all([
        session.tryAcquire(name),
        session.tryAcquire(name),
      ]);
      expect([first, second]).toEqual([true, false]);
      expect(await session.tryAcquire(name)).toBe(false);
      // One RELEASE_LOCK frees it: it was taken once.
      expect(await session.release(name)).toBe(true);
      const [row] = await fleet.db.query<{ free: number }>('SELECT IS_FREE_LOCK(?) AS free', [
        name,
      ]);
      expect(row!.free).toBe(1);
    } finally {
      await session.close();
    }
  });
  it('lets an ask that may wait have the name once this session lets it go, or answers busy at its end', async () => {
    const session = await LockSession.open(parseDatabaseUrl(fleet.db.url));
    try {
      const name = lockName('turn');
      expect(await session.tryAcquire(name)).toBe(true);
      // Two runs of one job on one runner (two backfills of one range): the second waits here.
      let answered = false;
      const waiting = session.tryAcquire(name, 30).then((got) => {
        answered = true;
        return got;
      });
      // Its wait is local: nothing is sent to the server for it (one GET_LOCK would nest).
      await new Promise((r) => setImmediate(r));
      expect(answered).toBe(false);
      expect(await session.release(name)).toBe(true);
      expect(await waiting).toBe(true);
      // Taken once, by the waiter: one RELEASE_LOCK frees it.
      expect(await session.release(name)).toBe(true);
      const [row] = await fleet.db.query<{ free: number }>('SELECT IS_FREE_LOCK(?) AS free', [
        name,
      ]);
      expect(row!.free).toBe(1);
      // A wait that ends while the name is still held here is busy, like one the server ends.
      expect(await session.tryAcquire(name)).toBe(true);
      expect(await session.tryAcquire(name, 0.2)).toBe(false);
      expect(await session.release(name)).toBe(true);
    } finally {
      await session.close();
    }
  });
});

describe('claims of many fires in one statement', () => {
  const attempt = (job: string, scheduledAt: Date): Attempt => ({
    namespace: 'claims',
    job,
    scheduledAt,
    trigger: 'schedule',
    host: 'claimer',
    pid: 4242,
  });
  const claim = (job: string, at: Date): Claim => ({
    attempt: attempt(job, at),
    lockConnectionId: 77,
  });
  const rowOf = async (id: number) =>
    (
      await fleet.db.query<{ job: string; host: string; status: string }>(
        'SELECT job, host, status FROM baton_runs WHERE id = ?',
        [id],
      )
    )[0];

  it('gives each claim the id of its own row', async () => {
    const at = new Date(Date.UTC(2026, 0, 1, 0, 0, 0));
    const jobs = ['a', 'b', 'c', 'd'];
    const count = countStatements();
    const results = await claimFires(
      pool,
      jobs.map((j) => claim(j, at)),
    );
    count.stop();
    // One insert for all, one read back (and the session set-up of a new pool connection).
    expect(count.statements.filter((s) => !s.startsWith('SET '))).toHaveLength(2);
    for (const [i, r] of results.entries()) {
      expect(r).toEqual({ runId: expect.any(Number) as number });
      expect(await rowOf((r as { runId: number }).runId)).toEqual({
        job: jobs[i],
        host: 'claimer',
        status: 'running',
      });
    }
  });

  it('answers `taken` for a fire that already has a winner, and claims the rest', async () => {
    const at = new Date(Date.UTC(2026, 0, 1, 0, 1, 0));
    // Another runner already won b's fire.
    const [other] = await claimFires(pool, [
      { attempt: { ...attempt('b', at), host: 'other' }, lockConnectionId: 78 },
    ]);
    const results = await claimFires(
      pool,
      ['a', 'b', 'c'].map((j) => claim(j, at)),
    );
    expect(results[1]).toBe('taken');
    expect((await rowOf((other as { runId: number }).runId))!.host).toBe('other');
    for (const i of [0, 2]) {
      const row = await rowOf((results[i] as { runId: number }).runId);
      expect(row).toEqual({ job: ['a', 'b', 'c'][i], host: 'claimer', status: 'running' });
    }
    const [n] = await fleet.db.query<{ n: number }>(
      "SELECT COUNT(*) AS n FROM baton_runs WHERE namespace = 'claims' AND scheduled_at = ?",
      [at],
    );
    expect(Number(n!.n)).toBe(3);
  });

  it('answers claims of different instants in one batch, each by its own fire', async () => {
    const t1 = new Date(Date.UTC(2026, 0, 1, 0, 3, 0));
    const t2 = new Date(Date.UTC(2026, 0, 1, 0, 3, 1));
    const results = await claimFires(pool, [claim('m', t1), claim('n', t2), claim('m', t2)]);
    const rows = await Promise.all(
      results.map(async (r) => {
        const id = (r as { runId: number }).runId;
        const [row] = await fleet.db.query<{ job: string; scheduled_at: Date }>(
          'SELECT job, scheduled_at FROM baton_runs WHERE id = ?',
          [id],
        );
        return `${row!.job}@${row!.scheduled_at.toISOString()}`;
      }),
    );
    expect(rows).toEqual([
      `m@${t1.toISOString()}`,
      `n@${t2.toISOString()}`,
      `m@${t2.toISOString()}`,
    ]);
  });

  it('answers `early` for a fire not due by the database clock, writing nothing for it', async () => {
    const past = new Date(Date.UTC(2026, 0, 1, 0, 2, 0));
    const future = new Date(Date.now() + 3_600_000);
    // A fire in the future that someone else already holds a row for is `taken`, not `early`.
    await plantRun(fleet.db, {
      namespace: 'claims',
      job: 'y',
      scheduledAt: future,
      status: 'running',
      host: 'other',
    });
    const results = await claimFires(pool, [
      claim('x', future),
      claim('y', future),
      claim('z', past),
    ]);
    expect(results[0]).toBe('early');
    expect(results[1]).toBe('taken');
    expect(await rowOf((results[2] as { runId: number }).runId)).toMatchObject({ job: 'z' });
    const [n] = await fleet.db.query<{ n: number }>(
      "SELECT COUNT(*) AS n FROM baton_runs WHERE namespace = 'claims' AND job = 'x'",
    );
    expect(Number(n!.n)).toBe(0);
  });
});

describe('skip rows of many fires in one statement', () => {
  it('hands each skip the id of its own row', async () => {
    const at = new Date(Date.UTC(2026, 0, 2));
    const skips = ['p', 'q', 'r', 's', 't'].map((job, i) => ({
      attempt: {
        namespace: 'skips',
        job,
        scheduledAt: at,
        trigger: 'schedule' as const,
        host: 'skipper',
        pid: 99,
      },
      reason: `reason ${i}`,
      kind: 'taken' as const,
    }));
    const ids = await insertSkips(pool, skips);
    expect(new Set(ids).size).toBe(5);
    for (const [i, id] of ids.entries()) {
      const [row] = await fleet.db.query<{ job: string; reason: string; status: string }>(
        'SELECT job, reason, status FROM baton_runs WHERE id = ?',
        [id],
      );
      expect(row).toEqual({ job: skips[i]!.attempt.job, reason: `reason ${i}`, status: 'skipped' });
    }
  });
});

describe('verdicts of runs that end together', () => {
  it("are written in one statement, each with its own values, none over a reaper's `lost`", async () => {
    const at = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(
        await plantRun(fleet.db, {
          namespace: 'verdicts',
          job: `v${i}`,
          scheduledAt: at,
          status: 'running',
          startedAt: at,
        }),
      );
    }
    // A reaper declared the third one lost before its runner's verdict came.
    await fleet.db.query(`UPDATE baton_runs SET status = 'lost', error = 'reaped' WHERE id = ?`, [
      ids[2],
    ]);
    const ended = new Date(at.getTime() + 1_234);
    const outcomes: RunOutcome[] = [
      { status: 'done', exitCode: 0, error: null, outputTail: 'ok\n', finishedAt: ended },
      { status: 'failed', exitCode: 3, error: 'exit 3', outputTail: 'boom' },
      { status: 'done', exitCode: 0, error: null, outputTail: '' },
      { status: 'timeout', exitCode: null, error: 'timeout: 1 s', outputTail: null },
      // Said to have ended before it started (a clock estimate): never before started_at.
      {
        status: 'interrupted',
        exitCode: null,
        error: 'stopped',
        outputTail: 'x',
        finishedAt: new Date(at.getTime() - 5_000),
      },
    ];
    const count = countStatements();
    const recorded = await Promise.all(ids.map((id, i) => finishRun(pool, id, outcomes[i]!)));
    count.stop();
    expect(recorded).toEqual([true, true, false, true, true]);
    // The UPDATE for all five, and the read that tells which of them it wrote.
    expect(count.statements.filter((q) => /^\s*UPDATE baton_runs/.test(q))).toHaveLength(1);
    expect(count.statements).toHaveLength(2);
    const rows = new Map(
      (
        await fleet.db.query<{
          id: number;
          status: string;
          finished_at: Date | null;
          exit_code: number | null;
          error: string | null;
          output_tail: string | null;
        }>(
          'SELECT id, status, finished_at, exit_code, error, output_tail FROM baton_runs WHERE id IN (?)',
          [ids],
        )
      ).map((r) => [r.id, r]),
    );
    expect(rows.get(ids[0]!)).toMatchObject({
      status: 'done',
      exit_code: 0,
      error: null,
      output_tail: 'ok\n',
      finished_at: ended,
    });
    expect(rows.get(ids[1]!)).toMatchObject({
      status: 'failed',
      exit_code: 3,
      error: 'exit 3',
      output_tail: 'boom',
    });
    expect(rows.get(ids[1]!)!.finished_at).not.toBeNull();
    expect(rows.get(ids[2]!)).toMatchObject({ status: 'lost', error: 'reaped' });
    expect(rows.get(ids[3]!)).toMatchObject({
      status: 'timeout',
      exit_code: null,
      output_tail: null,
    });
    expect(rows.get(ids[4]!)).toMatchObject({ status: 'interrupted', finished_at: at });

    // One verdict alone: its own UPDATE, nothing more.
    const lone = await plantRun(fleet.db, {
      namespace: 'verdicts',
      job: 'lone',
      scheduledAt: at,
      status: 'running',
    });
    const one = countStatements();
    expect(
      await finishRun(pool, lone, { status: 'done', exitCode: 0, error: null, outputTail: '' }),
    ).toBe(true);
    one.stop();
    expect(one.statements).toHaveLength(1);
  });

  it('answer each by its own row when the read after the UPDATE fails', async () => {
    const at = new Date(Date.UTC(2026, 0, 2, 3, 4, 6));
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(
        await plantRun(fleet.db, {
          namespace: 'verdicts',
          job: `w${i}`,
          scheduledAt: at,
          status: 'running',
        }),
      );
    }
    await fleet.db.query(`UPDATE baton_runs SET status = 'lost', error = 'reaped' WHERE id = ?`, [
      ids[1],
    ]);
    // The real pool, but the read of the batch's statuses meets its deadline (once).
    let failed = 0;
    const flaky: Queryable = {
      query: (sql, values) => {
        if (/^SELECT id, status FROM baton_runs/.test(sql) && failed++ === 0) {
          return Promise.reject(new Error('statement deadline: 10000 ms'));
        }
        return pool.query(sql, values);
      },
    };
    const done: RunOutcome = { status: 'done', exitCode: 0, error: null, outputTail: '' };
    const recorded = await Promise.all(ids.map((id) => finishRun(flaky, id, done)));
    // Written, not written (the reaper's `lost` stays), written: not three failures.
    expect(recorded).toEqual([true, false, true]);
    const rows = await fleet.db.query<{ id: number; status: string }>(
      'SELECT id, status FROM baton_runs WHERE id IN (?) ORDER BY id',
      [ids],
    );
    expect(rows.map((r) => r.status)).toEqual(['done', 'lost', 'done']);
  });
});

describe('an instant of 150 jobs on two runners', () => {
  it('runs each fire once, and costs about one statement per fire per runner, not six', async () => {
    const JOBS = 150;
    const grid = await soonGrid(2_500);
    const jobs = Array.from(
      { length: JOBS },
      (_, i) => `  j${i}:\n    schedule: '${grid.seconds} * * * * *'\n    command: ['true']`,
    );
    const config = writeSchedule(`namespace: instant\njobs:\n${jobs.join('\n')}\n`);
    const trace = traceRunners();
    const runners = await fleet.start(['a', 'b'], { config });
    // The first instant of the grid at least 1 s away (both runners are up: their start-up's
    // statements are sent before it).
    const instant = await nextInstantOf(grid.offsetMs, 1_000);
    const fire = await waitFor(
      'both runners recorded every fire of the instant, and every run ended',
      async () => {
        const rows = (await runs(fleet.db)).filter((r) => r.scheduled_at.getTime() === instant);
        const done = rows.length === JOBS * 2 && rows.every((r) => r.status !== 'running');
        return done ? rows : null;
      },
      { timeoutMs: instant - Date.now() + 20_000 },
    );
    const settledAt = Date.now();
    await Promise.all(runners.map((r) => r.stop()));
    trace.stop();
    expectQuiet(runners);

    for (let i = 0; i < JOBS; i++) {
      const rows = fire.filter((r) => r.job === `j${i}`);
      expect(rows.filter((r) => r.winner === 1).map((r) => r.status)).toEqual(['done']);
      expect(rows.filter((r) => r.status === 'skipped')).toHaveLength(1);
    }
    // Every statement the runners sent from just before the instant until it settled: the
    // instant's contentions, plus a heartbeat a second and the odd registry or reaper round.
    const ofRunners = trace.statements.filter((s) => s.scope === 'a' || s.scope === 'b');
    const sent = ofRunners
      .filter((s) => s.at >= instant - 200 && s.at <= settledAt)
      .map((s) => s.sql.replace(/\s+/g, ' ').slice(0, 60));
    const perFirePerRunner = sent.length / (JOBS * 2);
    // One by one, it was 6.4 (GET_LOCK, the pause and orphan reads, the holder's description in
    // two to four reads, the row); batched, about 0.5 (one verdict per winner, a few per batch).
    expect(perFirePerRunner, sent.slice(0, 40).join('\n')).toBeLessThan(1.2);
    expect(sent.filter((s) => s.includes('GET_LOCK')).length).toBeLessThanOrEqual(6);
    // Start-up: the look-back asks for every job's first fire in one statement, not 150.
    for (const host of ['a', 'b']) {
      const firstFires = ofRunners.filter(
        (s) => s.scope === host && s.at < instant && s.sql.includes('MIN(scheduled_at)'),
      );
      expect(firstFires, host).toHaveLength(1);
    }
  });
});

describe('a fan-out fire whose first slot is busy', () => {
  it('takes the next slot without first naming the busy slot’s holder', async () => {
    // The holders of busy slots are named only for a skip (no slot won): naming them first,
    // with its wait, would delay every runner that wins a later slot.
    const grid = await soonGrid(2_500);
    const config = writeSchedule(
      `namespace: fanout\njobs:\n  spread:\n    schedule: "${grid.seconds} * * * * *"\n` +
        '    command: ["true"]\n    workers: 2\n',
    );
    // Slot 1 is busy: another session (a manual run's, another runner's) holds its lock — the
    // job's plain lock — from before the runner starts until the runner has won slot 2.
    const holder = await LockSession.open(parseDatabaseUrl(fleet.db.url));
    try {
      const slot1 = jobLockName(fleet.db.name, 'fanout', 'spread', 1);
      expect(await holder.tryAcquire(slot1)).toBe(true);
      const trace = traceRunners();
      const [runner] = await fleet.start(['fan'], { config });
      const won = await runner!.nextEvent('fire:won', (e) => e.fire.job === 'spread', 25_000);
      const wonBy = Date.now();
      const instant = won.fire.scheduledAt.getTime();
      const [fire] = await fleet.db.query<{ winner: number; host: string }>(
        "SELECT winner, host FROM baton_runs WHERE job = 'spread' AND scheduled_at = ? AND host = 'fan'",
        [won.fire.scheduledAt],
      );
      expect(fire!.winner).toBe(2);
      // Its contention, up to the win (however late a loaded machine let it come): a holder
      // named first would have been named before it. The window holds the contention itself.
      const sent = trace.statements.filter(
        (s) => s.scope === 'fan' && s.at >= instant - 200 && s.at <= wonBy,
      );
      trace.stop();
      expect(sent.filter((s) => s.sql.includes('GET_LOCK')).length).toBeGreaterThan(0);
      expect(sent.filter((s) => s.sql.startsWith('SELECT IS_USED_LOCK'))).toEqual([]);
      // The slot was busy throughout: the lock was still the holder's to give back.
      expect(await holder.release(slot1)).toBe(true);
      await runner!.stop();
      expectQuiet([runner!]);
    } finally {
      await holder.close();
    }
  });
});
