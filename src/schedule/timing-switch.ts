/**
 * A job's fires across its timing versions, and the instant a new timing takes over (pure).
 *
 * A job's timing — its cron expression and time zone, what decides *which instants* are its fires
 * — has versions, recorded fleet-wide (store/timings.ts). Each version takes effect at its
 * effective instant E, the same for every runner: fires before E are the previous version's, fires
 * at and after E the new one's (an instant of the old timing that falls at E itself is the new
 * timing's to decide: it does not fire). So a rolling deploy that changes "settle at 03:00" to
 * "at 04:00" switches every runner at once, whenever each loads the file (docs/schedules.md,
 * "Changing a job's time").
 *
 * What can go wrong at E is judged by the job's calendar day in the new timing's zone: only the
 * day that contains E mixes the two timings (every day before it is wholly the old timing's, every
 * day after it wholly the new one's). That day runs `twice` when it gets more fires than either
 * timing alone would give it (03:00 → 04:00 switched at 03:30: both run), and `skipped` when fewer
 * (03:00 → 02:00 switched at 02:30: neither). A job that fires more than MAX_COUNTED times a day
 * under either timing is not judged by the day: one fire more or less of so many is not what
 * anyone asks "did it run today?" about.
 *
 * The default instant is the first fire instant of either timing, at least a settle window after
 * the change was recorded, whose day is neither: for a daily change that is the old timing's next
 * fire (03:00 → 04:00 recorded at noon: E = 03:00 the next day, which then runs at 04:00 only).
 */
import { dateText, wallClockAt } from './zoned.js';
import type { CalendarSkip } from './calendar.js';
import { parseSchedule, type Schedule } from './cron.js';
import { nextFires } from './schedule.js';

/** One stretch of a job's fires: from `from` (inclusive) on, by `schedule`; null fires nothing. */
export interface TimingSegment {
  /** The timing version in force over the stretch (store/timings.ts). */
  version: number;
  from: Date;
  /** Null: this runner holds the job's fires here (its own definition is older than the fleet's). */
  schedule: Schedule | null;
}

/** A Schedule made of segments, and which version each instant falls under. */
export interface SwitchedSchedule extends Schedule {
  readonly segments: readonly TimingSegment[];
  /** The version whose stretch holds `at`; null before the first. */
  versionAt(at: Date): number | null;
}

/**
 * The fires of `segments` (sorted by `from`, the first one from the beginning of time for the
 * job's first version). `own` names the schedule (its expression and zone: the runner's file's),
 * for the views that print one.
 */
export function switchedSchedule(
  own: Schedule,
  segments: readonly TimingSegment[],
): SwitchedSchedule {
  const ends = segments.map((_, i) => segments[i + 1]?.from.getTime() ?? Number.POSITIVE_INFINITY);
  const nextAfter = (after: Date): Date | null => {
    for (let i = 0; i < segments.length; i++) {
      const { from, schedule } = segments[i]!;
      if (after.getTime() >= ends[i]! - 1 || !schedule) continue;
      // The segment's first fire strictly after `after` that is at or after its start.
      const from1 = Math.max(after.getTime(), from.getTime() - 1);
      // A fire its calendars moved here from another version's stretch is that version's.
      const next = schedule.nextAfterWithin
        ? schedule.nextAfterWithin(new Date(from1), from.getTime(), ends[i]!)
        : schedule.nextAfter(new Date(from1));
      if (next && next.getTime() < ends[i]!) return next;
    }
    return null;
  };
  const calendarSkips = (from: Date, to: Date, max: number): CalendarSkip[] => {
    const out: CalendarSkip[] = [];
    for (let i = 0; i < segments.length && out.length < max; i++) {
      const { from: start, schedule } = segments[i]!;
      if (!schedule?.calendarSkips) continue;
      const lo = Math.max(from.getTime(), start.getTime() - 1);
      const hi = Math.min(to.getTime(), ends[i]! - 1);
      if (hi <= lo) continue;
      // A fire moved out of the version's stretch is not moved by it: skipped there.
      const end = ends[i]!;
      const inStretch = (at: Date) => at.getTime() >= start.getTime() && at.getTime() < end;
      out.push(
        ...schedule
          .calendarSkips(new Date(lo), new Date(hi), max - out.length)
          .map((k) => (k.movedTo && !inStretch(k.movedTo) ? { ...k, movedTo: null } : k)),
      );
    }
    return out;
  };
  return {
    expression: own.expression,
    timezone: own.timezone,
    segments,
    nextAfter,
    nextN: (count, after) => nextFires(nextAfter, count, after),
    // Each segment's calendar skips within its own stretch: a skip is the version's in force.
    ...(segments.some((s) => s.schedule?.calendarSkips) ? { calendarSkips } : {}),
    versionAt(at) {
      let version: number | null = null;
      for (const s of segments) if (s.from.getTime() <= at.getTime()) version = s.version;
      return version;
    },
  };
}

