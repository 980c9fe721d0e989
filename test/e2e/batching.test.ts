/**
 * Many fires at once are contended in batches (store/batcher.ts): each step of an instant's
 * contentions — GET_LOCK, the reads, the claim, the skip rows — is one statement for all of them.
 * Here: the batched statements give every caller its own exact answer, and a fleet contending for
 * an instant of 150 jobs sends a few statements per instant, not several per fire.
 */
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockSession } from '../../src/coordination/lock-session.js';
import { openPool } from '../../src/store/connect.js';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { DeadlinePool, type Queryable } from '../../src/store/deadline.js';
import { migrateDatabase } from '../../src/store/migrate.js';
import { claimFires, insertSkips, type Claim } from '../../src/store/fire-claims.js';
import type { Attempt } from '../../src/store/runs.js';
import { finishRun, type RunOutcome } from '../../src/store/run-verdicts.js';
import { baton, writeSchedule } from '../helpers/cli.js';
import { nextGridInstant, plantRun, runs } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { countStatements, loggedStatements, statementLogEnv } from '../helpers/statements.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('batching');
let pool: DeadlinePool;

beforeAll(() => {
  pool = new DeadlinePool(openPool(parseDatabaseUrl(fleet.db.url)), 10_000);
});
afterAll(async () => {
  await pool.end();
});

