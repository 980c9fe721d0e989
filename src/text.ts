/**
 * Text for people, shared by the judgements of src/fleet/ and the commands of src/cli/: cut to a
 * column's length, flattened to one line, and instants as the history stores them.
 */

/**
 * `text` cut to at most `max` characters (code points, as a VARCHAR(max) of utf8mb4 counts
 * them), ending in '…' when cut — never inside a surrogate pair, whose lone half the database
 * would store as U+FFFD. For the one-line columns of the history (`error`, `reason`) that hold
 * text from jobs, operators and host names.
 */
export function truncate(text: string, max: number): string {
  // Fewer code units than `max`: fewer characters too.
  if (text.length <= max) return text;
  let count = 0;
  let cut = 0;
  let at = 0;
  for (const character of text) {
    count++;
    // Where the max-th character starts: the end of the first max − 1, before the '…'.
    if (count === max) cut = at;
    if (count > max) return `${text.slice(0, cut)}…`;
    at += character.length;
  }
  return text;
}

/** How many characters (code points) `text` has: what a VARCHAR's length counts. */
export function characterCount(text: string): number {
  // Each low surrogate that follows a high one is the second half of one character.
  return text.length - (text.match(/[\ud800-\udbff][\udc00-\udfff]/g)?.length ?? 0);
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

/**
 * The edit distance of `a` and `b`: insertions, deletions, substitutions and swaps of two
 * neighbours (optimal string alignment), so that `stauts` is one step from `status`.
 */
export function editDistance(a: string, b: string): number {
  let before: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const same = a[i - 1] === b[j - 1];
      let d = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (same ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, before[j - 2]! + 1);
      }
      row[j] = d;
    }
    before = prev;
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * The candidate a mistyped `name` most likely meant: the closest by edit distance (ignoring
 * case), if it is within a third of the name's length (at least one edit); else undefined.
 */
export function closest(name: string, candidates: Iterable<string>): string | undefined {
  const limit = Math.max(1, Math.floor(name.length / 3));
  let best: { name: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance <= limit && (best == null || distance < best.distance)) {
      best = { name: candidate, distance };
    }
  }
  return best?.name;
}