/** A recorded timing version, as the segments are built from it. */
export interface TimingVersion {
  version: number;
  effectiveAt: Date;
  schedule: string;
  timezone: string;
}

/**
 * The stretches of a job's fires by its versions, as a runner whose own definition is version
 * `own` runs them: the version in force at an instant is the newest (by number) whose effective
 * instant has come — so a version recorded later with an earlier instant supersedes a pending
 * one — and a runner fires only under versions up to its own. Under a newer one it holds (a null
 * schedule): the fleet has left the timing it has. `own` null: every version is beyond it
 * (its definition is not recorded).
 */
export function timingSegments(
  versions: readonly TimingVersion[],
  own: number | null,
  parse: (v: TimingVersion) => Schedule = (v) => parseSchedule(v.schedule, v.timezone),
): TimingSegment[] {
  const starts = [...new Set(versions.map((v) => v.effectiveAt.getTime()))].sort((a, b) => a - b);
  const segments: TimingSegment[] = [];
  const parsed = new Map<number, Schedule | null>();
  for (const start of starts) {
    const inForce = versions
      .filter((v) => v.effectiveAt.getTime() <= start)
      .reduce((a, b) => (b.version > a.version ? b : a));
    if (segments.at(-1)?.version === inForce.version) continue;
    let schedule: Schedule | null = null;
    if (own != null && inForce.version <= own) {
      schedule = parsed.has(inForce.version)
        ? parsed.get(inForce.version)!
        : parseOrHold(parse, inForce);
      parsed.set(inForce.version, schedule);
    }
    segments.push({ version: inForce.version, from: new Date(start), schedule });
  }
  return segments;
}

/**
 * `own` (a job's schedule by its file) as it is fired by the recorded `versions`: each instant by
 * the version in force then, as a runner whose own definition is version `ownVersion` fires it —
 * by default the fleet's view, every version fired (`baton list`, `explain`). No versions (the
 * job not recorded yet): `own` itself.
 */
export function scheduleByVersions(
  own: Schedule,
  versions: readonly TimingVersion[],
  ownVersion = Number.POSITIVE_INFINITY,
): Schedule {
  return versions.length > 0 ? switchedSchedule(own, timingSegments(versions, ownVersion)) : own;
}

/**
 * A recorded timing this runtime cannot read (a newer baton's syntax, a time zone this Node's
 * data lacks) is held, not fired by a guess: null.
 */
function parseOrHold(parse: (v: TimingVersion) => Schedule, v: TimingVersion): Schedule | null {
  try {
    return parse(v);
  } catch {
    return null;
  }
}

/** How a switch at an instant falls on its day. */
export interface SwitchAnomaly {
  kind: 'twice' | 'skipped';
  /** The day, in the new timing's zone (YYYY-MM-DD). */
  day: string;
  /** The fires that day under the switch: the old timing's before it, the new one's from it. */
  fires: Date[];
  /** What that day has under the old timing alone, and the new one alone. */
  oldCount: number;
  newCount: number;
}

/** A day with more fires than this under a timing is not judged by the day (see the header). */
export const MAX_COUNTED = 48;

