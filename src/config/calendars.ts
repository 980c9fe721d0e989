/**
 * The file's `calendars:` (docs/schedules.md, "Calendars"): named sets of days and spans, from
 * `dates:` in the file and from iCalendar files (RFC 5545, read with ical.js), read at load like
 * the schedules file. Each becomes a list of items of schedule/calendar.ts's grammar; a job that
 * names it (`skipOn`, `onlyOn`) carries them in its timing line, so they are part of its
 * fingerprint and of its timing versions, and every runner computes the same fires.
 *
 * An iCalendar event that lasts whole days (`DTSTART;VALUE=DATE`) is those days in the job's
 * zone; a timed event with `Z` or a `TZID` that names an IANA zone is a span of instants; a
 * floating one (no zone) is a span of wall times in the job's zone. A recurring event (`RRULE`)
 * counts its occurrences up to RECURRENCE_YEARS after its start, at most MAX_ITEMS.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ICAL from 'ical.js';
import type { ConfigProblem } from '../errors.js';
import { utcMs, type WallClock } from '../instants.js';
import { CALENDAR_NAME, checkItem } from '../schedule/calendar.js';
import { assertTimeZone } from '../schedule/cron.js';
import { instantOfWall } from '../schedule/zoned.js';
import type { YamlSource } from './yaml-source.js';

/** How far a recurring event of a calendar file is counted: its timing must not depend on today. */
export const RECURRENCE_YEARS = 10;
/** The items of one calendar at most: they travel in the job's timing line. */
export const MAX_ITEMS = 2_000;

export interface RawCalendar {
  dates?: (string | { from: string; until: string })[];
  file?: string;
}

/**
 * The calendars by name: their items in schedule/calendar.ts's grammar, sorted, each once; null
 * for one with a problem (reported where it is written, not again at each job naming it).
 */
export type Calendars = ReadonlyMap<string, readonly string[] | null>;

export function buildCalendars(
  source: YamlSource,
  raw: Record<string, RawCalendar> | undefined,
  baseDir: string,
  problems: ConfigProblem[],
): Calendars {
  const calendars = new Map<string, readonly string[] | null>();
  for (const [name, spec] of Object.entries(raw ?? {})) {
    const at = ['calendars', name];
    const before = problems.length;
    if (!CALENDAR_NAME.test(name)) {
      problems.push(
        source.problem(
          at,
          'a calendar name is letters, digits, `_`, `.` and `-`, a letter or digit first',
        ),
      );
      calendars.set(name, null);
      continue;
    }
    const items: string[] = [];
    (spec.dates ?? []).forEach((d, i) => {
      const item = typeof d === 'string' ? d.trim() : `${d.from.trim()}/${d.until.trim()}`;
      try {
        // Checked in UTC: whether it is a day, a range or a span does not depend on the zone.
        checkItem(item, 'UTC');
        items.push(item);
      } catch (err) {
        problems.push(source.problem([...at, 'dates', i], (err as Error).message));
      }
    });
    if (spec.file != null) {
      const file = path.resolve(baseDir, spec.file);
      const read = readCalendarFile(file);
      if ('problem' in read) problems.push({ file, path: '', ...read.problem });
      else items.push(...read.items);
    }
    if (spec.dates == null && spec.file == null) {
      problems.push(source.problem(at, 'a calendar needs `dates:`, `file:` or both'));
    }
    const unique = [...new Set(items)].sort();
    if (unique.length > MAX_ITEMS) {
      problems.push(
        source.problem(at, `${unique.length} days and spans: at most ${MAX_ITEMS} per calendar`),
      );
    }
    calendars.set(name, problems.length === before ? unique : null);
  }
  return calendars;
}

/** A problem of a calendar file in baton's own words: never the file's text. */
class CalendarFileError extends Error {}

type FileRead = { items: string[] } | { problem: { line?: number; message: string } };

