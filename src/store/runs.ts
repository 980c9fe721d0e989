/**
 * `baton_runs`, the run history: its row types and how a row is read. The statements live with
 * the module that issues them (see "Who touches it" below); the columns are documented for
 * operators in docs/history.md.
 *
 * # Overview
 *
 * One row per runner per fire it considered: the winner's row (one per worker slot of a fan-out
 * job), a `skipped` row from every other runner that looked, or a single `missed` row when nobody
 * could look. A row is inserted once, in its first status. Only a winner's row changes after
 * that: its attempt count while it is `running`, then, once, its verdict (and a `lost` row's end
 * time, see below).
 *
 * # The fire key
 *
 * `UNIQUE baton_runs_fire (namespace, job, scheduled_at, rerun, winner)` is the one-winner
 * guarantee. `rerun` is the fire's generation (migration 0012): 0 on every scheduled, catch-up and
 * ordinary manual row; 1, 2, … on the rows of re-runs of the fire (`baton run --fire T --again`,
 * `baton backfill`), each generation with a winner of its own (docs/history.md, "Re-runs").
 * `winner` is the worker slot on a winner's row (1, or 1..N with `workers: N`), 0 on a `missed`
 * row and NULL on a skip. A second claim of the same slot of the same fire is a duplicate key —
 * the claimer lost, whatever the clocks said; a skip never collides (NULLs are never equal); a
 * `missed` row is written once however many runners notice, and never stands in a winner's way.
 *
 * # The life of a row
 *
 *                claim   INSERT … WHERE NOW(3) >= scheduled_at
 *                        fire-writes.ts:claimFires ← coordination/fire-protocol.ts
 *                        (a duplicate key: that slot is `taken`; the claimer tries its next
 *                        slot, or writes a skip)
 *                                   │
 *                                   ▼
 *                            ┌─────────────┐   started_at = NOW(3), finished_at NULL,
 *      recordAttempt ──────▶ │   running   │   attempts = 1, lock_connection_id = the
 *      (a retry)             └──────┬──────┘   claimer's lock session
 *                                   │
 *          finishRun, abandonClaim  │  markLost, finishRun(lost)
 *     ┌──────────┬──────────┬───────┴──────┬─────────────┬──────────┐
 *     ▼          ▼          ▼              ▼             ▼          ▼
 *   done      failed     timeout      interrupted      lost      killed
 *
 *   finishRun      run-verdicts.ts ← fire/run-fire.ts as the run ends (any of the five), and
 *                  fire/verdict-backlog.ts for a verdict kept through an outage, written late.
 *   markLost       run-verdicts.ts ← coordination/reaper.ts (the daemon's reaper timer, and a
 *                  winner about to claim the job's next fire): its runner is gone. → lost.
 *   abandonClaim   fire-writes.ts ← coordination/fire-protocol.ts: a claim whose answer
 *                  was lost (it may have committed). → failed.
 *   recordAttempt  run-verdicts.ts ← fire/run-fire.ts before each retry; the row stays running.
 *   requestKill    kill-requests.ts ← actions/kill.ts (`baton kill`, any host): the `kill_*`
 *                  columns; the row stays running until its owner (fire/kill-watch.ts) stops the
 *                  run and finishRun writes `killed`.
 *
 *   (insert) ──▶ skipped   winner NULL, `reason` and `reason_kind` (the skip's kind, when the
 *                          caller names it): insertSkips (fire-writes.ts)
 *                          ← coordination/fire-protocol.ts, through FireBatches.skip.
 *   (insert) ──▶ missed    winner 0, `reason_kind` 'not-run': insertMissed (fire-writes.ts)
 *                          ← daemon/recovery.ts, in its look-back after (re)connecting;
 *                          'in-doubt' ← daemon/in-doubt.ts after a failover; 'not-claimed' (only
 *                          while the fire has no winner) ← fire/verdict-backlog.ts, for a fire
 *                          whose claim the database did not take; 'no-eligible-runner' (only
 *                          while the fire has no winner) ← daemon/placement-watch.ts, for a fire
 *                          of a job no live runner may run (`runOn`).
 *   finished ──▶ (gone)    DELETE, store/prune.ts only ← daemon/retention-schedule.ts and
 *                          `baton prune`; never a `running` row.
 *
 * Every change of a `running` row is conditional on `status = 'running'`: whoever writes the
 * verdict first wins (the runner, a reaper, an abandoned claim) and nobody overwrites it.
 *
 * # Where `finished_at` comes from
 *
 * - A verdict (`finishRun`): the end its runner measured, in database time (its clock corrected
 *   by the offset its lock session measures), so a verdict written late still says when the job
 *   ended; `NOW(3)` when the runner has no such measure. Never before `started_at`.
 * - `lost` by a reaper, `failed` by an abandoned claim: `NOW(3)`, when it was noticed. When the
 *   runner of a `lost` run comes back and writes `lost` itself with its measured end, that end
 *   replaces the reaper's (the verdict stays as written).
 * - `skipped` and `missed`: `NOW(3)` at the insert, the same as `started_at`.
 *
 * # Soft limits (`duration:`, migration 0025)
 *
 * A winner's row of a job with a `warn` has `warn_at`, its warn instant: written by the claim
 * (a fixed warn) or, a moment after, by duration-flags.ts `setWarn` (a relative one, from the
 * job's history). `slow_at` and `too_short` are flags set once each (duration-flags.ts), by the
 * run's own timer, its verdict or a reaper's `lost` — the one writer that sets one tells its
 * event. Neither changes the run's status.
 *
 * # Who touches it
 *
 * Writes: fire-writes.ts (every INSERT, and abandonClaim), run-verdicts.ts (the verdicts, the
 * attempt count, `lost`), kill-requests.ts (a kill request), duration-flags.ts (the soft limits'
 * flags); once, migration 0007 (`reason_kind` on the rows older than the column).
 * Deletes: prune.ts only. Reads: fire-reads.ts (those the fire protocol
 * and recovery ask), history-reads.ts (history, show, explain), dashboard-reads.ts,
 * fleet-reads.ts (status), prune.ts, server-check.ts (the fire key's presence).
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { ReasonKind, RunStatus, Trigger } from '../run-status.js';

export interface Run {
  id: number;
  namespace: string;
  job: string;
  scheduledAt: Date;
  /** The fire's generation: 0 for its scheduled run, 1, 2, … for its re-runs (migration 0012). */
  rerun: number;
  /** The row of a runner that ran the fire (a worker slot of it, for `workers: N`). */
  winner: boolean;
  /** Which worker slot (1..N) the winner took; null on other rows. */
  workerSlot: number | null;
  trigger: Trigger;
  status: RunStatus;
  /** Why this runner did not run the fire, in words; null on the rows of runs. */
  reason: string | null;
  /**
   * The same as a word (`reason_kind`, migration 0006): a skip's kind, `not-run` on a `missed`
   * row; null on the rows of runs and on older rows whose sentence was not recognised.
   */
  reasonKind: ReasonKind | null;
  host: string;
  pid: number | null;
  lockConnectionId: number | null;
  startedAt: Date;
  finishedAt: Date | null;
  exitCode: number | null;
  /** How many times the job was started for this fire (retries); 0 when it never ran. */
  attempts: number;
  error: string | null;
  outputTail: string | null;
  /** Manual parameters (`baton run --env K=V`, `-- args`), `secretEnv` values masked; or null. */
  params: RunParams | null;
  /** The pool whose slot the run held (`pool:`, migration 0024); null without one. */
  pool: string | null;
  /**
   * The timing version its fire fell under (store/timings.ts, migration 0029): a winner of a
   * scheduled fire; null for others and older rows. Absent on a run built by hand: null.
   */
  timingVersion?: number | null;
  /*
   * The soft limits (`duration:`, store/duration-flags.ts; migration 0025). `toRun` always sets
   * them; absent on a run built by hand means none.
   */
  /** When the run becomes slow (`started_at` plus the job's `duration.warn`); null: no warn. */
  warnAt?: Date | null;
  /** When baton told it slow (it ran past `warnAt`); null: not slow, or not yet. */
  slowAt?: Date | null;
  /** A `done` run shorter than the job's `duration.min`. */
  tooShort?: boolean;
}