/** The anomaly of switching from `old` to `next` at `at`, or null when its day is as either. */
export function switchAnomaly(old: Schedule, next: Schedule, at: Date): SwitchAnomaly | null {
  const { start, end, day } = dayAround(next.timezone, at);
  const oldFires = firesWithin(old, start, end);
  const newFires = firesWithin(next, start, end);
  if (!oldFires || !newFires) return null;
  const fires = [
    ...oldFires.filter((f) => f.getTime() < at.getTime()),
    ...newFires.filter((f) => f.getTime() >= at.getTime()),
  ];
  const [low, high] = [oldFires.length, newFires.length].sort((a, b) => a - b) as [number, number];
  const kind = fires.length > high ? 'twice' : fires.length < low ? 'skipped' : null;
  return kind ? { kind, day, fires, oldCount: oldFires.length, newCount: newFires.length } : null;
}

/** Candidates looked at for the default instant before giving up (a year of daily fires). */
const CANDIDATES = 800;

/**
 * The default effective instant of a switch from `old` to `next` recorded with `notBefore` (the
 * record's time plus the settle window): the first fire instant of either timing at or after it
 * whose day the switch leaves as either timing would (see the header). Neither found among the
 * next CANDIDATES: the new timing's first fire at or after `notBefore`, with its anomaly.
 */
export function defaultSwitchInstant(old: Schedule | null, next: Schedule, notBefore: Date): Date {
  const from = new Date(notBefore.getTime() - 1);
  const firstNew = next.nextAfter(from) ?? notBefore;
  if (!old) return firstNew;
  let o = old.nextAfter(from);
  let n: Date | null = firstNew;
  for (let i = 0; i < CANDIDATES && (o || n); i++) {
    const candidate = !n || (o && o.getTime() <= n.getTime()) ? o! : n;
    if (!switchAnomaly(old, next, candidate)) return candidate;
    if (o && candidate.getTime() === o.getTime()) o = old.nextAfter(o);
    if (n && candidate.getTime() === n.getTime()) n = next.nextAfter(n);
  }
  return firstNew;
}

/** The day (in `timezone`) that holds `at`: its first instant, the next day's, and its date. */
export function dayAround(timezone: string, at: Date): { start: Date; end: Date; day: string } {
  const midnights = parseSchedule('0 0 0 * * *', timezone);
  // A day is at most 25 hours long (a DST change); its midnight (or the first instant after a
  // skipped one) is within 26 hours before `at`.
  let start = midnights.nextAfter(new Date(at.getTime() - 26 * 3_600_000))!;
  for (let next = midnights.nextAfter(start)!; next.getTime() <= at.getTime();) {
    start = next;
    next = midnights.nextAfter(start)!;
  }
  const end = midnights.nextAfter(start)!;
  return { start, end, day: localDate(timezone, start) };
}

/** `at`'s date in `timezone`, YYYY-MM-DD (zoned.ts: one formatter per zone). */
export function localDate(timezone: string, at: Date): string {
  return dateText(wallClockAt(timezone, at.getTime()));
}

/** The fires in [start, end), or null when there are more than MAX_COUNTED. */
function firesWithin(schedule: Schedule, start: Date, end: Date): Date[] | null {
  const fires: Date[] = [];
  let at = schedule.nextAfter(new Date(start.getTime() - 1));
  while (at && at.getTime() < end.getTime()) {
    if (fires.length === MAX_COUNTED) return null;
    fires.push(at);
    at = schedule.nextAfter(at);
  }
  return fires;
}

/**
 * The first instant of the local date `date` (YYYY-MM-DD) in `timezone`: its midnight, or the
 * first instant after a midnight the clock skips. Null for a date the calendar has not.
 */
export function dayStarting(timezone: string, date: string): Date | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date);
  if (!m) return null;
  const noon = new Date(0);
  noon.setUTCFullYear(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  noon.setUTCHours(12, 0, 0, 0);
  // 2027-02-30 rolls over into March: not a date.
  if (noon.toISOString().slice(0, 10) !== date) return null;
  // At noon UTC every zone (−12:00 to +14:00) shows `date` or the day after.
  let around = dayAround(timezone, noon);
  if (around.day !== date) around = dayAround(timezone, new Date(around.start.getTime() - 1));
  return around.day === date ? around.start : null;
}