/** The items of an iCalendar file, or its first problem with its line. */
export function readCalendarFile(file: string): FileRead {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { problem: { message: `cannot read the calendar file (${code ?? 'error'})` } };
  }
  const lines = text.split(/\r?\n/);
  let root: ICAL.Component;
  try {
    root = new ICAL.Component(ICAL.parse(text));
  } catch {
    // ical.js names the line's text, not its number: the first line that is no content line
    // (`NAME;params:value`, or a folded continuation) is found here. Neither is repeated: a path
    // written wrong may point at a file of secrets.
    const bad = lines.findIndex(
      (l) => l.trim() !== '' && !/^[ \t]/.test(l) && !/^[A-Za-z0-9-]+[;:]/.test(l),
    );
    return {
      problem: {
        ...(bad >= 0 ? { line: bad + 1 } : {}),
        message: 'not iCalendar (RFC 5545): a line that is no NAME:value property',
      },
    };
  }
  if (root.name !== 'vcalendar') {
    return { problem: { line: 1, message: 'not iCalendar: no BEGIN:VCALENDAR' } };
  }
  const items: string[] = [];
  // The n-th VEVENT of the file starts at the n-th BEGIN:VEVENT line.
  const eventLines = lines.flatMap((l, i) => (/^BEGIN:VEVENT\s*$/i.test(l) ? [i + 1] : []));
  const events = root.getAllSubcomponents('vevent');
  for (const [n, component] of events.entries()) {
    const line = eventLines[n];
    try {
      items.push(...eventItems(component));
    } catch (err) {
      // Ours say what is wrong in words of their own; ical.js's may quote the file's text.
      const message =
        err instanceof CalendarFileError
          ? err.message
          : 'an event whose DTSTART, DTEND or RRULE cannot be read';
      return { problem: { ...(line ? { line } : {}), message } };
    }
    if (items.length > MAX_ITEMS) {
      return {
        problem: { ...(line ? { line } : {}), message: `more than ${MAX_ITEMS} days and spans` },
      };
    }
  }
  return { items };
}

/** One VEVENT's items: its days or span, for each occurrence. */
function eventItems(component: ICAL.Component): string[] {
  const event = new ICAL.Event(component);
  const start = event.startDate;
  if (!start) throw new CalendarFileError('an event without DTSTART');
  const tzid = component.getFirstProperty('dtstart')?.getParameter('tzid');
  const zone = typeof tzid === 'string' ? tzid : null;
  if (zone) checkZone(zone);
  const durationMs = endOf(event, start) - toMs(start, zone);
  if (durationMs <= 0 && !start.isDate) {
    throw new CalendarFileError('an event that ends before it starts');
  }
  const starts: ICAL.Time[] = [];
  if (event.isRecurring()) {
    const horizon = start.clone();
    horizon.year += RECURRENCE_YEARS;
    const it = event.iterator();
    for (let next = it.next(); next && next.compare(horizon) < 0; next = it.next()) {
      starts.push(next);
      if (starts.length > MAX_ITEMS) break;
    }
  } else {
    starts.push(start);
  }
  return starts.map((s) => {
    if (s.isDate) {
      const first = dateOf(s);
      // DTEND of a whole-day event is the day after its last (RFC 5545 3.6.1); none: one day.
      const days = Math.max(1, Math.round(durationMs / 86_400_000));
      if (days === 1) return first;
      const last = new Date(Date.parse(`${first}T00:00:00Z`) + (days - 1) * 86_400_000);
      return `${first}..${last.toISOString().slice(0, 10)}`;
    }
    if (s.zone?.tzid === 'UTC' || zone) {
      const from = toMs(s, zone);
      return `${isoSeconds(from)}/${isoSeconds(from + durationMs)}`;
    }
    // Floating: the job's zone's wall times.
    const end = s.clone();
    end.addDuration(ICAL.Duration.fromSeconds(Math.round(durationMs / 1000)));
    return `${wallOf(s)}/${wallOf(end)}`;
  });
}

function endOf(event: ICAL.Event, start: ICAL.Time): number {
  const tzid = event.component.getFirstProperty('dtstart')?.getParameter('tzid');
  const zone = typeof tzid === 'string' ? tzid : null;
  const end = event.endDate;
  if (!end) return toMs(start, zone) + (start.isDate ? 86_400_000 : 0);
  return toMs(end, zone);
}

/** An ICAL time as an instant: UTC, its TZID's zone (IANA), or (floating, dates) read as UTC. */
function toMs(t: ICAL.Time, zone: string | null): number {
  const wall: WallClock = [t.year, t.month, t.day, t.hour, t.minute, t.second];
  if (t.isDate || t.zone?.tzid === 'UTC' || !zone) return utcMs(wall);
  return instantOfWall(zone, wall);
}

function checkZone(zone: string): void {
  try {
    assertTimeZone(zone);
  } catch {
    // Not the zone's name: the file's text is never repeated.
    throw new CalendarFileError('its TZID is no IANA time zone this runtime knows');
  }
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');
const dateOf = (t: ICAL.Time) => `${pad(t.year, 4)}-${pad(t.month)}-${pad(t.day)}`;
const wallOf = (t: ICAL.Time) => `${dateOf(t)}T${pad(t.hour)}:${pad(t.minute)}:${pad(t.second)}`;
const isoSeconds = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
