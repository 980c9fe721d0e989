/**
 * The writes that change a winner's `running` row (its life is drawn in runs.ts): the verdict,
 * the attempt count of a retry, and `lost` — with the read that finds the rows to declare lost.
 *
 * Every write here is conditional on the row still being `running`, so the first verdict
 * written stands: the runner's own, or a reaper's that found the runner gone. Verdicts that reach
 * the pool in the same turn of the event loop go as one statement (store/batcher.ts).
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { isLockConflictError } from '../errors.js';
import { sessionLockSql } from '../lock-names.js';
import type { FinalStatus } from '../run-status.js';
import type { NotifyEventName } from '../config/defaults.js';
import type { EventTargets } from '../config/notify-targets.js';
import { Batcher, toBatchResult, type BatchResult } from './batcher.js';
import { inTransaction, type Queryable } from './deadline.js';
import { OWNER_ALIVE_SECONDS } from './runners.js';
import { enqueueNotices, failuresInARow, type Notice, type NoticeScope } from './notifications.js';
import { dependentsWithVerdict, type DependentPlan } from './dependent-fires.js';
import { flagSlow, flagTooShort, type LimitNotice } from './duration-flags.js';

export interface RunOutcome {
  status: FinalStatus;
  exitCode: number | null;
  error: string | null;
  outputTail: string | null;
  /**
   * When the run really ended, in database time (the runner's clock corrected by its measured
   * offset). Default: the moment of writing, `NOW(3)`. Never before `started_at`.
   */
  finishedAt?: Date;
  /**
   * The notifications the verdict carries (docs/notifications.md): written in its transaction, so
   * that a verdict is never recorded without them, nor they without it.
   */
  notices?: RunNotices;
  /**
   * The children that run after this run (`after:`, docs/dependencies.md): their fires written in
   * the verdict's transaction, so that a verdict is never recorded without them.
   */
  dependents?: RunDependents;
  /**
   * The run's soft limits the verdict judges in its transaction (store/duration-flags.ts), each
   * only when it may apply: `slow`, a run that may have ended past its warn without its own
   * timer having flagged it; `minMs`, a `done` run that may be shorter than the job's `min`.
   * Their events go to `notices`' targets of `slow` and `too-short`.
   */
  limits?: RunLimits;
}

/** What a verdict judges of the run's soft limits (RunOutcome.limits). */
export interface RunLimits {
  slow?: boolean;
  minMs?: number | null;
}

/** A parent run's children, for the verdict to carry (store/dependent-fires.ts). */
export interface RunDependents {
  namespace: string;
  scheduledAt: Date;
  plans: readonly DependentPlan[];
  /** How long the other runners leave the children to the verdict's writer (it judges at once). */
  leadMs: number;
  /** The parent's job (its run is the verdict's): an operator's chain's rows name the run. */
  parentJob: string;
  /**
   * Set by `finishRun` once the verdict is written: the children as written, whose generations
   * (an operator's chain's) may be later than planned (`dependentsWithVerdict`).
   */
  written?: readonly DependentPlan[];
}

/** What a run's events are about, and whom each is told to (config/notify-targets.ts). */
export interface RunNotices {
  scope: NoticeScope;
  targets: EventTargets;
}

/** The events a verdict of `status` is, for these targets (a success is a recovery or nothing). */
function verdictEvents(status: FinalStatus, targets: EventTargets): boolean {
  if (status === 'done') return (targets.recovered?.length ?? 0) > 0;
  return (targets[status as NotifyEventName]?.length ?? 0) > 0;
}

/**
 * Writes a run's verdict. Conditional on the row still being `running`: a verdict already written
 * by someone else (a reaper that declared the run lost) is never overwritten. Returns whether
 * this call wrote it.
 */
