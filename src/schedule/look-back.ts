/**
 * Which fires of a job fell in a window that nobody could coordinate: the pure half of a
 * runner's look back after start-up or a reconnect (daemon/recovery.ts acts on it).
 *
 * The window is the job's catch-up window, else the last hour; it never reaches back before the
 * job is known to exist — its first row in the history, or else the runner's start (a job added
 * today has no missed fires from yesterday).
 */
import type { Schedule } from './cron.js';

/** How far back missed fires are recorded for a job without `catchUp`. */
export const MISSED_WINDOW_MS = 3_600_000;
/** At most this many fires per job are looked at in one pass (an every-second job, an hour). */
export const MAX_FIRES_PER_PASS = 3_600;

export interface LookBack {
  /** Fires in the window, oldest first (the newest MAX_FIRES_PER_PASS of them). */
  fires: Date[];
  /** The window's start. */
  from: Date;
}

/** The job's fires in (max(now − window, knownSince), now]. */
export function lookBack(
  job: { catchUpMs: number | null },
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