/** What `baton_runs.params` holds (JSON). */
export interface RunParams {
  env?: Record<string, string>;
  args?: string[];
}

/** Who is attempting which fire: the fields every row has. */
export interface Attempt {
  namespace: string;
  job: string;
  scheduledAt: Date;
  /**
   * When the fire was to start: `scheduledAt` plus the job's jitter delay for a scheduled fire
   * (`src/schedule/jitter.ts`); not stored, `scheduled_at` stays the instant. Default
   * `scheduledAt`.
   */
  startAt?: Date;
  trigger: Trigger;
  host: string;
  pid: number;
  /** The worker slot a winner claims (`workers: N`); 1 for an ordinary job. */
  slot?: number;
  /** The fire's generation this attempt claims (a re-run); 0, the scheduled one, by default. */
  rerun?: number;
  /** Manual parameters, recorded on the winner's row (secrets already masked). */
  params?: RunParams | null;
  /**
   * The job's fixed `duration.warn`, in ms: the claim writes the run's `warn_at` from it
   * (store/duration-flags.ts). Absent: none (or a relative one, set once the run has started).
   */
  warnMs?: number;
  /**
   * Claim only while no generation of the fire has a `done` run (a re-run without `--again`):
   * decided by the claim's own statement, so a re-run finished elsewhere a moment before is seen.
   * A re-run without it (`--again`) claims the generation after every one that has a winner,
   * read under the job's lock (coordination/fire-protocol.ts `claim`): `rerun` is its least.
   */
  unlessDone?: boolean;
  /**
   * A child's fire claimed by the judge of its chain (`after:`, fire/dependents.ts): claimed only
   * while `judge` still holds the chain row's judgement, and the row marked started with the run
   * in the claim's transaction (store/fire-writes.ts).
   */
  chain?: ChainFence;
  /** The pool whose slot the winner holds for its run (`pool:` of the job), stored on its row. */
  pool?: string;
  /**
   * The timing version the fire falls under (store/timings.ts), stored on the winner's row;
   * absent for an operator's run, or none recorded.
   */
  timingVersion?: number;
  /**
   * A scheduled fire of a schedule created at run time: its row as the runner read it (job, key
   * and timing), and the namespace's revision the runner had read every change up to. The claim
   * is fenced by it: the revision has not moved since, or the row is still there with that
   * timing.
   */
  dynamic?: { job: string; key: string; schedule: string; timezone: string; revision: number };
}

