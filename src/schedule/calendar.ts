/**
 * A job's calendars (docs/schedules.md, "Calendars"): the days and spans its fires are skipped on
 * (`skipOn`), the only ones they may fall on (`onlyOn`), and where a skipped fire goes (`shift`).
 * config/load.ts reads the file's `calendars:` (dates, ranges, iCalendar files) into clauses of
 * the timing line (compound.ts), so a calendar is part of the job's timing: the same instants on
 * every runner, versioned and switched at one instant like the schedule itself.
 *
 *   clause := "skip" NAME ITEM*  |  "only" NAME ITEM*  |  "shift" ("next" | "previous")
 *   ITEM   := DATE                     a day in the job's zone
 *           | DATE ".." DATE           the days from one to the other, both included
 *           | INSTANT "/" INSTANT      from one instant (included) to the other (not)
 *           | WALL "/" WALL            the same, as wall times of the job's zone
 *
 * A fire on a `skip` item, or on none of the `only` items when there are some, is skipped. With
 * `shift`, it moves to the same wall time of the nearest allowed day after (`next`) or before
 * (`previous`) — at most MAX_SHIFT_DAYS away, else it is skipped — and a moved fire that meets
 * another fire of the job is that one fire (each instant once).
 */
import type { WallClock } from '../instants.js';
import { parseFrom } from '../instants.js';
import { addDays, dateText, instantOfWall, startOfDay, wallClockAt } from './zoned.js';

/**
 * The longest timing line calendars may make: `baton_timings.schedule` is TEXT (65,535 bytes),
 * and a timing no runner can record would never take effect (config/load.ts refuses it).
 */
export const MAX_TIMING_BYTES = 60_000;

/** How far a shifted fire may move: a year of days, then it is skipped. */
export const MAX_SHIFT_DAYS = 366;

/**
 * How many of a job's fires its calendars may skip in a year when it has `shift` (config/load.ts
 * refuses more): `shift` moves the fires of a job that fires a few times a day. Each next fire
 * of a shifted schedule looks back over the skipped fires of up to a year and a half.
 */
export const MAX_SHIFTED_PER_YEAR = 1_000;

/** How many skipped fires a shifted schedule's next fire looks through at most. */
export const MAX_SHIFT_SCAN = 5_000;

/** One item of a calendar, resolved in the job's zone: [startMs, endMs). */
interface Span {
  startMs: number;
  endMs: number;
}

export interface CalendarClauses {
  skip: { name: string; items: string[] }[];
  only: { name: string; items: string[] }[];
  shift: 'none' | 'next' | 'previous';
}

