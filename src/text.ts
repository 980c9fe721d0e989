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
