/**
 * Text for people, shared by the judgements of src/fleet/ and the commands of src/cli/: cut to a
 * column's length, flattened to one line, and instants as the history stores them.
 */

/**
 * `text` cut to at most `max` UTF-16 code units, ending in '…' when cut — never inside a
 * surrogate pair, whose lone half the database would store as U+FFFD. For the one-line columns
 * of the history (`error`, `reason`) that hold text from jobs and host names.
 */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}

/** `s` on one line (runs of white space become one space), cut to `max` with '…'. */
export function oneLine(s: string, max = 100): string {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** `2026-11-30T03:00:00.000Z` → `2026-11-30 03:00:00.000` (UTC, as stored); '' for null. */
export function formatInstant(d: Date | null): string {
  return d ? d.toISOString().replace('T', ' ').replace('Z', '') : '';
}
