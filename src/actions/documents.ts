/**
 * The JSON documents every surface describes a run and a pause with: `history --json`,
 * `show --json`, `explain --json`, `run --json`, `list --json`, the write API's answers and the
 * dashboard's data. One document each, so a script reads the same fields whichever way it asked.
 */
import type { Run } from '../store/runs.js';
import type { Pause } from '../store/pauses.js';
import type { ParentRuns } from '../store/dependent-fire-reads.js';

/** A run: its fire, who ran it, how it ended. */
export function runDocument(run: Run) {
  return {
    id: run.id,
    job: run.job,
    scheduledAt: run.scheduledAt.toISOString(),
    rerun: run.rerun,
    winner: run.winner,
    workerSlot: run.workerSlot,
    trigger: run.trigger,
    status: run.status,
    reason: run.reason,
    reasonKind: run.reasonKind,
    host: run.host,
    pid: run.pid,
    startedAt: run.startedAt.toISOString(),
    finishedAt: run.finishedAt?.toISOString() ?? null,
    durationMs: durationMs(run),
    exitCode: run.exitCode,
    attempts: run.attempts,
    error: run.error,
    params: run.params,
    // The pool whose slot the run held (`pool:`, docs/pools.md); null without one.
    pool: run.pool,
    // The timing version its fire fell under (docs/schedules.md, "Changing a job's time").
    timingVersion: run.timingVersion ?? null,
    // The soft limits (`duration:`): when it becomes slow and when it was told so (null: no warn,
    // not slow), and whether a success was shorter than `min`.
    warnAt: run.warnAt?.toISOString() ?? null,
    slowAt: run.slowAt?.toISOString() ?? null,
    tooShort: run.tooShort ?? false,
  };
}

/**
 * A run with the parent runs behind it (docs/dependencies.md): for a child's run (`after:`), the
 * runs of its parents that let it start; for its `upstream` skip row, the one that stopped it;
 * null on every other row. `history`, `show` and `explain` read them (`upstream`).
 */
export function chainedRunDocument(run: Run, upstream: ParentRuns | null | undefined) {
  return { ...runDocument(run), upstream: upstream ?? null };
}

/**
 * A run as the HTTP surfaces (the dashboard's data) show it: the same document (its `upstream`
 * where the caller read it; null otherwise) without `params`,
 * a manual run's `--env` values and arguments. Only a job's `secretEnv` values are masked in
 * them, and a read token (or loopback without one) is a weaker key than the database access
 * `history` and `show` need.
 */
export function runDocumentOverHttp(run: Run, upstream: ParentRuns | null = null) {
  const { params: _params, ...doc } = chainedRunDocument(run, upstream);
  return doc;
}

/** A run's duration in ms; null while it has not finished. */
export function durationMs(run: Run): number | null {
  return run.finishedAt ? run.finishedAt.getTime() - run.startedAt.getTime() : null;
}

/** A pause (null: not paused). */
export interface PauseDocument {
  /** `operator@host`: whom to ask. */
  pausedBy: string;
  pausedAt: string;
  reason: string | null;
}

export function pauseDocument(p: Pause | null | undefined): PauseDocument | null {
  return p ? { pausedBy: p.pausedBy, pausedAt: p.pausedAt.toISOString(), reason: p.reason } : null;
}
