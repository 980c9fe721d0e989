/**
 * Schedules beyond one cron expression (docs/schedules.md, "Several expressions, intervals,
 * one-shot instants and bounds"), as one line of text that every runner reads the same way. A
 * job's timing stays one string wherever it goes: the file's `schedule:` (config/load.ts writes a
 * list or an object out in this form), `baton_timings.schedule` (a runner fires a version it
 * reads back from the table), `baton list`, the fingerprint.
 *
 *   timing := body ( ";" bound )*
 *   body   := part ( "|" part )*              the union of the parts: each instant once
 *   part   := CRON                             5 or 6 fields, or a nickname (schedule/cron.ts)
 *           | "@every" DURATION [ "anchor" INSTANT ]   anchor + k·period, for every integer k
 *           | "@at" INSTANT ( "," INSTANT )*           these instants only (a one-shot job)
 *   bound  := "from" INSTANT                  no fire before it
 *           | "until" INSTANT                 no fire after it (a fire at it is one)
 *           | "max" N                         the first N fires at or after `from` only
 *
 * An INSTANT is a date (00:00 UTC) or an ISO-8601 date and time with `Z` or an offset, as
 * `baton list --from` reads it; never read in a host's zone. An interval is pure arithmetic on
 * the UTC time line from its anchor (default 1970-01-01T00:00:00Z): the same instants on every
 * runner, and no daylight-saving effect (`@every 1h` fires 24 times on every day, 23 or 25 of
 * them on a night the clocks change, by the wall clock). Instants and periods are whole seconds,
 * as every fire's instant is. `max` counts from `from`, which it requires: every runner must count
 * the same fires, whatever it saw itself.
 */
import { parseDuration } from '../durations.js';
import { parseFrom } from '../instants.js';
import { CalendarFilter, checkItem, parseClause, type CalendarClauses } from './calendar.js';
import { nextFires, type Schedule } from './schedule.js';

/** The canonical text of a timing from its pieces (config/load.ts writes the file's forms so). */
export interface TimingText {
  parts: readonly string[];
  from?: Date;
  until?: Date;
  maxFires?: number;
}

/**
 * At most this many fires are counted for `max`: the count is done at every parse (a runner
 * parses a job's schedule at each load and each read of its versions), on the event loop.
 */
export const MAX_FIRES_LIMIT = 1_000;

/** Whether `text` needs this module: more than one cron expression. */
export function isCompound(text: string): boolean {
  const t = text.trim();
  return t.includes('|') || t.includes(';') || /^@(every|at)\b/i.test(t);
}

export function formatTiming(t: TimingText): string {
  const bounds = [
    t.from ? `from ${instantText(t.from)}` : null,
    t.until ? `until ${instantText(t.until)}` : null,
    t.maxFires != null ? `max ${t.maxFires}` : null,
  ].filter((b) => b != null);
  return [t.parts.map((p) => p.trim()).join(' | '), ...bounds].join('; ');
}

/** `@every 90m anchor 2027-01-01T00:00:00Z` (the anchor left out when it is the default). */
export function everyText(periodText: string, anchor: Date | null): string {
  return `@every ${periodText.trim()}${anchor && anchor.getTime() !== 0 ? ` anchor ${instantText(anchor)}` : ''}`;
}

export function atText(instants: readonly Date[]): string {
  return `@at ${instants.map(instantText).join(', ')}`;
}

function instantText(d: Date): string {
  return d.toISOString().replace('.000Z', 'Z');
}

/**
 * The Schedule of a compound `text` in `timezone` (the zone of its cron parts; intervals and
 * instants are absolute). `cron` parses one cron part (schedule/cron.ts `parseSchedule`'s own
 * path, which refuses one that never fires). Throws an Error with a plain message.
 */