/** The judgement a chain's claim rests on, and the parents' runs that let the child run. */
export interface ChainFence {
  judge: string;
  parentRuns: Record<string, number>;
}

/** The columns `toRun` reads, for `SELECT ${COLUMNS} FROM baton_runs`. */
export const COLUMNS = `id, namespace, job, scheduled_at, rerun, winner, triggered_by, status,
  reason, reason_kind, host, pid, lock_connection_id, started_at, finished_at, exit_code, attempts,
  error, output_tail, params, pool, timing_version, warn_at, slow_at, too_short`;

export interface RunRow extends RowDataPacket {
  id: number;
  namespace: string;
  job: string;
  scheduled_at: Date;
  rerun: number;
  winner: number | null;
  triggered_by: Trigger;
  status: RunStatus;
  reason: string | null;
  reason_kind: ReasonKind | null;
  host: string;
  pid: number | null;
  lock_connection_id: number | null;
  started_at: Date;
  finished_at: Date | null;
  exit_code: number | null;
  attempts: number;
  error: string | null;
  output_tail: string | null;
  params: string | null;
  pool: string | null;
  timing_version: number | null;
  warn_at: Date | null;
  slow_at: Date | null;
  too_short: number;
}

/** `params` as stored; a value that does not parse (written by hand) reads as none. */
function parseParams(text: string | null): RunParams | null {
  if (text == null) return null;
  try {
    return JSON.parse(text) as RunParams;
  } catch {
    return null;
  }
}

export function toRun(r: RunRow): Run {
  return {
    id: Number(r.id),
    namespace: r.namespace,
    job: r.job,
    scheduledAt: r.scheduled_at,
    rerun: Number(r.rerun ?? 0),
    winner: r.winner != null && r.winner >= 1,
    workerSlot: r.winner != null && r.winner >= 1 ? Number(r.winner) : null,
    trigger: r.triggered_by,
    status: r.status,
    reason: r.reason,
    reasonKind: r.reason_kind,
    host: r.host,
    pid: r.pid,
    lockConnectionId: r.lock_connection_id == null ? null : Number(r.lock_connection_id),
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    exitCode: r.exit_code,
    attempts: Number(r.attempts),
    error: r.error,
    outputTail: r.output_tail,
    params: parseParams(r.params ?? null),
    pool: r.pool ?? null,
    timingVersion: r.timing_version == null ? null : Number(r.timing_version),
    warnAt: r.warn_at ?? null,
    slowAt: r.slow_at ?? null,
    tooShort: Number(r.too_short ?? 0) === 1,
  };
}
