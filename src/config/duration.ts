/**
 * Durations in schedules.yaml and on the command line: read by the leaf `src/durations.ts` (the
 * schedule layer, below this one, reads them too: `@every 90m`), written here for people.
 */
export { DURATION_HINT, parseDuration } from '../durations.js';

/**
 * How a duration is written for people; every style rounds to whole seconds from a minute up.
 * - `compact` (the default), for messages that echo schedules.yaml: every unit down to the
 *   second, as parseDuration reads it back — `450ms`, `2s`, `1m30s`, `1h5s`, `1d2h`.
 * - `table`, for the columns of history, show, explain and status: two fields of hours,
 *   minutes and seconds at most, the second one padded — `450ms`, `1.5s`, `2.0s`, `1m05s`,
 *   `1h02m`, `25h00m`.
 * - `brief`, for the sentences of status warnings: the two largest units that are not zero —
 *   `450ms`, `1.5s`, `2s`, `1m30s`, `1d5m`.
 */
export type DurationStyle = 'compact' | 'table' | 'brief';

interface StyleRules {
  /** Below a second: round the milliseconds (otherwise written as given). */
  roundMs: boolean;
  /** From a second to a minute: written this way, or like longer durations when absent. */
  belowMinute?: (ms: number) => string;
  /** The largest unit written. */
  largest: 'd' | 'h';
  /** How many units at most. */
  parts: number;
  /** After the first unit, every next one, padded to two digits, zero or not. */
  padded: boolean;
}

const STYLES: Record<DurationStyle, StyleRules> = {
  compact: { roundMs: false, largest: 'd', parts: Infinity, padded: false },
  table: {
    roundMs: false,
    belowMinute: (ms) => `${(ms / 1_000).toFixed(1)}s`,
    largest: 'h',
    parts: 2,
    padded: true,
  },
  brief: {
    roundMs: true,
    belowMinute: (ms) => `${Math.round(ms / 100) / 10}s`,
    largest: 'd',
    parts: 2,
    padded: false,
  },
};

const UNITS = [
  ['d', 86_400],
  ['h', 3_600],
  ['m', 60],
  ['s', 1],
] as const;

/** `90000` → `1m30s`: baton's one duration formatter, in one of its styles (above). */
export function formatDuration(ms: number, style: DurationStyle = 'compact'): string {
  const rules = STYLES[style];
  if (ms < 1_000) return `${rules.roundMs ? Math.round(ms) : ms}ms`;
  if (ms < 60_000 && rules.belowMinute) return rules.belowMinute(ms);
  const parts: string[] = [];
  let rest = Math.round(ms / 1_000);
  for (const [unit, size] of UNITS.slice(UNITS.findIndex(([u]) => u === rules.largest))) {
    if (parts.length === rules.parts) break;
    if (parts.length > 0 && rules.padded) {
      parts.push(`${String(Math.floor(rest / size)).padStart(2, '0')}${unit}`);
      rest %= size;
    } else if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join('');
}
