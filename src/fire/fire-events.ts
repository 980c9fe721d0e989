/**
 * What one fire reports as it goes (`run-fire.ts` emits; the daemon's log and the metrics listen).
 * Every event names its fire, so a listener needs no state of its own to say which one it was.
 */
import type { FinalStatus, SkipKind, Trigger } from '../run-status.js';
import type { Emitter } from '../events.js';
import type { OutputLine } from './output-lines.js';

/** The fire an event is about. */
export interface FireRef {
  job: string;
  scheduledAt: Date;
  trigger: Trigger;
}

/**
 * Why a fire was not attempted — or not attempted to the end — each with its own log line; the
 * metrics fold them into a few labels (`NotAttempted`):
 * - `no-session`: no usable lock session when the fire came (nobody can prove it is alone);
 * - `session-lost`: the session died while the fire was contended;
 * - `read-only`: the database refused the lock as read-only (a demoted primary);
 * - `job-database`: a module job's `database:` connection is unusable;
 * - `error`: contention failed, or the run could not be started (usually the database; the
 *   error says).
 *
 * (Fires the daemon's loop woke too late for are its own event, `loop:missedFires`.)
 */
export type NotAttemptedCause =
  | 'no-session'
  | 'session-lost'
  | 'read-only'
  | 'job-database'
  | 'error'
  /** The claim's fence refused it: the runner's read of the job's schedule was stale. */
  | 'stale-schedule';

/** The metrics' label for a not-attempted fire. */
export type NotAttempted = 'no-database' | 'read-only' | 'late-wake' | 'error' | 'stale-schedule';

export const NOT_ATTEMPTED_LABEL: Record<NotAttemptedCause, NotAttempted> = {
  'no-session': 'no-database',
  'session-lost': 'no-database',
  'read-only': 'read-only',
  'job-database': 'error',
  error: 'error',
  'stale-schedule': 'stale-schedule',
};

export interface FireEventMap {
  /**
   * Won and started. `lagMs` (start minus planned start, database time; the planned start is
   * the instant plus the job's jitter delay) for scheduled fires; `contendMs` null for queued fires, whose contention includes waiting for the previous run.
   */
  'fire:won': {
    fire: FireRef;
    runId: number;
    jobPid: number | undefined;
    contendMs: number | null;
    lagMs: number | null;
  };
  'fire:skipped': {
    fire: FireRef;
    /** null: counted in the job's skip tally (`skips: tally`), no row. */
    runId: number | null;
    kind: SkipKind;
    reason: string;
    contendMs: number | null;
  };
  'fire:notAttempted': { fire: FireRef; cause: NotAttemptedCause; error?: string };
  /** A run that started but could not be completed by baton (a retry's row, a spawn). */
  'run:notCompleted': { fire: FireRef; runId: number; error: string };
  'run:finished': {
    fire: FireRef;
    runId: number;
    status: FinalStatus;
    exitCode: number | null;
    attempts: number;
    error: string | null;
    durationMs: number;
  };
  /** Lines a run printed, for the runner's log (`output: {log: true}`). */
  'run:output': { fire: FireRef; runId: number; attempt: number; lines: OutputLine[] };
  /** The verdict could not be written (the database is gone); it is kept and written later. */
  'verdict:kept': { fire: FireRef; runId: number; status: FinalStatus };
}

/** The pipeline only tells; the daemon's map (daemon/runner-events.ts) is a superset of it. */
export type FireEvents = Emitter<FireEventMap>;
