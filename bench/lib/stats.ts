/** Percentiles and small number helpers shared by the scenarios. */

export interface Distribution {
  n: number;
  min: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/**
 * Nearest-rank percentiles (p99 of 60 samples is the 60th value: with few samples the tail
 * percentiles are the maximum, said plainly rather than interpolated). NaN fields for no samples.
 */
export function percentiles(values: readonly number[]): Distribution {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  const n = sorted.length;
  const rank = (p: number) => sorted[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))]!;
  if (n === 0) return { n, min: NaN, p50: NaN, p95: NaN, p99: NaN, max: NaN, mean: NaN };
  return {
    n,
    min: sorted[0]!,
    p50: rank(50),
    p95: rank(95),
    p99: rank(99),
    max: sorted[n - 1]!,
    mean: sorted.reduce((s, v) => s + v, 0) / n,
  };
}

/** Rounds to `digits` decimals (figures in results files stay readable). */
export function round(value: number, digits = 2): number {
  if (!Number.isFinite(value)) return value;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** `{ prefix_p50: …, prefix_p95: …, … }` from a distribution, rounded. */
export function distFigures(prefix: string, d: Distribution, digits = 2): Record<string, number> {
  return {
    [`${prefix}_n`]: d.n,
    [`${prefix}_p50`]: round(d.p50, digits),
    [`${prefix}_p95`]: round(d.p95, digits),
    [`${prefix}_p99`]: round(d.p99, digits),
    [`${prefix}_max`]: round(d.max, digits),
  };
}

/** A table row for a distribution: `{ what, n, p50, p95, p99, max, … }`. */
export function distRow(
  what: string,
  d: Distribution,
  extra: Record<string, string | number> = {},
  unit = 'ms',
): Record<string, string | number> {
  const f = (v: number) => (Number.isFinite(v) ? `${round(v, 2)} ${unit}` : '-');
  return {
    what,
    n: d.n,
    p50: f(d.p50),
    p95: f(d.p95),
    p99: f(d.p99),
    max: f(d.max),
    ...extra,
  };
}