export function parseCompound(
  text: string,
  timezone: string,
  cron: (expression: string) => Schedule,
): Schedule {
  const [bodyText = '', ...boundTexts] = text.split(';');
  let from: Date | null = null;
  let until: Date | null = null;
  let maxFires: number | null = null;
  const calendars: CalendarClauses = { skip: [], only: [], shift: 'none' };
  let shiftSaid = false;
  for (const raw of boundTexts) {
    const clause = parseClause(raw);
    if (clause) {
      if (clause[0] === 'shift') {
        if (shiftSaid) throw new Error(`"${text}" says shift twice`);
        shiftSaid = true;
        calendars.shift = clause[1] as CalendarClauses['shift'];
      } else {
        const [word, name, items] = clause;
        for (const item of items) checkItem(item, timezone);
        calendars[word].push({ name, items });
      }
      continue;
    }
    const m = /^\s*(from|until|max)\s+(\S+)\s*$/i.exec(raw);
    if (!m) {
      throw new Error(
        `"${raw.trim()}" after ";" in "${text}" is not a bound: write from <instant>, ` +
          'until <instant>, max <count>, or a calendar clause (skip, only, shift)',
      );
    }
    const word = m[1]!.toLowerCase();
    const value = m[2]!;
    const seen = word === 'from' ? from : word === 'until' ? until : maxFires;
    if (seen != null) throw new Error(`"${text}" says ${word} twice`);
    if (word === 'from') from = instant(value, 'from');
    else if (word === 'until') until = instant(value, 'until');
    else {
      if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > MAX_FIRES_LIMIT) {
        throw new Error(`max ${value}: write a whole number from 1 to ${MAX_FIRES_LIMIT}`);
      }
      maxFires = Number(value);
    }
  }
  if (maxFires != null && from == null) {
    throw new Error(
      `"${text}": max needs from: every runner must count the same fires from the same instant`,
    );
  }
  if (from && until && until.getTime() < from.getTime()) {
    throw new Error(`"${text}": until is before from`);
  }
  const partTexts = bodyText.split('|').map((p) => p.trim());
  if (partTexts.some((p) => p === '')) {
    throw new Error(`"${text}" has an empty schedule between "|" or before ";"`);
  }
  const parts = partTexts.map((p) => parsePart(p, cron));
  const unionOfParts = (after: Date): Date | null => {
    let next: Date | null = null;
    for (const part of parts) {
      const at = part(after);
      if (at && (!next || at.getTime() < next.getTime())) next = at;
    }
    return next;
  };
  // The calendars judge the parts' union; the bounds then count and cut what they allow.
  const filter =
    calendars.skip.length + calendars.only.length > 0 || calendars.shift !== 'none'
      ? new CalendarFilter(calendars, timezone)
      : null;
  const union = filter ? (after: Date) => filter.next(unionOfParts, after) : unionOfParts;
  // The last fire: until's, or the max-th fire from `from` (counted once, here).
  let lastMs = until?.getTime() ?? Number.POSITIVE_INFINITY;
  if (maxFires != null) {
    let at: Date | null = new Date(from!.getTime() - 1);
    for (let n = 0; n < maxFires && at; n++) {
      at = union(at);
      if (at && n === maxFires - 1) lastMs = Math.min(lastMs, at.getTime());
    }
  }
  const firstMs = from?.getTime() ?? Number.NEGATIVE_INFINITY;
  const nextAfter = (after: Date): Date | null => {
    const start = after.getTime() < firstMs ? new Date(firstMs - 1) : after;
    const next = union(start);
    return next && next.getTime() <= lastMs ? next : null;
  };
  const bounded = (at: Date) => at.getTime() >= firstMs && at.getTime() <= lastMs;
  return {
    expression: text,
    timezone,
    nextAfter,
    nextN: (count, after) => nextFires(nextAfter, count, after),
    ...(filter
      ? {
          nextAfterWithin: (after: Date, originFrom: number, originUntil: number) => {
            const start = after.getTime() < firstMs ? new Date(firstMs - 1) : after;
            const next = filter.next(unionOfParts, start, originFrom, originUntil);
            return next && next.getTime() <= lastMs ? next : null;
          },
          // Read within the bounds, so that a full page means more to read (the calendar
          // watch's paging), and a fire moved out of them is skipped, not moved.
          calendarSkips: (from: Date, to: Date, max: number) => {
            const lo = Math.max(from.getTime(), firstMs - 1);
            const hi = Math.min(to.getTime(), lastMs);
            if (hi <= lo) return [];
            return filter
              .excluded(unionOfParts, new Date(lo), new Date(hi), max)
              .map((skip) =>
                skip.movedTo && !bounded(skip.movedTo) ? { ...skip, movedTo: null } : skip,
              );
          },
        }
      : {}),
  };
}

/** One part as "the first fire strictly after". */
function parsePart(
  text: string,
  cron: (expression: string) => Schedule,
): (after: Date) => Date | null {
  const every = /^@every\s+(\S+)(?:\s+anchor\s+(\S+))?$/i.exec(text);
  if (every) {
    const periodMs = parseDuration(every[1]!);
    if (periodMs == null || periodMs < 1_000 || periodMs % 1_000 !== 0) {
      throw new Error(
        `"${text}": the period must be whole seconds, at least 1s (90s, 30m, 2h, 1d, 1h30m)`,
      );
    }
    const anchorMs = every[2] != null ? instant(every[2], 'anchor').getTime() : 0;
    return (after) => {
      const k = Math.floor((after.getTime() - anchorMs) / periodMs) + 1;
      return new Date(anchorMs + k * periodMs);
    };
  }
  if (/^@every\b/i.test(text)) {
    throw new Error(`"${text}": write @every <period> [anchor <instant>], e.g. @every 90m`);
  }
  const at = /^@at\s+(.+)$/i.exec(text);
  if (at) {
    const instants = [
      ...new Set(at[1]!.split(',').map((v) => instant(v.trim(), '@at').getTime())),
    ].sort((a, b) => a - b);
    return (after) => {
      const next = instants.find((ms) => ms > after.getTime());
      return next == null ? null : new Date(next);
    };
  }
  if (/^@at\b/i.test(text)) {
    throw new Error(`"${text}": write @at <instant>[, <instant>…], e.g. @at 2027-01-01T03:00Z`);
  }
  const schedule = cron(text);
  return (after) => schedule.nextAfter(after);
}

/** An instant of the text: whole seconds, never read in the host's zone. */
function instant(value: string, what: string): Date {
  let d: Date;
  try {
    d = parseFrom(value);
  } catch {
    throw new Error(
      `${what} "${value}" is not an instant: write a date (2027-01-01, 00:00 UTC) or an ` +
        'ISO-8601 date and time with Z or an offset (2027-01-01T03:00:00+09:00)',
    );
  }
  if (d.getTime() % 1_000 !== 0) {
    throw new Error(`${what} "${value}": fires are whole seconds; leave out the fraction`);
  }
  return d;
}
