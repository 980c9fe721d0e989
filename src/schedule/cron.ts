/**
 * Fire-time maths over croner: pure functions of (expression, time zone, instant).
 *
 * A fire's instant is computed from the expression, never taken from the moment a timer happened
 * to wake: every host computes the same `scheduled_at` for the same fire, which is what makes the
 * unique fire key in `baton_runs` work across hosts (DESIGN.md, "The fire protocol", step 0).
 *
 * The Cron objects are created paused and without a callback, so croner never starts a timer of
 * its own; the daemon has one loop for all jobs (`src/daemon/fire-schedule.ts`).
 *
 * Daylight saving time (docs/schedules.md): a fixed-time fire (second, minute, hour each one
 * number) in a skipped hour runs once at the first instant after the gap, and in a repeated hour
 * once at its first occurrence; any other expression fires at every instant its wall clock matches.
 */
import { Cron } from 'croner';

export interface Schedule {
  readonly expression: string;
  readonly timezone: string;
  /** The first fire strictly after `after`, or null when the expression has no more fires. */
  nextAfter(after: Date): Date | null;
  /** The next `count` fires strictly after `after`. */
  nextN(count: number, after: Date): Date[];
}

/**
 * Parses `expression` for `timezone`. Throws an Error with a plain message for an invalid
 * expression or time zone; config validation turns that into a located problem.
 */
export function parseSchedule(expression: string, timezone: string): Schedule {
  assertTimeZone(timezone);
  let cron: Cron;
  try {
    cron = new Cron(expression, {
      timezone,
      paused: true,
      // 5 fields (minute precision) or 6 with seconds first; nicknames such as @daily are
      // accepted by croner in every mode. Day-of-month and day-of-week combine with OR, as in
      // Vixie cron.
      mode: '5-or-6-parts',
      domAndDow: false,
      // Daylight saving time follows Vixie cron (docs/schedules.md): an expression whose
      // second, minute and hour fields do not start with `*` is a fixed time — it runs once at
      // the first valid instant after a skipped hour, and once, at the first occurrence, in a
      // repeated hour. Others fire at every instant that matches.
      fixedTimeRule: 'no-wildcard',
    });
  } catch (err) {
    const detail = err instanceof Error ? err.message.replace(/^CronPattern:\s*/, '') : String(err);
    throw new Error(`invalid cron expression "${expression}": ${detail}`, { cause: err });
  }
  if (cron.nextRun(new Date()) == null) {
    throw new Error(`"${expression}" never fires`);
  }
  return {
    expression,
    timezone,
    nextAfter: (after) => cron.nextRun(after),
    nextN: (count, after) => cron.nextRuns(count, after),
  };
}

/** Throws for a time zone that the runtime's IANA database does not know. */
export function assertTimeZone(timezone: string): void {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    throw new Error(`unknown time zone "${timezone}" (use an IANA name such as Asia/Seoul or UTC)`);
  }
}
