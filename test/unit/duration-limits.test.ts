/**
 * Soft duration limits (`duration: {warn, min, warnFloor}`, docs/configuration.md): the relative
 * warn's computation (`p95x3` over the job's recent successful runs), the keys' checks with their
 * lines, the fingerprint, and library mode taking the same option.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_WARN_FLOOR_MS,
  percentile,
  RELATIVE_WARN_MIN_RUNS,
  RELATIVE_WARN_RUNS,
  relativeWarnMs,
  type WarnLimit,
} from '../../src/config/duration-limits.js';
import { jobFingerprint } from '../../src/config/fingerprint.js';
import { parseConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';
import { codeConfig } from '../../src/library/job-options.js';

const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-duration-')), 'schedules.yaml');

/** Every problem as `line:col path: message`. */
function problems(yaml: string): string[] {
  try {
    parseConfig(file, yaml);
  } catch (err) {
    if (err instanceof ConfigError) {
      return err.problems.map((p) => `${p.line}:${p.column} ${p.path}: ${p.message}`);
    }
    throw err;
  }
  return [];
}

const job = (lines: string) =>
  `jobs:\n  settle:\n    schedule: "* * * * *"\n    command: ["true"]\n${lines}`;

const rule = (percentileOf: number, factor: number, floorMs = 0) =>
  ({ kind: 'relative', percentile: percentileOf, factor, floorMs }) as Extract<
    WarnLimit,
    { kind: 'relative' }
  >;

describe('the relative warn', () => {
  it('p95 is the nearest rank: of 20 runs the 19th shortest, whatever their order', () => {
    const runs = Array.from({ length: 20 }, (_, i) => (i + 1) * 1_000).reverse();
    expect(percentile(runs, 95)).toBe(19_000);
    expect(percentile(runs, 50)).toBe(10_000);
    expect(percentile(runs, 99)).toBe(20_000);
    expect(percentile([7], 95)).toBe(7);
    expect(percentile([], 95)).toBeNull();
  });

  it('is the factor times the percentile, at least the floor', () => {
    const runs = Array.from({ length: 20 }, (_, i) => (i + 1) * 1_000);
    expect(relativeWarnMs(rule(95, 3), runs)).toBe(57_000);
    expect(relativeWarnMs(rule(95, 1.5), runs)).toBe(28_500);
    expect(relativeWarnMs(rule(95, 3, 120_000), runs)).toBe(120_000);
  });

  it(`applies from ${RELATIVE_WARN_MIN_RUNS} runs, and reads at most the latest ${RELATIVE_WARN_RUNS}`, () => {
    const few = Array.from({ length: RELATIVE_WARN_MIN_RUNS - 1 }, () => 1_000);
    expect(relativeWarnMs(rule(95, 3), few)).toBeNull();
    expect(relativeWarnMs(rule(95, 3), [...few, 2_000])).toBe(6_000);
    // The latest first: an old, long run beyond the window does not count.
    const latest = Array.from({ length: RELATIVE_WARN_RUNS }, () => 1_000);
    expect(relativeWarnMs(rule(95, 3), [...latest, 3_600_000])).toBe(3_000);
  });
});