/** A fire the calendars skipped, and where it went. */
export interface CalendarSkip {
  at: Date;
  /** The calendar that skipped it: a `skipOn` one, or the `onlyOn` ones it is on none of. */
  calendar: string;
  /** `skip`: on a day or span of it; `only`: on none of the `onlyOn` calendars. */
  why: 'skip' | 'only';
  /** With `shift`: the instant it moved to; null: skipped. */
  movedTo: Date | null;
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const WALL = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/;
export const CALENDAR_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** Reads one clause of the timing line; null when `text` is no calendar clause. */
export function parseClause(
  text: string,
): ['skip' | 'only', string, string[]] | ['shift', string] | null {
  const words = text.trim().split(/\s+/);
  const [word = '', name = '', ...items] = words;
  const lower = word.toLowerCase();
  if (lower === 'shift') {
    if (words.length !== 2 || !/^(next|previous|none)$/i.test(name)) {
      throw new Error(`"${text.trim()}": write shift next, shift previous or shift none`);
    }
    return ['shift', name.toLowerCase()];
  }
  if (lower !== 'skip' && lower !== 'only') return null;
  if (!CALENDAR_NAME.test(name)) {
    throw new Error(`"${text.trim()}": ${lower} needs a calendar name, then its days and spans`);
  }
  return [lower, name, items];
}

/**
 * A timing line for people: each calendar clause's items counted, not listed
 * (`0 3 * * *; skip kr-holidays (15 days and spans); shift next`). The line itself, with every
 * item, is what runners fire by and `--json` prints.
 */
export function shortTiming(text: string): string {
  if (!text.includes(';')) return text;
  return text
    .split(';')
    .map((raw) => {
      const words = raw.trim().split(/\s+/);
      if (!/^(skip|only)$/i.test(words[0] ?? '') || words.length < 2) return raw.trim();
      const n = words.length - 2;
      return `${words[0]} ${words[1]} (${n} ${n === 1 ? 'day or span' : 'days and spans'})`;
    })
    .join('; ');
}

/** Whole days from one date to another (`YYYY-MM-DD`), by the calendar alone. */
function daysBetween(from: string, to: string): number {
  return Math.round((Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / 86_400_000);
}

/** Checks an item (config/load.ts writes them; the table may hold any): a plain message. */
export function checkItem(item: string, timezone: string): void {
  itemSpan(item, timezone);
}

/** The span an item covers in `timezone`. */
function itemSpan(item: string, timezone: string): Span {
  const bad = (why: string) =>
    new Error(
      `calendar item "${item}": ${why}; write a date (2027-01-01), a range of dates ` +
        '(2027-02-06..2027-02-09) or a span of instants (2027-03-01T10:00Z/2027-03-01T12:00Z)',
    );
  const range = item.split('..');
  if (range.length === 2) {
    const [first, last] = range.map((d) => checkedDate(d, bad)) as [string, string];
    if (last < first) throw bad('its last day is before its first');
    return { startMs: startOfDay(timezone, first), endMs: startOfDay(timezone, addDays(last, 1)) };
  }
  const span = item.split('/');
  if (span.length === 2) {
    const [startMs, endMs] = span.map((v) => spanEnd(v, timezone, bad)) as [number, number];
    if (endMs <= startMs) throw bad('its end is not after its start');
    return { startMs, endMs };
  }
  if (range.length === 1 && span.length === 1) {
    const day = checkedDate(item, bad);
    return { startMs: startOfDay(timezone, day), endMs: startOfDay(timezone, addDays(day, 1)) };
  }
  throw bad('not a date, range or span');
}

function checkedDate(value: string, bad: (why: string) => Error): string {
  const m = DATE.exec(value);
  if (!m) throw bad(`"${value}" is not a date`);
  if (addDays(addDays(value, 1), -1) !== value) throw bad(`no such date ${value}`);
  return value;
}

/** One end of a span: an instant (Z or offset), or a wall time of the job's zone. */
function spanEnd(value: string, timezone: string, bad: (why: string) => Error): number {
  const wall = WALL.exec(value);
  if (wall) {
    const fields = wall.slice(1).map((v) => Number(v ?? 0)) as WallClock;
    return instantOfWall(timezone, fields);
  }
  try {
    return parseFrom(value).getTime();
  } catch {
    throw bad(`"${value}" is not an instant`);
  }
}

interface Calendar {
  name: string;
  spans: Span[];
}

/**
 * The calendars of a timing, in its zone: which fires they allow, and where a skipped one goes.
 * `base` is the schedule without them (the first fire strictly after an instant).
 */
export class CalendarFilter {
  private readonly skips: Calendar[];
  private readonly onlys: Calendar[];
  readonly shift: CalendarClauses['shift'];

  constructor(
    clauses: CalendarClauses,
    private readonly timezone: string,
  ) {
    const resolve = (c: { name: string; items: string[] }): Calendar => ({
      name: c.name,
      spans: c.items.map((i) => itemSpan(i, timezone)).sort((a, b) => a.startMs - b.startMs),
    });
    this.skips = clauses.skip.map(resolve);
    this.onlys = clauses.only.map(resolve);
    this.shift = clauses.shift;
  }

  /**
   * Why `ms` is no allowed instant: the calendar, and the first instant after which the answer
   * may change (an allowed fire cannot be before it); null: allowed.
   */
  private judge(ms: number): {
    calendar: string;
    why: 'skip' | 'only';
    resumeMs: number | null;
    /** The last instant before `ms` that may be allowed + 1 (an allowed fire is before it). */
    priorMs: number | null;
  } | null {
    for (const c of this.skips) {
      for (const s of c.spans) {
        if (s.startMs > ms) break;
        if (ms < s.endMs) {
          return { calendar: c.name, why: 'skip', resumeMs: s.endMs, priorMs: s.startMs };
        }
      }
    }
    if (this.onlys.length === 0) return null;
    let nextStart: number | null = null;
    let lastEnd: number | null = null;
    for (const c of this.onlys) {
      for (const s of c.spans) {
        if (s.startMs <= ms && ms < s.endMs) return null;
        if (s.startMs > ms && (nextStart == null || s.startMs < nextStart)) nextStart = s.startMs;
        if (s.endMs <= ms && (lastEnd == null || s.endMs > lastEnd)) lastEnd = s.endMs;
      }
    }
    const calendar = this.onlys.map((c) => c.name).join(', ');
    return { calendar, why: 'only', resumeMs: nextStart, priorMs: lastEnd };
  }

  allowed(ms: number): boolean {
    return this.judge(ms) == null;
  }

  /** Where an excluded fire goes with `shift`: the same wall time of the nearest allowed day. */
  movedTo(ms: number): number | null {
    if (this.shift === 'none') return null;
    const forward = this.shift === 'next';
    const wall = wallClockAt(this.timezone, ms);
    const origin = dateText(wall);
    const dayOf = (at: number) => dateText(wallClockAt(this.timezone, at));
    let day = addDays(origin, forward ? 1 : -1);
    // A day at a time, but over an excluding item at once: the day its end (or, backwards, its
    // start) falls on is the next one worth asking — a year of `onlyOn` gaps is a few steps.
    while (Math.abs(daysBetween(origin, day)) <= MAX_SHIFT_DAYS) {
      const [y, m, d] = day.split('-').map(Number) as [number, number, number];
      const at = instantOfWall(this.timezone, [y, m, d, wall[3], wall[4], wall[5]]);
      const verdict = this.judge(at);
      if (!verdict) return at;
      const edge = forward ? verdict.resumeMs : verdict.priorMs;
      if (edge == null) return null;
      const next = addDays(day, forward ? 1 : -1);
      const jump = dayOf(forward ? edge : edge - 1);
      day = forward ? (jump > next ? jump : next) : jump < next ? jump : next;
    }
    return null;
  }

  /**
   * The first allowed fire of `base` strictly after `after`; excluded fires are stepped over a
   * whole item at a time (a per-second job over a holiday is one step, not 86,400).
   */
  nextAllowed(base: (after: Date) => Date | null, after: Date, limitMs = Infinity): Date | null {
    let at = after;
    for (;;) {
      const next = base(at);
      if (!next || next.getTime() > limitMs) return null;
      const verdict = this.judge(next.getTime());
      if (!verdict) return next;
      if (verdict.resumeMs == null) return null;
      at = new Date(Math.max(next.getTime(), verdict.resumeMs - 1));
    }
  }

  /**
   * The first fire strictly after `after` with the calendars: an allowed fire of `base`, or one
   * moved by `shift` (from an excluded fire up to MAX_SHIFT_DAYS before or after it).
   */
  next(
    base: (after: Date) => Date | null,
    after: Date,
    originFrom = Number.NEGATIVE_INFINITY,
    originUntil = Number.POSITIVE_INFINITY,
  ): Date | null {
    // Only fires whose instant of the schedule is in [originFrom, originUntil): an allowed fire
    // is its own; a moved one comes from the excluded fire it was moved from.
    const found = this.nextAllowed(base, after);
    const allowed = found && found.getTime() < originUntil ? found : null;
    if (this.shift === 'none') return allowed;
    const reach = (MAX_SHIFT_DAYS + 2) * 86_400_000;
    const ms = after.getTime();
    // A fire moved forward comes from an excluded fire before it; backward, from one after it.
    // None later than the allowed one can move before it.
    const [from, to] =
      this.shift === 'next'
        ? [ms - reach, allowed?.getTime() ?? ms + reach]
        : [ms, (allowed?.getTime() ?? ms) + reach];
    let best = allowed?.getTime() ?? null;
    for (const skip of this.excludedKept(base, from, to)) {
      const origin = skip.at.getTime();
      if (origin < originFrom || origin >= originUntil) continue;
      const moved = skip.movedTo?.getTime();
      if (moved != null && moved > ms && (best == null || moved < best)) best = moved;
    }
    return best == null ? null : new Date(best);
  }

  /**
   * `excluded` over (from, to], kept between calls: a runner asks for one fire after another,
   * and each ask's window (a year back, for `shift: next`) is mostly the previous one's. Only
   * what the kept stretch does not cover is read, and only one `base` is kept at a time.
   */
  private kept: {
    base: (after: Date) => Date | null;
    lo: number;
    hi: number;
    skips: CalendarSkip[];
  } | null = null;

  private excludedKept(
    base: (after: Date) => Date | null,
    from: number,
    to: number,
  ): CalendarSkip[] {
    const k = this.kept?.base === base ? this.kept : null;
    const read = (lo: number, hi: number) =>
      hi > lo ? this.excluded(base, new Date(lo), new Date(hi), MAX_SHIFT_SCAN) : [];
    let kept: NonNullable<typeof this.kept>;
    if (k && from >= k.lo && from <= k.hi) {
      // The kept stretch, grown to `to` (a full page is not kept: its end is not known).
      const more = read(k.hi, to);
      kept = { base, lo: k.lo, hi: Math.max(k.hi, to), skips: [...k.skips, ...more] };
      if (more.length === MAX_SHIFT_SCAN) return kept.skips.filter((x) => x.at.getTime() > from);
      // What lies before `from` is behind every later ask too.
      const firstKept = kept.skips.findIndex((x) => x.at.getTime() > from);
      kept.skips = firstKept < 0 ? [] : kept.skips.slice(firstKept);
      kept.lo = from;
    } else {
      const skips = read(from, to);
      if (skips.length === MAX_SHIFT_SCAN) return skips;
      kept = { base, lo: from, hi: to, skips };
    }
    this.kept = kept;
    return kept.skips.filter((x) => x.at.getTime() <= to);
  }

  /**
   * The excluded fires of `base` in (from, to], oldest first: at most `max`. Each is read with
   * the calendar that excluded it and, with `shift`, where it moved.
   */
  excluded(base: (after: Date) => Date | null, from: Date, to: Date, max: number): CalendarSkip[] {
    const out: CalendarSkip[] = [];
    let at = from;
    while (out.length < max) {
      const next = base(at);
      if (!next || next.getTime() > to.getTime()) break;
      const ms = next.getTime();
      const verdict = this.judge(ms);
      if (verdict) {
        const moved = this.movedTo(ms);
        out.push({
          at: next,
          calendar: verdict.calendar,
          why: verdict.why,
          movedTo: moved == null ? null : new Date(moved),
        });
        at = next;
        continue;
      }
      // Allowed: on to the first instant the next excluding item starts at.
      const resume = this.nextExclusion(ms);
      if (resume == null || resume > to.getTime()) break;
      at = new Date(Math.max(ms, resume - 1));
    }
    return out;
  }

  /** The first instant after `ms` that some item may exclude (a skip's start, an only's end). */
  private nextExclusion(ms: number): number | null {
    let first: number | null = null;
    const consider = (v: number) => {
      if (v > ms && (first == null || v < first)) first = v;
    };
    for (const c of this.skips) for (const s of c.spans) consider(s.startMs);
    for (const c of this.onlys) for (const s of c.spans) consider(s.endMs);
    return first;
  }
}
