/**
 * Zod schemas of the value types schedules.yaml writes as text (durations), shared by the file's
 * schema (schema.ts) and the notification settings (notify-schema.ts).
 */
import { z } from 'zod';
import { DURATION_HINT, parseDuration } from './duration.js';

/** A duration such as `90s` or `30m`, as milliseconds; numbers without a unit are refused. */
export const duration = z.unknown().transform((value, ctx) => {
  const ms = typeof value === 'string' ? parseDuration(value) : null;
  if (value === undefined) {
    ctx.addIssue({ code: 'custom', message: `required: a duration (${DURATION_HINT})` });
    return z.NEVER;
  }
  if (ms == null || ms <= 0) {
    ctx.addIssue({
      code: 'custom',
      message: `expected a duration, got ${JSON.stringify(value)}: ${DURATION_HINT}`,
    });
    return z.NEVER;
  }
  return ms;
});

/**
 * A duration where `0s` is allowed too (`jitter:`, `throttle:`, `retryDelay:`), so that one job
 * can turn off what it would inherit from `defaults:` (for `retryDelay`: retry at once).
 */
export const durationOrZero = z.unknown().transform((value, ctx) => {
  const ms = typeof value === 'string' ? parseDuration(value) : null;
  if (ms == null || ms < 0) {
    ctx.addIssue({
      code: 'custom',
      message: `expected a duration, got ${JSON.stringify(value)}: ${DURATION_HINT} (or 0s for none)`,
    });
    return z.NEVER;
  }
  return ms;
});
