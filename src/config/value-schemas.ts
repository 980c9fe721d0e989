/**
 * Zod schemas of the value types schedules.yaml writes as text (durations), shared by the file's
 * schema (schema.ts) and the notification settings (notify-schema.ts).
 *
 * Every duration is finite and bounded: a duration becomes a date (a deadline, a cut-off, an
 * overdue time, in JavaScript or in SQL) or a timer, and a value past what those hold fails far
 * from the file — a `within` past year 9999 made its parent's verdict unwritable, a `timeout`
 * past a Node timer's range fired at once. So the file refuses it, with its line.
 */
import { z } from 'zod';
import { DURATION_HINT, formatDuration, parseDuration } from './duration.js';
import { MAX_AFTER_WITHIN_MS, MAX_SETTLE_MS, MAX_TIMER_MS } from './defaults.js';

/**
 * The longest duration the file takes anywhere: ten years. Far past any batch's need, and dates
 * computed from it (instant + duration, now − duration) stay well inside what JavaScript's Date
 * and MariaDB's DATETIME (year 9999) hold.
 */
export const MAX_DURATION_MS = 3650 * 86_400_000;

interface DurationRules {
  /** Whether `0s` is allowed (it turns off what the key would inherit). */
  zero: boolean;
  maxMs: number;
  /** Why the maximum, said when it is passed. */
  why: string;
}

function durationOf(rules: DurationRules) {
  const hint = DURATION_HINT + (rules.zero ? ' (or 0s for none)' : '');
  return z.unknown().transform((value, ctx) => {
    if (value === undefined) {
      ctx.addIssue({ code: 'custom', message: `required: a duration (${DURATION_HINT})` });
      return z.NEVER;
    }
    const ms = typeof value === 'string' ? parseDuration(value) : null;
    const fail = (message: string) => {
      ctx.addIssue({ code: 'custom', message });
      return z.NEVER;
    };
    if (ms == null || ms < 0) {
      return fail(`expected a duration, got ${JSON.stringify(value)}: ${hint}`);
    }
    if (ms === 0 && !rules.zero) {
      return fail(`must be more than 0s, got ${JSON.stringify(value)}`);
    }
    // Not finite: a number too long for a double (`999…9d`) reads as Infinity.
    if (!Number.isFinite(ms) || ms > rules.maxMs) {
      const got = JSON.stringify(value);
      const shown = got.length > 40 ? `${got.slice(0, 20)}…${got.slice(-10)}` : got;
      return fail(`must be at most ${formatDuration(rules.maxMs)}, got ${shown}: ${rules.why}`);
    }
    return ms;
  });
}

const ANY = 'no duration in baton is longer (dates computed from it must stay in range)';
const TIMER = "a timer's longest in Node.js is about 24.8 days";

/** A duration such as `90s` or `30m`, as milliseconds; numbers without a unit are refused. */
export const duration = durationOf({ zero: false, maxMs: MAX_DURATION_MS, why: ANY });

/**
 * A duration where `0s` is allowed too (`jitter:`, `throttle:`), so that one job can turn off
 * what it would inherit from `defaults:`.
 */
export const durationOrZero = durationOf({ zero: true, maxMs: MAX_DURATION_MS, why: ANY });

/** A duration kept by a timer: `timeout:` of a job or of a notification target. */
export const timerDuration = durationOf({ zero: false, maxMs: MAX_TIMER_MS, why: TIMER });

/** `retryDelay:`: a timer too, and `0s` retries at once. */
export const timerDurationOrZero = durationOf({ zero: true, maxMs: MAX_TIMER_MS, why: TIMER });

/** `scheduleChanges.settle:`: 0s (a change takes effect at its first fire) up to a week. */
export const settleDuration = durationOf({
  zero: true,
  maxMs: MAX_SETTLE_MS,
  why: 'a changed timing should not wait longer than a week to take effect',
});

/** `after.within:` (docs/dependencies.md): at most MAX_AFTER_WITHIN_MS, defaults.ts says why. */
export const withinDuration = durationOf({
  zero: false,
  maxMs: MAX_AFTER_WITHIN_MS,
  why: "a child waits for its parents' verdicts of an instant at most a year",
});
