/**
 * The example jobs of jobs/ (the four seed stories) do what their seeds needed, run by baton as a
 * user would run them: their tables made by jobs/sql/<job>.sql and filled by <job>.demo.sql, the
 * job modules themselves (jobs/*.ts), real `baton start` runners sharing one fire (`workers: N`)
 * or `baton run` processes in parallel.
 *
 * - reward (seed 000): 3 runners, 1,000 queued rewards → each paid exactly once (ledger rows =
 *   payments = distinct rewards = 1,000), every worker ≥ 20 % of them. Then a worker frozen while
 *   it holds a half-paid claim, whose runner is SIGKILLed (the watchdog kills the job), leaves its
 *   claim `working`; another runner killed the same way with a job still able to react hands its
 *   claim back at once (SIGTERM from the watchdog → releaseClaim); after the reclaim bound
 *   (REWARD_RECLAIM_AFTER=3s) a manual run reclaims the stale claim, skips the rewards that were
 *   already paid (the ledger) and pays the rest: every reward paid once.
 * - population (seed 002): 4 runners, 120 places × 300 ms under SKIP LOCKED → each place
 *   refreshed exactly once for the fire (the job's own log, the places, the population rows), no
 *   failed run and no deadlock in any output, all four workers between 20 and 40 places (the
 *   structural proof of parallelism). The fire's duration (database time) is printed, not
 *   asserted: speed belongs to benchmarks, not to tests on a shared 2-core machine.
 * - settle (seed 001): run twice for the same day → identical rows (same settle_no, same totals,
 *   equal to the totals computed here from the payments of the day before the fire), the second
 *   time on a host whose clock is two days behind (the day comes from the fire); a late
 *   payment is recomputed into its total, not added twice; two hosts at once (`baton run` on
 *   both: one runs, the other gets 75 or runs after it) and two runs that do NOT share a lock
 *   (two job names over the same module: the lock lost) → still the same rows, no duplicate.
 * - feed (seed 004): the job's 32 concurrent callers × 100 requests on one pet, optimistic and
 *   locked variants at the same time on two pets → final counts exact (food 0, power and version
 *   = the food given, fed + empty = requests, nobody gave up; the optimistic callers did
 *   collide). The full 32 × 1,000 is proven at the helper level in sdk-feed-optimistic.test.ts
 *   and sdk-feed-locked.test.ts. Also a regression test: a job using ctx.db many times leaks
 *   no pool listeners.
 *
 * The runner tests start the runners first, then arm ONE fire a couple of seconds ahead (a
 * 6-field expression for that second, reloaded with SIGHUP), so every runner takes part.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import {
  baton,
  libfaketime,
  ROOT,
  writeSchedule,
  type CliResult,
  type LogLine,
  type RunnerProcess,
} from '../helpers/cli.js';
import { runs, type RunRow, type TestDatabase } from '../helpers/db.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { alive } from '../helpers/procfs.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('seed_jobs', { perTest: true });

const job = (name: string) => path.join(ROOT, 'jobs', `${name}.ts`);

/** Applies jobs/sql/<file> the way an operator would: the whole file, as it is. */
async function applySql(db: TestDatabase, ...files: string[]): Promise<void> {
  const conn = await mysql.createConnection({ uri: db.url, multipleStatements: true });
  try {
    for (const file of files) {
      await conn.query(readFileSync(path.join(ROOT, 'jobs/sql', file), 'utf8'));
    }
  } finally {
    await conn.end();
  }
}

async function rows<T>(db: TestDatabase, sql: string, params: unknown[] = []): Promise<T[]> {
  return db.query<T>(sql, params);
}

async function one<T>(db: TestDatabase, sql: string, params: unknown[] = []): Promise<T> {
  const [row] = await db.query<T>(sql, params);
  return row!;
}

/**
 * Makes the runners' next fire of `jobName` happen once, `leadMs` from now (database time): the
 * schedule file is rewritten with a 6-field expression for that exact second and every runner
 * reloads it (SIGHUP). Arming after all runners are up means every one of them can take part.
 * The file says `scheduleChanges: {settle: 0s}`: the new timing's first fire is its effective
 * instant, every runner having reloaded before it.
 */
