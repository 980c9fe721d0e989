/**
 * The dead-man's switch: when a job has gone too long without a successful run, `baton status`
 * warns — even when nothing ran at all, anywhere, because every runner was down or the schedule
 * was never loaded. Pure: the caller passes the instants (database time).
 *
 * How long is too long:
 * - `expect: 26h` on the job: that long after its last success (or, when it never succeeded,
 *   after it first appeared: its first history row or the start of the first runner that loaded
 *   it).
 * - By default, two periods of its schedule plus a grace of max(1 min, 10% of the period).
 *   Periods are counted as fires, not as a fixed length: the job is overdue once the second
 *   fire after that instant has come and the grace has passed. For a regular schedule that is
 *   two periods plus the grace from the fire that last succeeded; for an irregular one (weekdays
 *   only, the 1st of the month) it follows the real fires, so a Friday success is not overdue on
 *   Sunday. A job whose runs take longer than its period should say `expect:` — it cannot
 *   succeed once a period.
 */
import type { Schedule } from './cron.js';

/** The smallest grace of the default rule: a minute absorbs start-up and a slow run. */
export const MIN_GRACE_MS = 60_000;
/** The grace grows with the period: 10% (2.4 h for a daily job). */
export const GRACE_SHARE = 0.1;

export function defaultGraceMs(periodMs: number): number {
  return Math.max(MIN_GRACE_MS, Math.round(periodMs * GRACE_SHARE));
}

export interface Expectation {
  /** The instant after which, without a success since `since`, the job is overdue. */
  overdueAt: Date;
  /** `overdueAt - since`: the allowed silence, in ms. */
  expectMs: number;
  /** `expect` when the job set its own, `default` for two periods plus the grace. */
  rule: 'expect' | 'default';
}

/**
 * When a job that has not succeeded since `since` becomes overdue. `expectMs` is the job's own
 * `expect:` (null for the default rule, which needs the schedule). Null when it cannot be said:
 * the default rule on a schedule with fewer than two fires after `since`.
 */
export function expectation(
  job: { expectMs: number | null; schedule: Schedule | null },
  since: Date,
): Expectation | null {
  if (job.expectMs != null) {
    return {
      overdueAt: new Date(since.getTime() + job.expectMs),
      expectMs: job.expectMs,
      rule: 'expect',
    };
  }
  if (!job.schedule) return null;
  const first = job.schedule.nextAfter(since);
  const second = first && job.schedule.nextAfter(first);
  if (!first || !second) return null;
  const overdueAt = new Date(second.getTime() + defaultGraceMs(second.getTime() - first.getTime()));
  return { overdueAt, expectMs: overdueAt.getTime() - since.getTime(), rule: 'default' };
}

/** How far back `lastFireAtOrBefore` looks: a schedule silent for longer has no "last fire". */
export const LAST_FIRE_LOOK_BACK_MS = 8 * 366 * 86_400_000;

/**
 * The schedule's latest fire at or before `at` (cron.ts only walks forwards): looks back over a
 * window that doubles from one second until it holds a fire, then walks forwards from the first
 * fire in it with `nextAfter` — the same maths, time zone and daylight-saving rule as the
 * runners'. The doubling keeps the walk short: the window is at most twice the distance to the
 * latest fire. Null when there is none within LAST_FIRE_LOOK_BACK_MS.
 */
export function lastFireAtOrBefore(schedule: Schedule, at: Date): Date | null {
  const end = at.getTime();
  for (let window = 1_000; ; window = Math.min(window * 2, LAST_FIRE_LOOK_BACK_MS)) {
    let fire = schedule.nextAfter(new Date(end - window));
    if (fire && fire.getTime() <= end) {
      for (;;) {
        const next = schedule.nextAfter(fire);
        if (!next || next.getTime() > end) return fire;
        fire = next;
      }
    }
    if (window >= LAST_FIRE_LOOK_BACK_MS) return null;
  }
}
