/**
 * Wall clocks of an IANA time zone, both ways, for the calendars of a job (calendar.ts): which
 * day an instant is in the job's zone, and which instant a wall time of a day is. Intl's zone
 * data, the same that croner computes cron fires with, so a calendar day and a cron day agree.
 */
import { utcMs, type WallClock } from '../instants.js';

/**
 * One formatter per zone: a DateTimeFormat costs ~0.3 ms and native memory the allocator keeps;
 * a calendar asks for a wall clock at every fire it judges.
 */
const wallFormats = new Map<string, Intl.DateTimeFormat>();

function wallFormat(timezone: string): Intl.DateTimeFormat {
  let format = wallFormats.get(timezone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    wallFormats.set(timezone, format);
  }
  return format;
}

/** The wall clock of `ms` in `timezone`. */
export function wallClockAt(timezone: string, ms: number): WallClock {
  const parts = wallFormat(timezone).formatToParts(new Date(ms));
  const n = (type: string) => Number(parts.find((p) => p.type === type)!.value);
  return [n('year'), n('month'), n('day'), n('hour'), n('minute'), n('second')];
}

/** The zone's offset from UTC at `ms`, in ms (wall minus UTC). */
function offsetAt(timezone: string, ms: number): number {
  const wholeSecond = Math.floor(ms / 1000) * 1000;
  return utcMs(wallClockAt(timezone, wholeSecond)) - wholeSecond;
}

/**
 * The instant of `wall` in `timezone`. A wall time the clocks skip (a spring-forward gap) is the
 * moment the clock jumps — 02:30 on a night that jumps from 02:00 to 03:00 is 03:00 — as a
 * fixed-time cron fire is (docs/schedules.md, "The daylight-saving rule"); a wall time the clocks
 * pass twice is its first.
 */
export function instantOfWall(timezone: string, wall: WallClock): number {
  const asUtc = utcMs(wall);
  // The two offsets around the instant: before and after a change, at most a day apart.
  const before = offsetAt(timezone, asUtc - 86_400_000);
  const after = offsetAt(timezone, asUtc + 86_400_000);
  // The offset before a change first: of a wall time passed twice, the earlier instant.
  for (const offset of [before, after]) {
    const at = asUtc - offset;
    if (utcMs(wallClockAt(timezone, at)) === asUtc) return at;
  }
  // In a gap: no instant reads `wall`. Before the jump every instant reads earlier, from it on
  // later: the first instant (whole seconds, as transitions are) that reads later is the jump.
  let lo = Math.floor((asUtc - Math.max(before, after)) / 1000) * 1000;
  let hi = Math.ceil((asUtc - Math.min(before, after)) / 1000) * 1000;
  while (hi - lo > 1000) {
    const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
    if (utcMs(wallClockAt(timezone, mid)) > asUtc) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** `YYYY-MM-DD` of a wall clock. */
export function dateText([y, m, d]: WallClock): string {
  return `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
}

/** The day after or before `date` (`YYYY-MM-DD`), by the calendar alone. */
export function addDays(date: string, days: number): string {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  const at = new Date(utcMs([y, m, d, 0, 0, 0]) + days * 86_400_000);
  return dateText([at.getUTCFullYear(), at.getUTCMonth() + 1, at.getUTCDate(), 0, 0, 0]);
}

/** The first instant of `date` in `timezone` (its 00:00, or the end of a gap over midnight). */
export function startOfDay(timezone: string, date: string): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  return instantOfWall(timezone, [y, m, d, 0, 0, 0]);
}