async function armFire(
  db: TestDatabase,
  runners: RunnerProcess[],
  config: string,
  yaml: (schedule: string) => string,
  leadMs = 8_000,
): Promise<Date> {
  const { now } = await one<{ now: Date }>(db, 'SELECT UTC_TIMESTAMP(3) AS now');
  const at = new Date(Math.ceil((now.getTime() + leadMs) / 1000) * 1000);
  const cron = [
    at.getUTCSeconds(),
    at.getUTCMinutes(),
    at.getUTCHours(),
    at.getUTCDate(),
    at.getUTCMonth() + 1,
    '*',
  ].join(' ');
  writeFileSync(config, yaml(`"${cron}"`));
  for (const r of runners) r.child.kill('SIGHUP');
  await Promise.all(runners.map((r) => r.waitForLog('schedule reloaded')));
  const { now: armed } = await one<{ now: Date }>(db, 'SELECT UTC_TIMESTAMP(3) AS now');
  expect(armed.getTime(), 'every runner reloaded before the fire').toBeLessThan(at.getTime());
  return at;
}

/** The rows of one fire of a job. */
async function fireRows(db: TestDatabase, jobName: string, at: Date): Promise<RunRow[]> {
  return (await runs(db, jobName)).filter((r) => r.scheduled_at.getTime() === at.getTime());
}

