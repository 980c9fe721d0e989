/**
 * Instants as a terminal shows them: the job's wall clock with its offset, "3m ago" / "in 2h",
 * and the short forms the 80-column views use (`12-03 11:45` when every instant shown is this
 * year and on a whole minute).
 */
import { utcMs } from '../instants.js';

const localFormats = new Map<string, Intl.DateTimeFormat>();

/**
 * `instant` as the job's wall clock with its UTC offset: `2027-03-14T03:00:00-04:00`. The offset
 * is computed from the instant itself, so it is the offset in force at that fire (EDT, not EST).
 */
export function formatLocal(instant: Date, timezone: string): string {
  let format = localFormats.get(timezone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    });
    localFormats.set(timezone, format);
  }
  const part: Record<string, number> = {};
  for (const p of format.formatToParts(instant)) {
    if (p.type !== 'literal') part[p.type] = Number(p.value);
  }
  const { year = 0, month = 1, day = 1, hour = 0, minute = 0, second = 0 } = part;
  const wholeSecond = Math.floor(instant.getTime() / 1000) * 1000;
  const offsetSeconds = Math.round(
    (utcMs([year, month, day, hour, minute, second]) - wholeSecond) / 1000,
  );
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  const abs = Math.abs(offsetSeconds);
  // Historical local mean times have offsets with seconds (New York before 1883: -04:56:02).
  const sign = offsetSeconds < 0 ? '-' : '+';
  const offset =
    `${sign}${pad(Math.floor(abs / 3600))}:${pad(Math.floor(abs / 60) % 60)}` +
    (abs % 60 ? `:${pad(abs % 60)}` : '');
  const date = `${pad(year, 4)}-${pad(month)}-${pad(day)}`;
  return `${date}T${pad(hour)}:${pad(minute)}:${pad(second)}${offset}`;
}

export function isUtc(timezone: string): boolean {
  // Etc/UTC, Etc/GMT, Zulu... all resolve to "UTC".
  return (
    new Intl.DateTimeFormat('en-US', { timeZone: timezone }).resolvedOptions().timeZone === 'UTC'
  );
}

/**
 * `instant` from `now` as people say it: "now", "42s ago", "3m ago", "5h ago", "12d ago",
 * "in 2h"; `short`, for a column headed AGO: "42s", "3m", "-2h" (in the future).
 */
export function relative(instant: Date, now: Date, style: 'words' | 'short' = 'words'): string {
  const ms = now.getTime() - instant.getTime();
  const words = span(Math.abs(ms));
  if (words === 'now') return words;
  if (style === 'short') return ms >= 0 ? words : `-${words}`;
  return ms >= 0 ? `${words} ago` : `in ${words}`;
}

function span(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 1) return 'now';
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (d < 1000) return `${d}d`;
  return `${Math.floor(d / 365)}y`;
}

/**
 * How much of an instant a column of them needs: the year only when some instant is not in
 * `now`'s year, the seconds only when some instant is not on a whole minute, never the
 * milliseconds (the wide views keep them).
 */
export interface InstantForm {
  year: boolean;
  seconds: boolean;
}

export function instantForm(instants: Date[], now: Date): InstantForm {
  return {
    year: instants.some((d) => d.getUTCFullYear() !== now.getUTCFullYear()),
    seconds: instants.some((d) => d.getTime() % 60_000 !== 0),
  };
}

/** `2026-12-03 11:45:00.000` cut to the form: `12-03 11:45`, `2026-12-03 11:45:07`. */
export function shortInstant(instant: Date, form: InstantForm): string {
  const iso = instant.toISOString();
  return `${iso.slice(form.year ? 0 : 5, 10)} ${iso.slice(11, form.seconds ? 19 : 16)}`;
}

/**
 * The job's wall clock at `instant`, short: `06:45-05`, `17:15+05:30` (the offset's minutes only
 * when it has some). The date and the seconds are left out: the UTC column beside it has them,
 * and the offset tells whether the local date is the day before or after.
 */
export function shortLocal(instant: Date, timezone: string): string {
  const full = formatLocal(instant, timezone); // 2027-03-14T03:00:00-04:00
  const time = full.slice(11, 16);
  const offset = full.slice(19).replace(/:00$/, '');
  return `${time}${offset}`;
}