export async function finishRun(db: Queryable, id: number, outcome: RunOutcome): Promise<boolean> {
  const notices = outcome.notices;
  const told = notices != null && verdictEvents(outcome.status, notices.targets);
  const dependents = outcome.dependents?.plans.length ? outcome.dependents : null;
  const slow = outcome.limits?.slow === true;
  const minMs = outcome.status === 'done' ? (outcome.limits?.minMs ?? null) : null;
  if (told || dependents || slow || minMs != null) {
    return inTransaction(db, async (tx) => {
      const wrote = await writeVerdict(tx, id, outcome);
      if (!wrote) return false;
      if (told) await enqueueNotices(tx, await runEvents(tx, id, outcome.status, notices));
      if (slow) await flagSlow(tx, id, limitNotice(notices, 'slow'));
      if (minMs != null) await flagTooShort(tx, id, minMs, limitNotice(notices, 'too-short'));
      if (dependents) {
        const { namespace, scheduledAt, plans, leadMs } = dependents;
        dependents.written = await dependentsWithVerdict(
          tx,
          namespace,
          scheduledAt,
          plans,
          leadMs,
          {
            job: dependents.parentJob,
            runId: id,
          },
        );
      }
      return true;
    });
  }
  // `lost` may meet a reaper's `lost` (see writeVerdict): alone. Every other verdict is written
  // with those that reach here in the same turn of the event loop, in one statement.
  if (outcome.status === 'lost') return writeVerdict(db, id, outcome);
  let batcher = verdictBatchers.get(db);
  if (!batcher) {
    batcher = new Batcher((verdicts) => writeVerdicts(db, verdicts), 250, 1);
    verdictBatchers.set(db, batcher);
  }
  return batcher.load({ id, outcome });
}

/**
 * One per pool: an instant's jobs end together (handlers in library mode, short commands), and
 * their verdicts were a statement — a socket write, a parse, a commit — each.
 */
const verdictBatchers = new WeakMap<
  Queryable,
  Batcher<{ id: number; outcome: RunOutcome }, boolean>
>();

/**
 * Writes several verdicts (none `lost`) in one UPDATE, each conditional on its row still being
 * `running`. Which ones it wrote: all, when as many rows changed; else those whose row now has
 * this verdict's status — nobody else writes a `done`, `failed`, `timeout`, `killed` or
 * `interrupted` (a reaper writes only `lost`).
 */
async function writeVerdicts(
  db: Queryable,
  verdicts: readonly { id: number; outcome: RunOutcome }[],
): Promise<BatchResult<boolean>[]> {
  if (verdicts.length === 1) {
    const [{ id, outcome }] = verdicts as [{ id: number; outcome: RunOutcome }];
    return [{ value: await writeVerdict(db, id, outcome) }];
  }
  const row =
    'SELECT ? AS id, ? AS status, CAST(? AS DATETIME(3)) AS finished_at, ? AS exit_code, ' +
    '? AS error, ? AS output_tail';
  let res: ResultSetHeader;
  try {
    [res] = await db.query<ResultSetHeader>(
      `UPDATE baton_runs r
       JOIN (${verdicts.map(() => row).join(' UNION ALL ')}) v ON v.id = r.id
        SET r.status = v.status,
            r.finished_at = GREATEST(r.started_at, COALESCE(v.finished_at, NOW(3))),
            r.exit_code = v.exit_code, r.error = v.error, r.output_tail = v.output_tail
      WHERE r.status = 'running'`,
      verdicts.flatMap(({ id, outcome: o }) => [
        id,
        o.status,
        o.finishedAt ?? null,
        o.exitCode,
        o.error,
        o.outputTail,
      ]),
    );
  } catch (err) {
    // Its row locks met another writer's (a reaper marking one of the rows lost) in the other
    // order: each verdict alone then, as before batching.
    if (!isLockConflictError(err)) throw err;
    return eachAlone(db, verdicts);
  }
  if (res.affectedRows === verdicts.length) return verdicts.map(() => ({ value: true }));
  // The UPDATE committed; which of its rows it changed is read back. A read that fails fails
  // only its own verdicts (each kept and written again later, which then changes nothing).
  const statuses = async (ids: number[]) => {
    const [rows] = await db.query<RowDataPacket[]>(
      'SELECT id, status FROM baton_runs WHERE id IN (?)',
      [ids],
    );
    return new Map(rows.map((r) => [Number(r.id), String(r.status)]));
  };
  const all = await statuses(verdicts.map((v) => v.id)).catch(() => null);
  if (all) return verdicts.map(({ id, outcome }) => ({ value: all.get(id) === outcome.status }));
  const settled = await Promise.allSettled(
    verdicts.map(({ id, outcome }) => statuses([id]).then((s) => s.get(id) === outcome.status)),
  );
  return settled.map(toBatchResult);
}

/** Each verdict in a statement of its own, each with its own answer (one failing fails one). */
async function eachAlone(
  db: Queryable,
  verdicts: readonly { id: number; outcome: RunOutcome }[],
): Promise<BatchResult<boolean>[]> {
  const settled = await Promise.allSettled(
    verdicts.map(({ id, outcome }) => writeVerdict(db, id, outcome)),
  );
  return settled.map(toBatchResult);
}