/** A unique lock name of this file (named locks are server-wide). */
const lockName = (label: string) => `baton-test:${fleet.db.name}:${label}`.slice(0, 64);

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

  it('refuses a second ask for a name whose first ask is not answered yet (it would nest)', async () => {
    const session = await LockSession.open(parseDatabaseUrl(fleet.db.url));
    try {
      const name = lockName('twice');
      const [first, second] = await Promise.allSettled([
        session.tryAcquire(name),
        session.tryAcquire(name),
      ]);
      expect(first).toEqual({ status: 'fulfilled', value: true });
      expect(second.status).toBe('rejected');
      expect(String((second as PromiseRejectedResult).reason)).toMatch(/GET_LOCK would nest/);
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

describe('claims of two runners over the same fire keys, interleaved autoinc locking', () => {
  // `innodb_autoinc_lock_mode = 2` (MySQL 8's default) lets two multi-row inserts run side by
  // side; in opposite key orders they deadlock. Claims are inserted in fire-key order, and a
  // rolled-back batch falls back to one insert per claim: no claim is ever given up.
  let server: PrivateServer | undefined;
  beforeAll(async () => {
    server = await startPrivateServer({ args: ['--innodb-autoinc-lock-mode=2'] });
  }, 60_000);
  afterAll(async () => {
    await server?.destroy();
  });

  it('every claim gets an answer, each fire exactly one winner', async () => {
    const admin = await mysql.createConnection({ uri: server!.url });
    await admin.query('CREATE DATABASE interleaved');
    await admin.end();
    const target = parseDatabaseUrl(`${server!.url}/interleaved`);
    await migrateDatabase(target);
    const pools = [1, 2].map(() => new DeadlinePool(openPool(target), 10_000));
    try {
      const jobs = Array.from({ length: 60 }, (_, i) => `shared${String(i).padStart(2, '0')}`);
      for (let round = 0; round < 30; round++) {
        const at = new Date(Date.UTC(2021, 0, 1) + round * 1000);
        const claimOf = (host: string, job: string): Claim => ({
          attempt: { namespace: 'x', job, scheduledAt: at, trigger: 'schedule', host, pid: 1 },
          lockConnectionId: host === 'h1' ? 1 : 2,
        });
        // Opposite orders; h2 also claims a job only it holds the lock of.
        const [one, two] = await Promise.all([
          claimFires(
            pools[0]!,
            jobs.map((j) => claimOf('h1', j)),
          ),
          claimFires(
            pools[1]!,
            [...jobs]
              .reverse()
              .map((j) => claimOf('h2', j))
              .concat(claimOf('h2', 'mine')),
          ),
        ]);
        expect(two.at(-1)).toEqual({ runId: expect.any(Number) as number });
        for (const [i] of jobs.entries()) {
          const answers = [one[i], two[jobs.length - 1 - i]];
          expect(
            answers.filter((a) => a === 'taken'),
            `round ${round}, ${jobs[i]}`,
          ).toHaveLength(1);
        }
      }
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  }, 60_000);
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
    const jobs = Array.from(
      { length: JOBS },
      (_, i) => `  j${i}:\n    schedule: '*/10 * * * * *'\n    command: ['true']`,
    );
    const config = writeSchedule(`namespace: instant\njobs:\n${jobs.join('\n')}\n`);
    const logs = ['a', 'b'].map((h) =>
      path.join(tmpdir(), `baton-statements-${h}-${randomBytes(4).toString('hex')}.log`),
    );
    const runners = await Promise.all(
      ['a', 'b'].map(async (host, i) => {
        const [r] = await fleet.start([host], { config, env: statementLogEnv(logs[i]!) });
        return r!;
      }),
    );
    // The first instant of the ten-second grid at least 2 s away (both runners are up by then).
    const { instant, now } = await nextGridInstant(fleet.db, 10_000, 2_000);
    const fire = await waitFor(
      'both runners recorded every fire of the instant, and every run ended',
      async () => {
        const rows = (await runs(fleet.db)).filter((r) => r.scheduled_at.getTime() === instant);
        const done = rows.length === JOBS * 2 && rows.every((r) => r.status !== 'running');
        return done ? rows : null;
      },
      { timeoutMs: instant - now + 20_000 },
    );
    const settledAt = Date.now();
    await Promise.all(runners.map((r) => r.stop('SIGTERM', 10_000)));

    for (let i = 0; i < JOBS; i++) {
      const rows = fire.filter((r) => r.job === `j${i}`);
      expect(rows.filter((r) => r.winner === 1).map((r) => r.status)).toEqual(['done']);
      expect(rows.filter((r) => r.status === 'skipped')).toHaveLength(1);
    }
    // Every statement the runners sent from just before the instant until it settled: the
    // instant's contentions, plus a heartbeat a second and the odd registry or reaper round.
    const sent = logs.flatMap((f) => loggedStatements(f, instant - 200, settledAt));
    const perFirePerRunner = sent.length / (JOBS * 2);
    // One by one, it was 6.4 (GET_LOCK, the pause and orphan reads, the holder's description in
    // two to four reads, the row); batched, about 0.5 (one verdict per winner, a few per batch).
    expect(perFirePerRunner, sent.slice(0, 40).join('\n')).toBeLessThan(1.2);
    expect(sent.filter((s) => s.includes('GET_LOCK')).length).toBeLessThanOrEqual(6);
    // Start-up: the look-back asks for every job's first fire in one statement, not 150.
    for (const log of logs) {
      const firstFires = loggedStatements(log, 0, instant).filter((s) =>
        s.includes('MIN(scheduled_at)'),
      );
      expect(firstFires).toHaveLength(1);
    }
  });
});

describe('a fan-out fire whose first slot is busy', () => {
  it('takes the next slot without first naming the busy slot’s holder', async () => {
    // The holders of busy slots are named only for a skip (no slot won): naming them first,
    // with its wait, would delay every runner that wins a later slot.
    const config = writeSchedule(
      'namespace: fanout\njobs:\n  spread:\n    schedule: "*/10 * * * * *"\n' +
        '    command: ["sleep", "5"]\n    workers: 2\n',
    );
    const log = path.join(tmpdir(), `baton-statements-f-${randomBytes(4).toString('hex')}.log`);
    const [runner] = await fleet.start(['fan'], { config, env: statementLogEnv(log) });
    // Slot 1 taken by a manual run shortly before an instant of the ten-second grid: 3 s before
    // it, so that a CLI slow to start on a busy machine still holds it at the instant (a run is
    // 5 s: the previous instant's, if the runner had one, is over by then).
    const { instant, now } = await nextGridInstant(fleet.db, 10_000, 4_000);
    await sleep(instant - now - 3_000);
    const manual = baton(['run', 'spread', '--config', config, '--database-url', fleet.db.url]);
    const fire = await waitFor('the runner won slot 2 of the instant', async () => {
      const rows = await fleet.db.query<{ winner: number; host: string }>(
        "SELECT winner, host FROM baton_runs WHERE job = 'spread' AND scheduled_at = ? AND host = 'fan'",
        [new Date(instant)],
      );
      return rows[0];
    });
    expect(fire.winner).toBe(2);
    const sent = loggedStatements(log, instant - 200, instant + 1_000);
    expect(sent.filter((s) => s.startsWith('SELECT IS_USED_LOCK'))).toEqual([]);
    expect((await manual).code).toBe(0);
    expect(await runner!.stop('SIGTERM', 15_000)).toBe(0);
  });
});
