/**
 * What happened while nobody could coordinate: after start-up and after every reconnect, a runner
 * looks back over each job's recent fires.
 *
 * - **Catch-up** (`catchUp: 10m`): the latest fire inside the window that has no winner runs once
 *   now, with `trigger = catchup` and its own `scheduled_at`, through the usual fire protocol —
 *   the fire key lets one host do it however many notice.
 * - **Missed**: every fire in the window (the catch-up window, else the last hour) that nobody
 *   attempted at all gets one `missed` row, so "it did not run at 03:00" is in the history. This
 *   waits a few seconds (`MISSED_SETTLE_MS`) so runners contending the latest fires have written
 *   their rows first.
 *
 * The window never reaches back before the job is known to exist: its first row in the history,
 * or else this runner's start (a job added today has no missed fires from yesterday).
 */
import type { JobDefinition } from '../config/schema.js';
import type { Schedule } from '../schedule/cron.js';

/** How far back missed fires are recorded for a job without `catchUp`. */
export const MISSED_WINDOW_MS = 3_600_000;
/** At most this many fires per job are looked at in one pass (an every-second job, an hour). */
export const MAX_FIRES_PER_PASS = 3_600;
/** Runners contending the most recent fires have written their rows by then. */
export const MISSED_SETTLE_MS = 5_000;

export interface LookBack {
  /** Fires in the window, oldest first (the newest MAX_FIRES_PER_PASS of them). */
  fires: Date[];
  /** The window's start. */
  from: Date;
}

/** The job's fires in (max(now − window, knownSince), now]. */
export function lookBack(
  job: JobDefinition,
  schedule: Schedule,
  now: Date,
  knownSince: Date,
): LookBack {
  const window = job.catchUpMs ?? MISSED_WINDOW_MS;
  const from = new Date(Math.max(now.getTime() - window, knownSince.getTime()));
  const fires: Date[] = [];
  for (let at = schedule.nextAfter(from); at && at <= now; at = schedule.nextAfter(at)) {
    fires.push(at);
    if (fires.length > MAX_FIRES_PER_PASS) fires.shift();
  }
  return { fires, from };
}
