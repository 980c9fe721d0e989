/**
 * Instants as operators type them: a fire time (`baton run --fire`, `explain`, `backfill --from`,
 * the write API's backfill) and `list --from`. Read the same on every host, never in the host's
 * zone. A leaf, so that the write API (src/http) checks a request with the commands' own rules.
 */
import { UsageError } from './errors.js';

/**
 * A fire time: ISO-8601 with `Z` or an offset, or without one — then read as UTC, the way
 * `baton history` prints fires (`2026-11-30 03:00:00.000`), never in this host's zone.
 */
export function parseFireTime(value: string): Date {
  const noZone = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?$/i.test(value.trim());
  try {
    return parseFrom(noZone ? `${value.trim()}Z` : value.trim());
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    throw new UsageError(
      `fire time "${value}" is not an ISO-8601 instant: expected e.g. 2026-11-30T03:00:00Z, ` +
        '2026-11-30T04:00:00+01:00, or 2026-11-30 03:00:00.000 (UTC, as history prints it)',
    );
  }
}

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?$/i;

/**
 * `--from`: a date (00:00 UTC that day) or a date and time with `Z` or an offset. A time without
 * an offset is refused rather than read in the host's zone: the same command would then show
 * different fires on different hosts, which is what `list --from` exists to rule out.
 */
export function parseFrom(value: string): Date {
  const bad = (why: string) =>
    new UsageError(
      `--from "${value}": ${why}; expected a date such as 2027-03-13 (00:00 UTC) or an ` +
        'ISO-8601 instant such as 2027-03-13T02:00:00-05:00 or 2027-03-13T07:00:00Z',
    );
  const date = DATE_ONLY.exec(value);
  const dateTime = date ? null : DATE_TIME.exec(value);
  const m = date ?? dateTime;
  if (!m) throw bad('not a date or an ISO-8601 instant');
  const [y, mo, d, h = '0', mi = '0', s = '0', frac = '', zone] = m.slice(1);
  if (dateTime && zone == null) {
    throw bad('the time has no offset (add Z or an offset such as -05:00)');
  }
  const fields = [y, mo, d, h, mi, s].map(Number) as WallClock;
  const wall = utcMs(fields);
  const check = new Date(wall);
  // Dates roll 2027-02-30 over into March; a calendar mistake should be reported instead.
  const back = [
    check.getUTCFullYear(),
    check.getUTCMonth() + 1,
    check.getUTCDate(),
    check.getUTCHours(),
    check.getUTCMinutes(),
    check.getUTCSeconds(),
  ];
  if (back.some((v, i) => v !== fields[i])) throw bad('no such date or time');
  let offsetMinutes = 0;
  if (zone != null && zone.toUpperCase() !== 'Z') {
    const z = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)!;
    const hours = Number(z[2]);
    const minutes = Number(z[3]);
    if (hours > 23 || minutes > 59) throw bad(`no such offset ${zone}`);
    offsetMinutes = (z[1] === '-' ? -1 : 1) * (hours * 60 + minutes);
  }
  const ms = Math.floor(Number(`0.${frac || '0'}`) * 1000);
  return new Date(wall - offsetMinutes * 60_000 + ms);
}

/** Year, month (1-12), day, hour, minute, second. */
export type WallClock = [number, number, number, number, number, number];

/** The wall clock read as UTC, in ms. Unlike Date.UTC, years 0-99 stay years 0-99. */
export function utcMs([year, month, day, hour, minute, second]: WallClock): number {
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, 0);
  return d.getTime();
}
