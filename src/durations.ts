/**
 * Durations as people write them in schedules.yaml and on the command line: `90s`, `30m`, `2h`,
 * `1d`, `1h30m`, `500ms`. A unit is required — a bare `90` could mean seconds or milliseconds,
 * and guessing wrong turns a 90-second timeout into a 90-millisecond one.
 */
const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y;

/** Milliseconds, or null when `text` is not a duration. */
export function parseDuration(text: string): number | null {
  const compact = text.trim();
  if (compact === '') return null;
  let total = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < compact.length) {
    const match = PART.exec(compact);
    if (!match) return null;
    total += Number(match[1]) * UNIT_MS[match[2]!]!;
  }
  return Math.round(total);
}

export const DURATION_HINT = 'write a number with a unit: 500ms, 90s, 30m, 2h, 1d (or 1h30m)';
