/**
 * Scenario 4 of issue 7, claim throughput of the job SDK (docs/job-sdk.md): 4 worker PROCESSES
 * (bench/lib/b-claim-worker.ts, one connection pool each) take 10,000 zero-work rows of one table
 * until none is left, once per strategy:
 *
 * - the SDK's `claimRows` (an atomic `UPDATE … WHERE status = 'ready' ORDER BY id LIMIT n`, in
 *   batches of 100 and of 10, then `completeClaim`);
 * - the SDK's `forEachSkipLocked` (`SELECT … LIMIT 1 FOR UPDATE SKIP LOCKED`, one row per
 *   transaction);
 * - the baseline without either: `SELECT … ORDER BY id LIMIT 1 FOR UPDATE`, one row per
 *   transaction (every worker queues behind the same first row);
 * - the two SDK strategies again with the workers' sessions at READ COMMITTED (InnoDB's default is
 *   REPEATABLE READ, whose gap locks are what the deadlocks come from).
 *
 * Each worker reports the row ids it took: duplicates (a row taken by two workers, or twice) must
 * be 0, and every row must end `done`. Deadlocks are counted twice over: the errors a worker saw
 * (the baseline retries and counts them; the SDK retries its own silently) and the server's
 * `Innodb_deadlocks` delta, which sees them all; `Innodb_row_lock_waits` says how often a worker
 * queued behind another.
 *
 * Then seed 002's set-up: 120 rows of 300 ms work, 4 workers with SKIP LOCKED, against the ideal
 * of 120 × 0.3 s / 4 = 9 s (quick: 40 rows × 100 ms, ideal 1 s).
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { BenchContext, Check, Scenario, ScenarioResult, TableRow } from '../lib/index.js';
import { round } from '../lib/index.js';
import type { ClaimResult, ClaimStrategy, ClaimTask } from '../lib/b-claim-worker.js';
import { lastMessages, startProcs } from '../lib/b-procs.js';

const WORKERS = 4;

interface Variant {
  key: string;
  label: string;
  strategy: ClaimStrategy;
  batch: number;
  isolation: ClaimTask['isolation'];
}

const RR = 'repeatable-read' as const;
const RC = 'read-committed' as const;

const VARIANTS: Variant[] = [
  { key: 'claim100', label: 'claimRows ×100', strategy: 'claim', batch: 100, isolation: RR },
  { key: 'claim10', label: 'claimRows ×10', strategy: 'claim', batch: 10, isolation: RR },
  {
    key: 'skiplocked',
    label: 'forEachSkipLocked',
    strategy: 'skip-locked',
    batch: 1,
    isolation: RR,
  },
  { key: 'forupdate', label: 'plain FOR UPDATE', strategy: 'for-update', batch: 1, isolation: RR },
  // The two SDK strategies again with the sessions at READ COMMITTED: no gap locks.
  {
    key: 'claim10_rc',
    label: 'claimRows ×10, READ COMMITTED',
    strategy: 'claim',
    batch: 10,
    isolation: RC,
  },
  {
    key: 'skiplocked_rc',
    label: 'forEachSkipLocked, READ COMMITTED',
    strategy: 'skip-locked',
    batch: 1,
    isolation: RC,
  },
];

interface Outcome {
  rows: number;
  seconds: number;
  rowsPerSecond: number;
  duplicates: number;
  missing: number;
  notDone: number;
  workerDeadlocks: number;
  workerLockWaitTimeouts: number;
  serverDeadlocks: number;
  rowLockWaits: number;
  lost: number;
  shares: number[];
  batches: number;
}

async function innodbCounters(ctx: BenchContext): Promise<Map<string, number>> {
  const rows = await ctx.db.query<RowDataPacket>(
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_deadlocks', 'Innodb_row_lock_waits')",
  );
  return new Map(rows.map((r) => [String(r.Variable_name), Number(r.Value)]));
}

/** A fresh `work` table of `n` ready rows, shaped as claimRows documents it. */
async function resetWork(ctx: BenchContext, n: number): Promise<void> {
  await ctx.db.query('DROP TABLE IF EXISTS work');
  await ctx.db.query(`CREATE TABLE work (
    id INT NOT NULL PRIMARY KEY,
    payload VARCHAR(64) NOT NULL,
    status VARCHAR(16) NOT NULL DEFAULT 'ready',
    worker_id VARCHAR(191) NULL,
    claim_token CHAR(36) NULL,
    claimed_at DATETIME(3) NULL,
    KEY status_id (status, id),
    KEY claim_token (claim_token)
  ) ENGINE=InnoDB`);
  // 1..n from a 100-row numbers CTE cross-joined with itself (and again past 10,000).
  await ctx.db.query(
    `INSERT INTO work (id, payload)
     WITH RECURSIVE d(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM d WHERE i < 99)
     SELECT n, CONCAT('row ', n) FROM (
       SELECT a.i * 10000 + b.i * 100 + c.i + 1 AS n FROM d a, d b, d c) s
     WHERE n <= ?`,
    [n],
  );
}