/** Waits until `n` runs of the fire are recorded and none is still running. */
async function fireFinished(
  db: TestDatabase,
  jobName: string,
  at: Date,
  n: number,
  timeoutMs = 45_000,
): Promise<RunRow[]> {
  return waitFor(
    `${n} finished runs of the ${jobName} fire at ${at.toISOString()}`,
    async () => {
      const fire = await fireRows(db, jobName, at);
      return fire.length >= n && fire.every((r) => r.status !== 'running') ? fire : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/** The JSON log lines a job wrote (baton run passes the job's output through to its stdout). */
function jobLines(result: CliResult): LogLine[] {
  return result.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

function jobLine(result: CliResult, msg: string): LogLine {
  const line = jobLines(result).find((l) => l.msg === msg);
  if (!line) throw new Error(`no "${msg}" line in the job's output:\n${result.stdout}`);
  return line;
}

// ---------------------------------------------------------------------------------------------
// reward (seed 000)

// `scheduleChanges.settle: 0s`: the armed instant takes effect at once (armFire reloads every
// runner before it; no rolling deploy to wait for, docs/schedules.md "Changing a job's time").
const rewardYaml = (env: Record<string, string | number>) => (schedule: string) => `
namespace: seeds
scheduleChanges: { settle: 0s }
defaults: { timezone: UTC }
jobs:
  reward:
    schedule: ${schedule}
    module: ${job('reward')}
    workers: 3
    env: ${JSON.stringify(env)}
`;

interface Paid {
  payments: number;
  distinct: number;
  ledger: number;
  unledgered: number;
  done: number;
}

async function paid(db: TestDatabase): Promise<Paid> {
  const r = await one<Record<keyof Paid, number | string>>(
    db,
    `SELECT (SELECT COUNT(*) FROM reward_payment) AS payments,
            (SELECT COUNT(DISTINCT job_no) FROM reward_payment) AS \`distinct\`,
            (SELECT COUNT(*) FROM reward_given) AS ledger,
            (SELECT COUNT(*) FROM reward_payment p LEFT JOIN reward_given g USING (job_no)
              WHERE g.job_no IS NULL) AS unledgered,
            (SELECT COUNT(*) FROM reward_job WHERE status = 'done') AS done`,
  );
  return {
    payments: Number(r.payments),
    distinct: Number(r.distinct),
    ledger: Number(r.ledger),
    unledgered: Number(r.unledgered),
    done: Number(r.done),
  };
}

describe('reward: a reward queue shared by three runners', () => {
  it('pays each of 1,000 rewards exactly once, and every worker gets a fair share', async () => {
    const db = fleet.db;
    await applySql(db, 'reward.sql', 'reward.demo.sql');
    const yaml = rewardYaml({ REWARD_WORK_MS: 15, REWARD_BATCH: 10, REWARD_RECLAIM_AFTER: '10m' });
    const config = writeSchedule(yaml('"0 0 1 1 *"'));
    const runners = await fleet.start(['r-1', 'r-2', 'r-3'], { config });
    const at = await armFire(db, runners, config, yaml);

    const fire = await fireFinished(db, 'reward', at, 3);
    expect(fire.map((r) => [r.winner, r.status]).sort()).toEqual([
      [1, 'done'],
      [2, 'done'],
      [3, 'done'],
    ]);
    expect(new Set(fire.map((r) => r.host)).size).toBe(3);

    expect(await paid(db)).toEqual({
      payments: 1000,
      distinct: 1000,
      ledger: 1000,
      unledgered: 0,
      done: 1000,
    });
    const shares = await rows<{ worker_id: string; n: number }>(
      db,
      'SELECT worker_id, COUNT(*) AS n FROM reward_payment GROUP BY worker_id ORDER BY worker_id',
    );
    console.log(`reward shares of 1,000: ${shares.map((s) => `${s.worker_id} ${s.n}`).join(', ')}`);
    // One worker per runner (the seed's host-pid id), each with at least 20 %.
    expect(shares.map((s) => s.worker_id.replace(/-\d+$/, ''))).toEqual(['r-1', 'r-2', 'r-3']);
    for (const s of shares) expect(Number(s.n), s.worker_id).toBeGreaterThanOrEqual(200);

    await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expectQuiet(runners);
  });

  it('reclaims the claim of a killed worker after the bound and pays it once', async () => {
    const db = fleet.db;
    await applySql(db, 'reward.sql', 'reward.demo.sql');
    // 300 rewards are enough here: after two workers die, the third finishes alone.
    await db.query('DELETE FROM reward_job WHERE job_no > 300');
    const yaml = rewardYaml({ REWARD_WORK_MS: 10, REWARD_BATCH: 10, REWARD_RECLAIM_AFTER: '3s' });
    const config = writeSchedule(yaml('"0 0 1 1 *"'));
    const runners = await fleet.start(['r-1', 'r-2', 'r-3'], { config });
    const [r1, r2, r3] = runners as [RunnerProcess, RunnerProcess, RunnerProcess];
    const at = await armFire(db, runners, config, yaml);

    const jobPid = async (r: RunnerProcess) =>
      Number((await r.waitForLog('fire won: running', () => true, 30_000)).jobPid);
    const [pid1, pid2] = [await jobPid(r1), await jobPid(r2)];
    const byWorker = async (host: string) => {
      const w = await one<{ held: number; paid: number; done: number }>(
        db,
        `SELECT CAST(COALESCE(SUM(j.status = 'working'), 0) AS SIGNED) AS held,
                CAST(COALESCE(SUM(j.status = 'working' AND g.job_no IS NOT NULL), 0) AS SIGNED)
                  AS paid,
                (SELECT COUNT(*) FROM reward_payment WHERE worker_id LIKE ?) AS done
         FROM reward_job j LEFT JOIN reward_given g USING (job_no) WHERE j.worker_id LIKE ?`,
        [`${host}-%`, `${host}-%`],
      );
      return { held: Number(w.held), paid: Number(w.paid), done: Number(w.done) };
    };
    await waitFor(
      'both workers paying',
      async () => (await byWorker('r-1')).done >= 20 && (await byWorker('r-2')).done >= 20,
      { timeoutMs: 30_000 },
    );

    // Freeze r-1's job at a moment it holds a claim that is partly paid (its ledger rows are
    // committed) and partly not: the case the ledger is for.
    let frozen: { held: number; paid: number } | undefined;
    for (let i = 0; i < 200 && !frozen; i++) {
      if (!alive(pid1)) throw new Error("r-1's job ended before it was caught holding a claim");
      process.kill(pid1, 'SIGSTOP');
      // A statement the job sent just before it stopped still completes: let it land.
      await sleep(100);
      const { held, paid: paidInClaim } = await byWorker('r-1');
      if (held >= 2 && paidInClaim >= 1 && paidInClaim < held) frozen = { held, paid: paidInClaim };
      else {
        process.kill(pid1, 'SIGCONT');
        await sleep(15);
      }
    }
    expect(frozen, 'r-1 caught holding a half-paid claim').toBeDefined();

    // Both runners die (kill -9). The watchdogs kill their jobs: r-1's job is frozen and cannot
    // clean up (SIGTERM stays pending, SIGKILL follows), r-2's job gets SIGTERM and hands its
    // claim back — if it can within the second before the SIGKILL: on a loaded machine its
    // round trips may not fit, and then its claim is stranded like r-1's (a courtesy that fails,
    // not a guarantee). Either way every reward is paid once in the end, which is what is judged.
    await Promise.all([r1.stop('SIGKILL'), r2.stop('SIGKILL')]);
    await waitFor('the watchdog killed both jobs', () => !alive(pid1) && !alive(pid2), {
      timeoutMs: 10_000,
    });

    // r-3 finishes every reward that is ready; r-1's claim stays working, r-2 left none.
    await waitFor(
      "r-3's run done",
      async () =>
        (await fireRows(db, 'reward', at)).some((r) => r.host === 'r-3' && r.status === 'done'),
      { timeoutMs: 30_000 },
    );
    const stranded = await one<{ ready: number; working: number; other: number }>(
      db,
      `SELECT CAST(COALESCE(SUM(status = 'ready'), 0) AS SIGNED) AS ready,
              CAST(COALESCE(SUM(status = 'working' AND worker_id LIKE 'r-1-%'), 0) AS SIGNED)
                AS working,
              CAST(COALESCE(SUM(status = 'working' AND worker_id NOT LIKE 'r-1-%'), 0) AS SIGNED)
                AS other
       FROM reward_job`,
    );
    // r-2's claim, if its job could not hand it back in time (see above): still `working`.
    const left = await byWorker('r-2');
    console.log(`reward: r-2's job handed its claim back: ${left.held === 0 ? 'yes' : 'no'}`);
    expect(stranded).toEqual({ ready: 0, working: frozen!.held, other: left.held });
    const held = frozen!.held + left.held;
    const paidInClaims = frozen!.paid + left.paid;
    const before = await paid(db);
    expect(before).toMatchObject({
      payments: 300 - (held - paidInClaims),
      distinct: 300 - (held - paidInClaims),
      ledger: 300 - (held - paidInClaims),
      unledgered: 0,
    });

    // After the bound (database time), a manual run reclaims the claim: the rewards r-1 had paid
    // are not paid again, the others are paid now.
    await waitFor(
      'the claim older than the 3 s bound',
      async () =>
        Number(
          (
            await one<{ n: number }>(
              db,
              `SELECT COUNT(*) AS n FROM reward_job WHERE status = 'working'
               AND claimed_at < UTC_TIMESTAMP(3) - INTERVAL 3 SECOND`,
            )
          ).n,
        ) === held,
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    const manual = await baton([
      'run',
      'reward',
      '--config',
      config,
      '--database-url',
      db.url,
      '--host',
      'r-3',
    ]);
    expect(manual.stderr).toContain('reward done');
    expect(manual.code).toBe(0);
    expect(jobLine(manual, 'rewards paid')).toMatchObject({
      reclaimed: held,
      alreadyPaid: paidInClaims,
      paid: held - paidInClaims,
    });
    expect(await paid(db)).toEqual({
      payments: 300,
      distinct: 300,
      ledger: 300,
      unledgered: 0,
      done: 300,
    });
    await r3.stop('SIGTERM');
    expectQuiet([r3]);
  });
});

// ---------------------------------------------------------------------------------------------
// population (seed 002)

describe('population: four runners refresh 120 places under SKIP LOCKED', () => {
  it('refreshes every place exactly once, without deadlock, all four workers sharing', async () => {
    const db = fleet.db;
    await applySql(db, 'population.sql', 'population.demo.sql');
    const yaml = (schedule: string) => `
namespace: seeds
scheduleChanges: { settle: 0s }
defaults: { timezone: UTC }
jobs:
  population:
    schedule: ${schedule}
    module: ${job('population')}
    workers: 4
`;
    const config = writeSchedule(yaml('"0 0 1 1 *"'));
    const runners = await fleet.start(['p-1', 'p-2', 'p-3', 'p-4'], { config });
    const at = await armFire(db, runners, config, yaml);

    const fire = await fireFinished(db, 'population', at, 4, 60_000);
    expect(fire.map((r) => [r.winner, r.status]).sort()).toEqual([
      [1, 'done'],
      [2, 'done'],
      [3, 'done'],
      [4, 'done'],
    ]);
    for (const r of fire) {
      expect(r.error, r.host).toBeNull();
      expect(r.output_tail ?? '', r.host).not.toMatch(/deadlock|ER_LOCK|error/i);
    }

    // Each place once: the job's log (no unique key there, so a double would show), the places
    // and the population rows all say 120, for this fire.
    const log = await one<{ n: number; places: number; minPlace: number; maxPlace: number }>(
      db,
      `SELECT COUNT(*) AS n, COUNT(DISTINCT place_id) AS places,
              MIN(place_id) AS minPlace, MAX(place_id) AS maxPlace
       FROM population_log WHERE fire_at = ?`,
      [at],
    );
    expect(log).toEqual({ n: 120, places: 120, minPlace: 1, maxPlace: 120 });
    expect(await one(db, 'SELECT COUNT(*) AS n FROM population_log')).toEqual({ n: 120 });
    expect(await one(db, 'SELECT COUNT(*) AS n FROM place WHERE refreshed_for = ?', [at])).toEqual({
      n: 120,
    });
    expect(await one(db, 'SELECT COUNT(*) AS n FROM population WHERE fire_at = ?', [at])).toEqual({
      n: 120,
    });

    // All four took part, in balanced shares: the work ran in parallel.
    const shares = await rows<{ worker: number; host: string; n: number }>(
      db,
      `SELECT worker, host, COUNT(*) AS n FROM population_log WHERE fire_at = ?
       GROUP BY worker, host ORDER BY worker`,
      [at],
    );
    expect(shares.map((s) => s.worker)).toEqual([1, 2, 3, 4]);
    expect(new Set(shares.map((s) => s.host)).size).toBe(4);
    for (const s of shares) {
      expect(s.n, `worker ${s.worker}`).toBeGreaterThanOrEqual(20);
      expect(s.n, `worker ${s.worker}`).toBeLessThanOrEqual(40);
    }

    // The issue's timing claim (< 12 s, ideal 9 s, the seed ~20 s) is reported, not asserted.
    const span = await one<{ runs: number; work: number }>(
      db,
      `SELECT (SELECT TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at)) / 1000
               FROM baton_runs WHERE job = 'population' AND scheduled_at = ?) AS runs,
              (SELECT TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at)) / 1000
               FROM population_log WHERE fire_at = ?) AS work`,
      [at, at],
    );
    console.log(
      `population fire: ${(Number(span.runs) / 1000).toFixed(2)} s from the first run's start ` +
        `to the last run's end, ${(Number(span.work) / 1000).toFixed(2)} s from the first place ` +
        `taken to the last place done (database time; ideal 9 s); shares ` +
        shares.map((s) => `${s.host}/${s.worker} ${s.n}`).join(', '),
    );

    await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expectQuiet(runners);
  });
});

// ---------------------------------------------------------------------------------------------
// settle (seed 001)

interface Settled {
  settle_no: number;
  settle_date: string;
  provider_no: number;
  amount: string;
  txn_count: number;
}

describe('settle: the daily settlement', () => {
  const yaml = `
namespace: seeds
defaults: { timezone: UTC }
jobs:
  settle:
    schedule: "0 3 * * *"
    module: ${job('settle')}
  # The same batch under two other names: they share no lock, as when a lock was lost.
  settle-a:
    schedule: "0 3 * * *"
    module: ${job('settle')}
  settle-b:
    schedule: "0 3 * * *"
    module: ${job('settle')}
`;

  const settled = (db: TestDatabase) =>
    rows<Settled>(
      db,
      `SELECT settle_no, DATE_FORMAT(settle_date, '%Y-%m-%d') AS settle_date, provider_no,
              CAST(amount AS CHAR) AS amount, txn_count
       FROM settle_daily ORDER BY settle_date, provider_no`,
    );
  /** The totals of `day`, computed here from the payments (UTC day, half-open). */
  const expected = (db: TestDatabase, day: string) =>
    rows<Omit<Settled, 'settle_no'>>(
      db,
      `SELECT ? AS settle_date, provider_no, CAST(SUM(amount) AS CHAR) AS amount,
              COUNT(*) AS txn_count
       FROM settle_txn WHERE paid_at >= ? AND paid_at < ? + INTERVAL 1 DAY
       GROUP BY provider_no ORDER BY provider_no`,
      [day, day, day],
    );
  const run = (db: TestDatabase, config: string, jobName: string, host: string) =>
    baton(['run', jobName, '--config', config, '--database-url', db.url, '--host', host]);
  /** Two runs must settle the same "yesterday": not across a midnight (UTC). */
  const awayFromMidnight = async (db: TestDatabase) => {
    const { left } = await one<{ left: number }>(
      db,
      `SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), TIMESTAMP(UTC_DATE() + INTERVAL 1 DAY))
              DIV 1000 AS \`left\``,
    );
    if (Number(left) < 30_000) await sleep(Number(left) + 1_000);
  };

  it('gives the same rows when run twice, recomputes a late payment, and never duplicates', async () => {
    const db = fleet.db;
    const config = writeSchedule(yaml);
    await applySql(db, 'settle.sql', 'settle.demo.sql');
    await awayFromMidnight(db);

    const first = await run(db, config, 'settle', 's-1');
    expect(first.stderr).toContain('settle done');
    expect(first.code).toBe(0);
    // "Yesterday" of the fire (the manual run's instant), not of any host's clock.
    const [fire] = await runs(db, 'settle');
    const day = new Date(fire!.scheduled_at.getTime() - 86_400_000).toISOString().slice(0, 10);
    expect(jobLine(first, 'settled')).toMatchObject({ day, providers: 5 });
    const once = await settled(db);
    expect(once.map(({ settle_no: _, ...r }) => r)).toEqual(await expected(db, day));
    expect(once).toHaveLength(5);

    // Again, on a host whose clock is two days behind (libfaketime in the job's process too):
    // the day comes from the fire, not from the host's clock.
    const second = await baton(
      ['run', 'settle', '--config', config, '--database-url', db.url, '--host', 's-2'],
      {
        env: { LD_PRELOAD: libfaketime(), FAKETIME: '-2d', FAKETIME_DONT_FAKE_MONOTONIC: '1' },
      },
    );
    expect(second.code, second.stderr).toBe(0);
    const skewed = jobLine(second, 'settled');
    expect(skewed).toMatchObject({ day, providers: 5 });
    expect(Number(skewed.time)).toBeLessThan(Date.now() - 86_400_000);
    expect(await settled(db)).toEqual(once);

    // A payment of yesterday recorded late: the next run recomputes the total (set, not add).
    await db.query(
      'INSERT INTO settle_txn (provider_no, amount, paid_at) VALUES (4, 123.45, ? + INTERVAL 12 HOUR)',
      [day],
    );
    const third = await run(db, config, 'settle', 's-1');
    expect(third.code).toBe(0);
    const after = await settled(db);
    expect(after.map(({ settle_no: _, ...r }) => r)).toEqual(await expected(db, day));
    expect(after.map((r) => r.settle_no)).toEqual(once.map((r) => r.settle_no));
    const p4 = (rs: Settled[]) => rs.find((r) => r.provider_no === 4)!;
    expect(Number(p4(after).amount)).toBeCloseTo(Number(p4(once).amount) + 123.45, 2);
    expect(p4(after).txn_count).toBe(p4(once).txn_count + 1);
  });

  it('gives the same rows when two hosts run it at once, with or without a common lock', async () => {
    const db = fleet.db;
    const config = writeSchedule(yaml);
    await applySql(db, 'settle.sql', 'settle.demo.sql');
    await awayFromMidnight(db);
    const { day } = await one<{ day: string }>(
      db,
      "SELECT DATE_FORMAT(UTC_DATE() - INTERVAL 1 DAY, '%Y-%m-%d') AS day",
    );

    // Two hosts, one job: the lock lets one run; the other exits 75 (or runs after it).
    const pair = await Promise.all([
      run(db, config, 'settle', 's-1'),
      run(db, config, 'settle', 's-2'),
    ]);
    const codes = pair.map((r) => r.code).sort();
    console.log(`settle on two hosts at once: exit codes ${codes.join(', ')}`);
    expect([
      [0, 75],
      [0, 0],
    ]).toContainEqual(codes);
    const locked = await settled(db);
    expect(locked.map(({ settle_no: _, ...r }) => r)).toEqual(await expected(db, day));

    // Two runs with no lock in common, at the same time: the unique key still keeps one row per
    // (day, provider) with the recomputed total.
    const free = await Promise.all([
      run(db, config, 'settle-a', 's-1'),
      run(db, config, 'settle-b', 's-2'),
    ]);
    expect(free.map((r) => r.code)).toEqual([0, 0]);
    const both = await runs(db);
    const [a, b] = ['settle-a', 'settle-b'].map((j) => both.find((r) => r.job === j)!);
    console.log(
      `settle-a ran ${a!.started_at.toISOString()}–${a!.finished_at?.toISOString()}, ` +
        `settle-b ${b!.started_at.toISOString()}–${b!.finished_at?.toISOString()}`,
    );
    expect(await settled(db)).toEqual(locked);
    const dups = await rows(
      db,
      'SELECT settle_date, provider_no FROM settle_daily GROUP BY 1, 2 HAVING COUNT(*) > 1',
    );
    expect(dups).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// feed (seed 004)

describe('feed: 32 concurrent callers on one pet', () => {
  const yaml = (callers: number, requests: number) => `
namespace: seeds
jobs:
  feed-optimistic:
    schedule: "@daily"
    module: ${job('feed')}
    env: { FEED_MODE: optimistic, FEED_PET: 1, FEED_CALLERS: ${callers}, FEED_REQUESTS: ${requests} }
  feed-locked:
    schedule: "@daily"
    module: ${job('feed')}
    env: { FEED_MODE: locked, FEED_PET: 2, FEED_CALLERS: ${callers}, FEED_REQUESTS: ${requests} }
`;
  const pet = (db: TestDatabase, id: number) =>
    one<{ food: number; power: number; version: number }>(
      db,
      'SELECT f.count AS food, p.power AS power, f.version AS version FROM food f JOIN pet p ON p.id = f.pet_id WHERE p.id = ?',
      [id],
    );

  it('ends with exact counts, optimistic and locked (32 × 100 requests, 3,000 food each)', async () => {
    const db = fleet.db;
    await applySql(db, 'feed.sql', 'feed.demo.sql');
    const config = writeSchedule(yaml(32, 100));
    const run = (jobName: string) =>
      baton(['run', jobName, '--config', config, '--database-url', db.url, '--host', 'f-1'], {
        timeoutMs: 60_000,
      });
    const [optimistic, locked] = await Promise.all([run('feed-optimistic'), run('feed-locked')]);
    for (const r of [optimistic, locked]) {
      expect(r.code, r.stderr).toBe(0);
    }
    const o = jobLine(optimistic, 'fed');
    const l = jobLine(locked, 'fed');
    console.log(`feed: optimistic retried ${String(o.retries)} times; locked ${String(l.retries)}`);
    // 3,200 requests for 3,000 portions: 3,000 fed, 200 found the bowl empty, none lost.
    for (const line of [o, l]) {
      expect(line).toMatchObject({
        requests: 3200,
        fed: 3000,
        empty: 200,
        gaveUp: 0,
        food: 0,
        power: 3000,
        version: 3000,
      });
    }
    expect(o.mode).toBe('optimistic');
    expect(l.mode).toBe('locked');
    expect(Number(o.retries), 'the optimistic callers collided').toBeGreaterThan(0);
    expect(await pet(db, 1)).toEqual({ food: 0, power: 3000, version: 3000 });
    expect(await pet(db, 2)).toEqual({ food: 0, power: 3000, version: 3000 });
  });

  // Regression (found with these jobs): in module-host.ts as committed in e15af14, lazyPool.get
  // added another 'connection' listener to the pool on EVERY access to ctx.db (the `.on` ran on
  // each get, not once at creation): a job using ctx.db more than ten times leaked listeners,
  // Node warned (MaxListenersExceededWarning in the run's output) and each new connection ran
  // SET time_zone once per access so far. The feed job shows it at once.
  it('uses ctx.db hundreds of times without leaking pool listeners', async () => {
    const db = fleet.db;
    await applySql(db, 'feed.sql', 'feed.demo.sql');
    const config = writeSchedule(yaml(4, 10));
    const r = await baton([
      'run',
      'feed-locked',
      '--config',
      config,
      '--database-url',
      db.url,
      '--host',
      'f-1',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(jobLine(r, 'fed')).toMatchObject({ requests: 40, fed: 40 });
    expect(r.stderr).not.toMatch(/MaxListenersExceededWarning/);
  });
});