/** Whom a run's `slow` or `too-short` is told to (none without `notify:`). */
function limitNotice(
  notices: RunNotices | undefined,
  event: 'slow' | 'too-short',
): LimitNotice | undefined {
  const targets = notices?.targets[event];
  return notices && targets && targets.length > 0 ? { scope: notices.scope, targets } : undefined;
}

/**
 * The rows of a verdict's events: its failure, or the recovery a success after failures is —
 * with `notify: {after: N}` (targets.failuresInARow), a failure only from the Nth in a row on,
 * and a recovery only after N or more (docs/notifications.md, "After N failures"). The streak is
 * read in this transaction, so the run's own verdict and a reaper's `lost` judge it alike.
 */
async function runEvents(
  tx: Queryable,
  runId: number,
  status: FinalStatus,
  { scope, targets }: RunNotices,
): Promise<Notice[]> {
  const after = targets.failuresInARow ?? 1;
  const before = (limit: number) =>
    failuresInARow(tx, scope.namespace, scope.subject, runId, limit);
  if (status === 'done') {
    const recovered = (await before(after)) >= after;
    return recovered ? [{ ...scope, event: 'recovered', targets: targets.recovered!, runId }] : [];
  }
  // This run is a failure of the streak: told once the `after − 1` before it failed too.
  if (after > 1 && (await before(after - 1)) < after - 1) return [];
  const event = status as 'failed' | 'timeout' | 'lost';
  return [{ ...scope, event, targets: targets[event] ?? [], runId }];
}

async function writeVerdict(db: Queryable, id: number, outcome: RunOutcome): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_runs
        SET status = ?, finished_at = GREATEST(started_at, COALESCE(?, NOW(3))), exit_code = ?,
            error = ?,
            output_tail = ?
      WHERE id = ? AND status = 'running'`,
    [
      outcome.status,
      outcome.finishedAt ?? null,
      outcome.exitCode,
      outcome.error,
      outcome.outputTail,
      id,
    ],
  );
  if (res.affectedRows === 1) return true;
  if (outcome.status === 'lost' && outcome.finishedAt) {
    // Someone else declared it lost first, stamping the moment they noticed. The runner that ran
    // it knows when it really ended — earlier (the history must not show it overlapping the next
    // run) or later (a real overlap in the detection window must not be hidden) — so its end
    // time wins. The verdict itself stays as written.
    await db.query(
      `UPDATE baton_runs SET finished_at = GREATEST(started_at, ?) WHERE id = ? AND status = 'lost'`,
      [outcome.finishedAt, id],
    );
  }
  return false;
}

/** A retry starts: the row counts it (still conditional on the run being this one, `running`). */
export async function recordAttempt(db: Queryable, id: number, attempt: number): Promise<void> {
  await db.query(`UPDATE baton_runs SET attempts = ? WHERE id = ? AND status = 'running'`, [
    attempt,
    id,
  ]);
}

/** A `running` row whose runner is gone, as the reaper finds it. */
export interface OrphanRun {
  id: number;
  job: string;
  host: string;
  lockConnectionId: number | null;
  /** The fire it ran and its worker slot: what a `lost` notification is about. */
  scheduledAt: Date;
  slot: number;
  rerun: number;
}

const SESSION_LOCK = sessionLockSql('lock_connection_id');

/**
 * The test of `findOrphanRuns` on a `running` row, with one parameter: the server's start (see
 * there). Shared with store/kill-requests.ts, which asks it of one row.
 *
 * A session lock held, but not by the connection the row names, is what an engine shows whose
 * `IS_USED_LOCK` cannot name the holder (TiDB 6.1+ answers 1; behind ProxySQL `CONNECTION_ID()`
 * is the proxy's, the holder the backend's: coordination/lock-probe.ts). There the runner's
 * registry heartbeat decides instead: gone once its row (same host, same session) is stopped or
 * silent. On MySQL and MariaDB that case does not arise (a session lock is taken only by the
 * connection it names; an id of an earlier server life is caught by `started_at`).
 */
export const RUNNER_GONE_SQL = `(lock_connection_id IS NULL OR started_at < ?
  OR IS_USED_LOCK(${SESSION_LOCK}) IS NULL
  OR (NOT (IS_USED_LOCK(${SESSION_LOCK}) <=> lock_connection_id) AND NOT EXISTS (
    SELECT 1 FROM baton_runners registry
     WHERE registry.namespace = baton_runs.namespace AND registry.host = baton_runs.host
       AND registry.lock_connection_id = baton_runs.lock_connection_id
       AND registry.stopped_at IS NULL
       AND registry.last_seen_at > NOW(3) - INTERVAL ${OWNER_ALIVE_SECONDS} SECOND)))`;

/**
 * `running` rows of the namespace whose lock session is gone: its session lock is not held by the
 * connection the row names, or the row started before the server did (connection ids restart
 * after a server restart, so an id alone could be a stranger's). `serverStartedBefore` is the
 * server's start time rounded down (a second early), which never misjudges a live row.
 *
 * Rows with `attempts = 0` are left alone: they were written by runners older than migration 0002,
 * which hold no session lock — judged by this test, they would all look dead.
 */
export async function findOrphanRuns(
  db: Queryable,
  namespace: string,
  serverStartedBefore: Date,
  jobs?: readonly string[],
): Promise<OrphanRun[]> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, job, host, lock_connection_id, scheduled_at, rerun, winner FROM baton_runs
      WHERE namespace = ? AND status = 'running' AND attempts > 0
        ${jobs == null ? '' : 'AND job IN (?)'}
        AND ${RUNNER_GONE_SQL}`,
    jobs == null ? [namespace, serverStartedBefore] : [namespace, jobs, serverStartedBefore],
  );
  return rows.map(toOrphanRun);
}