async function runStrategy(
  ctx: BenchContext,
  v: Pick<Variant, 'strategy' | 'batch' | 'isolation'>,
  rows: number,
  workMs: number,
): Promise<Outcome> {
  await resetWork(ctx, rows);
  const tasks: ClaimTask[] = Array.from({ length: WORKERS }, (_, i) => ({
    strategy: v.strategy,
    url: ctx.db.url,
    worker: `w${i + 1}`,
    batch: v.batch,
    workMs,
    isolation: v.isolation,
  }));
  const { procs, go } = await startProcs<ClaimTask, ClaimResult>('./b-claim-worker.ts', tasks, {
    timeoutMs: 300_000,
  });
  const before = await innodbCounters(ctx);
  go();
  const results = await lastMessages(procs);
  const after = await innodbCounters(ctx);
  const delta = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0);

  const all = results.flatMap((r) => r.ids);
  const distinct = new Set(all);
  const seconds =
    (Math.max(...results.map((r) => r.endMs)) - Math.min(...results.map((r) => r.startMs))) / 1000;
  const [left] = await ctx.db.query<RowDataPacket>(
    "SELECT COUNT(*) AS n FROM work WHERE status <> 'done'",
  );
  return {
    rows,
    seconds,
    rowsPerSecond: distinct.size / seconds,
    duplicates: all.length - distinct.size,
    missing: rows - distinct.size,
    notDone: Number(left?.n),
    workerDeadlocks: results.reduce((s, r) => s + r.deadlocks, 0),
    workerLockWaitTimeouts: results.reduce((s, r) => s + r.lockWaitTimeouts, 0),
    serverDeadlocks: delta('Innodb_deadlocks'),
    rowLockWaits: delta('Innodb_row_lock_waits'),
    lost: results.reduce((s, r) => s + r.lost, 0),
    shares: results.map((r) => r.ids.length),
    batches: results.reduce((s, r) => s + r.batches, 0),
  };
}

function integrity(name: string, o: Outcome): Check {
  const problems = [
    o.duplicates && `${o.duplicates} duplicate(s)`,
    o.missing && `${o.missing} row(s) never taken`,
    o.notDone && `${o.notDone} row(s) not done`,
    o.lost && `${o.lost} claimed row(s) lost before completion`,
  ].filter(Boolean);
  return {
    name: `${name}: every row taken exactly once`,
    ok: problems.length === 0,
    detail:
      problems.length === 0
        ? `${o.rows} rows, 0 duplicates, shares ${o.shares.join('/')}`
        : problems.join(', '),
  };
}

