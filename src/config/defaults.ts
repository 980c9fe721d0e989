/**
 * What a schedules file means when it leaves a setting out, and the names of the events a job may
 * be told of: plain values, no schema. The daemon imports these (and notify-targets.ts) and never
 * the schemas: its config is validated by the loader's worker thread (load-isolated.ts) and
 * arrives as plain data, so a runner does not load zod — 14 MiB resident for as long as it lives,
 * and a tenth of a second of CPU at every start (bench/README.md, "The command line's start").
 */

export const DEFAULT_NAMESPACE = 'default';
export const DEFAULT_TIMEZONE = 'UTC';
export const DEFAULT_RETRY_DELAY_MS = 10_000;
/**
 * A backoff's (`retryDelay: {initial, factor, max}`) growth when `factor` is left out, and its
 * longest wait when `max` is: Celery's `retry_backoff_max` — long enough for a dependency to
 * come back, short enough that a fire is not held for hours.
 */
export const DEFAULT_RETRY_FACTOR = 2;
export const DEFAULT_RETRY_DELAY_MAX_MS = 10 * 60_000;
/** How long a child (`after:`) waits for its parents' verdicts by default: a day. */
export const DEFAULT_AFTER_WITHIN_MS = 24 * 3600_000;

/**
 * `scheduleChanges.settle`: a changed timing takes effect no sooner than this after the first
 * runner (or operator) records it — time for a rolling deploy to reach every server
 * (schedule/timing-switch.ts, docs/schedules.md "Changing a job's time").
 */
export const DEFAULT_SETTLE_MS = 10 * 60_000;
/** The longest settle window: a change should not wait longer than a week to take effect. */
export const MAX_SETTLE_MS = 7 * 86_400_000;
/**
 * The longest `within`: 366 days. A yearly parent's child can wait for the whole year (a leap
 * one included); past that a child's fire would stay waiting longer than its parent's next
 * instant, which never helps anyone. It also keeps each child's deadline (instant + within)
 * a date MariaDB can store: the store clamps to it too (store/dependent-fires.ts).
 */
export const MAX_AFTER_WITHIN_MS = 366 * 86_400_000;

/**
 * The longest duration kept by one Node.js timer (setTimeout takes at most 2^31 − 1 ms, and runs
 * a longer one at once), as whole days: `timeout:` and `retryDelay:` of a job, a target's
 * `timeout:`, a run's `duration.warn` (fire/slow-watch.ts arms its timer with it).
 */
export const MAX_TIMER_MS = 24 * 86_400_000;

/** What the history keeps of an attempt's output by default: a batch log, not a flood. */
export const DEFAULT_OUTPUT_MAX_BYTES = 4 * 1024 * 1024;

/** The events a job may subscribe to (`summary` and `test` are baton's own). */
export const NOTIFY_EVENTS = [
  'failed',
  'timeout',
  'lost',
  'missed',
  'upstream',
  'recovered',
  'no-success',
  'runner-gone',
  'detached',
  'no-eligible-runner',
  'slow',
  'too-short',
  'blackout-started',
  'blackout-ended',
] as const;
export type NotifyEventName = (typeof NOTIFY_EVENTS)[number];

/**
 * What a job is told of when it says only `notify: {to: [...]}`: failures and recoveries, and
 * `slow` — which only a job with a `duration.warn` has, asked for by writing the warn, and told at
 * most once per run. Not `too-short`: it is a success, can come at every fire (a batch with
 * nothing to do), and the throttle does not hold it; asked for by name (docs/notifications.md).
 * A blackout's start and end are: whoever is told of the job's failures must know that its fires
 * stop and start again without anything failing, and there are two per blackout, whatever it
 * covers (one event per target, not per job).
 */
export const DEFAULT_NOTIFY_EVENTS: readonly NotifyEventName[] = [
  'failed',
  'timeout',
  'lost',
  'recovered',
  'slow',
  'blackout-started',
  'blackout-ended',
];
/**
 * The most `notify: {after}` may be: its streak is counted in the verdict's transaction, newest
 * run first, and a hundred failures in a row is no longer news worth waiting for.
 */
export const MAX_NOTIFY_AFTER = 100;
/** Failures after the first told one are summed up at most this often. */
export const DEFAULT_THROTTLE_MS = 10 * 60_000;
/** How long one delivery may take before it counts as timed out. */
export const DEFAULT_NOTIFY_TIMEOUT_MS = 10_000;
