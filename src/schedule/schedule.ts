/**
 * A job's fires as every runner computes them: a cron expression (cron.ts), or several, an
 * interval, instants and bounds (compound.ts). Its own module so that both can name it.
 */
import type { CalendarSkip } from './calendar.js';

export interface Schedule {
  /** The timing's text: the expression, or compound.ts's line. */
  readonly expression: string;
  readonly timezone: string;
  /** The first fire strictly after `after`, or null when the schedule has no more fires. */
  nextAfter(after: Date): Date | null;
  /** The next `count` fires strictly after `after`. */
  nextN(count: number, after: Date): Date[];
  /**
   * With calendars (calendar.ts): the fires they skipped in (from, to], oldest first, at most
   * `max` — each with the calendar and, with `shift`, where it moved. Absent without calendars.
   */
  calendarSkips?(from: Date, to: Date, max: number): CalendarSkip[];
  /**
   * With calendars: the first fire strictly after `after` whose own instant of the schedule is in
   * [originFrom, originUntil) — a fire `shift` moved from outside it is not one. A timing version
   * fires only what comes from its own stretch (timing-switch.ts): a fire moved across a switch
   * would run under both versions, or under neither.
   */
  nextAfterWithin?(after: Date, originFrom: number, originUntil: number): Date | null;
}

/** The next `count` fires strictly after `after`, by a schedule's `nextAfter`. */
export function nextFires(
  nextAfter: (after: Date) => Date | null,
  count: number,
  after: Date,
): Date[] {
  const out: Date[] = [];
  let at: Date | null = after;
  while (out.length < count && (at = nextAfter(at))) out.push(at);
  return out;
}