export default {
  name: 'claims',
  title: 'Claim throughput: 4 worker processes over 10,000 zero-work rows; seed 002 (SKIP LOCKED)',
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const rows = ctx.quick ? 2_000 : 10_000;
    const seed = ctx.quick ? { rows: 40, workMs: 100 } : { rows: 120, workMs: 300 };
    const figures: ScenarioResult['figures'] = { rows, workers: WORKERS };
    const table: TableRow[] = [];
    const checks: Check[] = [];
    const notes: string[] = [];

    for (const v of VARIANTS) {
      ctx.log(`${v.label}: ${WORKERS} workers over ${rows} rows`);
      const o = await runStrategy(ctx, v, rows, 0);
      table.push({
        strategy: v.label,
        rows: o.rows,
        seconds: round(o.seconds, 2),
        'rows/s': Math.round(o.rowsPerSecond),
        duplicates: o.duplicates,
        'deadlocks (worker/server)': `${o.workerDeadlocks}/${o.serverDeadlocks}`,
        'lock waits': o.rowLockWaits,
        'shares w1/w2/w3/w4': o.shares.join('/'),
      });
      figures[`${v.key}_rows_per_s`] = Math.round(o.rowsPerSecond);
      figures[`${v.key}_seconds`] = round(o.seconds, 3);
      figures[`${v.key}_duplicates`] = o.duplicates;
      figures[`${v.key}_deadlocks_server`] = o.serverDeadlocks;
      figures[`${v.key}_deadlocks_worker`] = o.workerDeadlocks;
      figures[`${v.key}_lock_wait_timeouts`] = o.workerLockWaitTimeouts;
      figures[`${v.key}_row_lock_waits`] = o.rowLockWaits;
      checks.push(integrity(v.label, o));
      if (v.strategy !== 'for-update') {
        checks.push({
          name: `${v.label}: no deadlock error reached a worker`,
          ok: o.workerDeadlocks === 0 && o.workerLockWaitTimeouts === 0,
          detail: `${o.workerDeadlocks} deadlock(s), ${o.workerLockWaitTimeouts} lock wait timeout(s) seen by workers; the server counted ${o.serverDeadlocks} deadlock(s) (retried by the SDK)`,
        });
      }
    }

    ctx.log(`seed 002: ${seed.rows} rows × ${seed.workMs} ms, ${WORKERS} workers, SKIP LOCKED`);
    const s = await runStrategy(
      ctx,
      { strategy: 'skip-locked', batch: 1, isolation: RR },
      seed.rows,
      seed.workMs,
    );
    const ideal = (seed.rows * seed.workMs) / WORKERS / 1000;
    table.push({
      strategy: `seed 002: forEachSkipLocked, ${seed.rows} rows × ${seed.workMs} ms`,
      rows: s.rows,
      seconds: round(s.seconds, 2),
      'rows/s': round(s.rowsPerSecond, 1),
      duplicates: s.duplicates,
      'deadlocks (worker/server)': `${s.workerDeadlocks}/${s.serverDeadlocks}`,
      'lock waits': s.rowLockWaits,
      'shares w1/w2/w3/w4': s.shares.join('/'),
    });
    figures.seed002_rows = seed.rows;
    figures.seed002_work_ms = seed.workMs;
    figures.seed002_seconds = round(s.seconds, 3);
    figures.seed002_ideal_seconds = ideal;
    figures.seed002_ratio_to_ideal = round(s.seconds / ideal, 3);
    figures.seed002_duplicates = s.duplicates;
    figures.seed002_deadlocks_server = s.serverDeadlocks;
    checks.push(integrity('seed 002', s));
    // Per row a transaction (BEGIN, the locking SELECT, the UPDATE, COMMIT) adds a few ms to the
    // work: 10 % of 300 ms rows; the quick run's 100 ms rows get 50 %.
    const slack = ctx.quick ? 1.5 : 1.1;
    checks.push(
      ctx.target(
        `seed 002 elapsed within ${Math.round((slack - 1) * 100)} % of the ideal`,
        s.seconds,
        ideal * slack,
        's',
        {
          context: `ideal ${ideal} s = ${seed.rows} × ${seed.workMs} ms / ${WORKERS} workers; the seed's original took 45 s`,
        },
      ),
    );

    const floors = await ctx.floors();
    figures.floor_commit_p50_ms = round(floors.commit.p50, 3);
    notes.push(
      `Each strategy: ${WORKERS} worker processes (bench/lib/b-claim-worker.ts, the built SDK from dist/), released together once connected; time = first worker's start to last worker's end. Zero-work rows measure the claiming itself, which is commit-bound (innodb_flush_log_at_trx_commit = ${ctx.server.settings.innodb_flush_log_at_trx_commit ?? '?'}; one autocommit INSERT here: p50 ${round(floors.commit.p50, 2)} ms): claimRows commits twice per batch (the claim, completeClaim), forEachSkipLocked and the FOR UPDATE loop once per row. These figures move with the disk and with other load on the machine.`,
      'Duplicates = ids reported by the workers minus distinct ids; every row is also checked done in the table. Deadlocks "worker/server": errors that reached a worker (it counts them and calls again) / the server\'s Innodb_deadlocks delta (the SDK retries its own 3 times, so only the server sees those). "lock waits" = Innodb_row_lock_waits delta: how often a worker queued behind another\'s row lock.',
      "At InnoDB's default REPEATABLE READ, locking reads and UPDATEs take next-key (gap) locks on the status index, and moving a row from one status to another inserts into gaps that other workers hold: deadlocks (SHOW ENGINE INNODB STATUS: two UPDATEs each waiting for an insert intention into a gap the other holds). The SDK retries them (3 times in a row). claimRows runs its claim at READ COMMITTED when it is given a pool (since 2026-11-30; before, at REPEATABLE READ, a few deadlocks reached the workers); forEachSkipLocked runs each row at READ COMMITTED. The READ COMMITTED rows run the same code with the sessions at READ COMMITTED as well.",
      'The plain FOR UPDATE baseline gives no duplicates either (a locking read waits for the row, then reads its committed status) but every worker queues behind the same first ready row, and the gap locks make most of those waits end in a deadlock: one deadlock or more per row, the workers no faster than one.',
    );
    return { figures, table, notes, checks };
  },
} satisfies Scenario;
