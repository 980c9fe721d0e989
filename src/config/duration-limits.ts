/**
 * Soft duration limits (`duration: {warn, min, warnFloor}`, docs/configuration.md): when a run is
 * slow, or suspiciously fast, told without stopping it. Plain values and rules, no schema (the
 * daemon imports this, never zod: see defaults.ts); the keys are checked in schema.ts and load.ts.
 *
 * - **`warn`**: a run still going (or ended) past this long after its start is `slow` — one event
 *   per run. Either a duration (`45m`) or relative to the job's own history: `p95x3` is three
 *   times the 95th percentile of its last RELATIVE_WARN_RUNS successful runs, never less than
 *   `warnFloor` (default DEFAULT_WARN_FLOOR_MS), and only once it has RELATIVE_WARN_MIN_RUNS of
 *   them (before that, its runs have no warn).
 * - **`min`**: a successful (`done`) run shorter than this is `too-short` — a batch that found
 *   nothing to do, or that exited before doing it.
 *
 * The warn of a run is fixed when it starts and kept on its row (`baton_runs.warn_at`), so that any
 * runner (a reaper, `baton status`, `/metrics`) judges it without the job's definition.
 */

/** A job's `warn`: a duration, or a multiple of a percentile of its recent successful runs. */
export type WarnLimit =
  | { kind: 'fixed'; ms: number }
  | { kind: 'relative'; percentile: number; factor: number; floorMs: number };

/** A job's `duration:` as loaded; at least one of the two is set. */
export interface DurationLimits {
  warn: WarnLimit | null;
  minMs: number | null;
}

/**
 * How many of the job's latest successful runs a relative warn is computed from: enough for a
 * 95th percentile to be a run rather than the maximum, few enough to follow a job whose work grows.
 */
export const RELATIVE_WARN_RUNS = 20;

/** Below this many successful runs a relative warn does not apply: a percentile of 2 runs is noise. */
export const RELATIVE_WARN_MIN_RUNS = 5;

/**
 * The least a relative warn is, unless `warnFloor` says otherwise: a job that takes seconds varies
 * by seconds, and "three times 2 s" would call every hiccup of the database slow.
 */
export const DEFAULT_WARN_FLOOR_MS = 60_000;

/** The largest factor of a relative warn (`p95x100`): past it, the warn is no warn. */
export const MAX_WARN_FACTOR = 100;

const RELATIVE = /^p(\d{1,2})x(\d+(?:\.\d+)?)$/;

/**
 * `p95x3` → `{percentile: 95, factor: 3}`; null when `text` is not of that form. The ranges
 * (percentile 1–99, factor 1–MAX_WARN_FACTOR) are the caller's to check, so that it can say which
 * is wrong.
 */
export function parseRelativeWarn(text: string): { percentile: number; factor: number } | null {
  const match = RELATIVE.exec(text.trim());
  if (!match) return null;
  return { percentile: Number(match[1]), factor: Number(match[2]) };
}

/**
 * The `p`th percentile of `values` by the nearest-rank method: the smallest value that at least
 * `p` percent of them do not exceed (of 20 runs, p95 is the 19th shortest). No interpolation: the
 * answer is a duration some run really took. Null for no values.
 */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

/**
 * The warn in ms of a run of a job with a relative `warn`, from the durations of its latest
 * successful runs (at most RELATIVE_WARN_RUNS of them, any order): `factor` × the percentile,
 * at least the floor. Null when there are fewer than RELATIVE_WARN_MIN_RUNS: the run has no warn.
 */
export function relativeWarnMs(
  rule: Extract<WarnLimit, { kind: 'relative' }>,
  durationsMs: readonly number[],
): number | null {
  const recent = durationsMs.slice(0, RELATIVE_WARN_RUNS);
  if (recent.length < RELATIVE_WARN_MIN_RUNS) return null;
  const p = percentile(recent, rule.percentile)!;
  return Math.max(rule.floorMs, Math.round(p * rule.factor));
}

/** `45m`, or `p95x3 (at least 1m)`: the warn as written, for `baton list` and messages. */
export function describeWarn(warn: WarnLimit, format: (ms: number) => string): string {
  if (warn.kind === 'fixed') return format(warn.ms);
  return `p${warn.percentile}x${warn.factor} (at least ${format(warn.floorMs)})`;
}