/** A `running` row of a job, and whether its runner was gone when it was read. */
export interface RunningRun extends OrphanRun {
  gone: boolean;
}

/**
 * Every `running` row of `jobs`, each with the reaper's test as it stood when read: what a
 * winner reads beside its GET_LOCK (coordination/fire-protocol.ts). A row found alive may have
 * died between this read and the lock — the winner reads again then — so the rows are all
 * returned, not only the orphans.
 */
export async function findRunningRuns(
  db: Queryable,
  namespace: string,
  jobs: readonly string[],
): Promise<RunningRun[]> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id, job, host, lock_connection_id, scheduled_at, rerun, winner,
            ${RUNNER_GONE_SQL} AS gone
       FROM baton_runs
      WHERE namespace = ? AND status = 'running' AND attempts > 0 AND job IN (?)`,
    [new Date(0), namespace, jobs],
  );
  return rows.map((r) => ({ ...toOrphanRun(r), gone: Number(r.gone) === 1 }));
}

function toOrphanRun(r: RowDataPacket): OrphanRun {
  return {
    id: Number(r.id),
    job: String(r.job),
    host: String(r.host),
    lockConnectionId: r.lock_connection_id == null ? null : Number(r.lock_connection_id),
    scheduledAt: r.scheduled_at as Date,
    slot: Number(r.winner ?? 1),
    rerun: Number(r.rerun ?? 0),
  };
}

/**
 * Declares a run of `namespace` lost (its runner vanished, or its lock session died under it).
 * Conditional on the row still being `running`: whoever writes first wins, nobody overwrites a
 * verdict. The namespace is in the statement, so that a declarer acting for one namespace (a kill
 * through the write API) can never touch another's run, whatever id it was handed.
 *
 * A run found past its warn that its runner had not told slow (it died first, or before the
 * warn and nobody looked until after it) is flagged slow in the same transaction, its `slow`
 * told with its `lost`: the reaper is the one writer left (store/duration-flags.ts).
 */
export async function markLost(
  db: Queryable,
  namespace: string,
  id: number,
  error: string,
  notices?: RunNotices,
): Promise<boolean> {
  return inTransaction(db, async (tx) => {
    const wrote = await writeLost(tx, namespace, id, error);
    if (!wrote) return false;
    if (notices && verdictEvents('lost', notices.targets)) {
      await enqueueNotices(tx, await runEvents(tx, id, 'lost', notices));
    }
    await flagSlow(tx, id, limitNotice(notices, 'slow'));
    return true;
  });
}

async function writeLost(
  db: Queryable,
  namespace: string,
  id: number,
  error: string,
): Promise<boolean> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_runs SET status = 'lost', finished_at = NOW(3), error = ?
      WHERE id = ? AND namespace = ? AND status = 'running'`,
    [error, id, namespace],
  );
  return res.affectedRows === 1;
}