describe('duration: in schedules.yaml', () => {
  it('loads a fixed warn and min, and a relative warn with its floor (default 1m)', () => {
    const fixed = parseConfig(file, job('    duration: {warn: 45m, min: 5s}\n')).jobs[0]!;
    expect(fixed.duration).toEqual({ warn: { kind: 'fixed', ms: 2_700_000 }, minMs: 5_000 });
    const relative = parseConfig(file, job('    duration: {warn: p95x3}\n')).jobs[0]!;
    expect(relative.duration).toEqual({
      warn: { kind: 'relative', percentile: 95, factor: 3, floorMs: DEFAULT_WARN_FLOOR_MS },
      minMs: null,
    });
    const floored = parseConfig(file, job('    duration: {warn: p90x2.5, warnFloor: 2m}\n'));
    expect(floored.jobs[0]!.duration!.warn).toEqual({
      kind: 'relative',
      percentile: 90,
      factor: 2.5,
      floorMs: 120_000,
    });
    expect(parseConfig(file, job('')).jobs[0]!.duration).toBeUndefined();
  });

  it('is inherited from defaults:, and replaced whole by a job’s own', () => {
    const yaml =
      'defaults:\n  duration: {warn: 1h}\n' +
      job('  other:\n    schedule: "* * * * *"\n    command: ["true"]\n    duration: {min: 1s}\n');
    const [settle, other] = parseConfig(file, yaml).jobs;
    expect(settle!.duration).toEqual({ warn: { kind: 'fixed', ms: 3_600_000 }, minMs: null });
    expect(other!.duration).toEqual({ warn: null, minMs: 1_000 });
  });

  it('refuses mistakes with their file line and key', () => {
    expect(problems(job('    duration: {warn: 5}\n'))).toEqual([
      expect.stringMatching(
        /^5:16 jobs\.settle\.duration\.warn: expected a duration, got 5: .*p95x3$/,
      ),
    ]);
    expect(problems(job('    duration:\n      warn: p100x3\n'))).toEqual([
      '6:7 jobs.settle.duration.warn: expected a percentile (p1 to p99) times a factor, such as p95x3, got "p100x3"',
    ]);
    expect(problems(job('    duration:\n      warn: p95x0.5\n'))).toEqual([
      expect.stringMatching(/^6:7 jobs\.settle\.duration\.warn: the factor is 1 to 100, got 0\.5/),
    ]);
    expect(problems(job('    duration:\n      warn: 5m\n      warnFloor: 1m\n'))).toEqual([
      expect.stringMatching(/^7:7 jobs\.settle\.duration\.warnFloor: `warnFloor` is the least/),
    ]);
    expect(problems(job('    duration:\n      warn: 5m\n      min: 5m\n'))).toEqual([
      '7:7 jobs.settle.duration.min: `min` 5m is not shorter than `warn` 5m: every successful run would be too short or slow',
    ]);
    expect(problems(job('    duration: {}\n'))).toEqual([
      '5:5 jobs.settle.duration: give `warn`, `min` or both (durations)',
    ]);
    expect(problems(job('    duration:\n      wran: 5m\n'))).toEqual([
      '6:7 jobs.settle.duration.wran: unknown key "wran"',
    ]);
    expect(problems(job('    duration:\n      warn: 30d\n'))).toEqual([
      expect.stringMatching(/^6:7 jobs\.settle\.duration\.warn: must be at most 24d/),
    ]);
  });

  it('refuses a warn a run without retries never reaches (its timeout stops it first)', () => {
    expect(problems(job('    timeout: 1m\n    duration:\n      warn: 1m\n'))).toEqual([
      '7:7 jobs.settle.duration.warn: `warn` 1m is not shorter than `timeout` 1m: the run is stopped before it could be slow',
    ]);
    // Inherited: said where it is written.
    expect(problems(`defaults:\n  duration:\n    warn: 5m\n${job('    timeout: 1m\n')}`)).toEqual([
      '3:5 defaults.duration.warn: `warn` 5m is not shorter than `timeout` 1m: the run is stopped before it could be slow (inherited by jobs.settle)',
    ]);
    // With retries the attempts add up past the timeout: a longer warn means something.
    expect(problems(job('    timeout: 1m\n    retries: 2\n    duration: {warn: 2m}\n'))).toEqual(
      [],
    );
  });
});

describe('the fingerprint and library mode', () => {
  it('the fingerprint has the limits; a job without them keeps the one it had', () => {
    const plain = parseConfig(file, job('')).jobs[0]!;
    const limited = parseConfig(file, job('    duration: {warn: 45m}\n')).jobs[0]!;
    const other = parseConfig(file, job('    duration: {warn: 46m}\n')).jobs[0]!;
    const { duration: _, ...without } = limited;
    expect(jobFingerprint(without, file)).toBe(jobFingerprint(plain, file));
    expect(jobFingerprint(limited, file)).not.toBe(jobFingerprint(plain, file));
    expect(jobFingerprint(limited, file)).not.toBe(jobFingerprint(other, file));
  });

  it('a job defined in code takes the same option, with the same checks', () => {
    const config = codeConfig(
      { namespace: 'lib' },
      new Map([['settle', { schedule: '* * * * *', duration: { warn: 'p95x3', min: '1s' } }]]),
    );
    expect(config.jobs[0]!.duration).toEqual({
      warn: { kind: 'relative', percentile: 95, factor: 3, floorMs: DEFAULT_WARN_FLOOR_MS },
      minMs: 1_000,
    });
    let error: unknown;
    try {
      codeConfig(
        { namespace: 'lib' },
        new Map([['settle', { schedule: '* * * * *', duration: { warn: '1s', min: '2s' } }]]),
      );
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      expect.objectContaining({ file: 'scheduler', path: 'jobs.settle.duration.min' }),
    ]);
  });
});
