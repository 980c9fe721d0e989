/**
 * `retryDelay:` (config/retry-delay.ts): a fixed wait, or a backoff `{initial, factor, max}` whose
 * jitter is drawn from the fire — a pure function of (namespace, job, fire instant, attempt), so
 * every runner computes the same waits — never past `max`; how it is written, and refused with
 * its line; the worst case the lock probe adds up; the words `baton explain` uses.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import {
  describeRetries,
  longestRetryWaitsMs,
  retryWaitMs,
  RETRY_JITTER,
  type RetryPolicy,
} from '../../src/config/retry-delay.js';
import { jobFingerprint } from '../../src/config/fingerprint.js';
import { jobsOutlivingLocks } from '../../src/coordination/lock-probe.js';
import { ConfigError } from '../../src/errors.js';
import { codeConfig } from '../../src/library/job-options.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-retry-delay-'));
const file = path.join(dir, 'schedules.yaml');
writeFileSync(file, '');

const fire = new Date('2027-03-01T03:00:00Z');
const backoff = (initialMs: number, factor: number, maxMs: number, retries = 3): RetryPolicy => ({
  name: 'settle',
  retries,
  retryDelayMs: initialMs,
  retryBackoff: { factor, maxMs },
});
/** Every fire of a day, a minute apart: enough draws to see the jitter's whole range. */
const fires = Array.from({ length: 1_440 }, (_, i) => new Date(fire.getTime() + i * 60_000));

describe('the wait before a retry', () => {
  it('a fixed retryDelay: the same before every attempt, no jitter', () => {
    const job = { name: 'settle', retries: 3, retryDelayMs: 30_000 };
    for (const at of fires.slice(0, 50)) {
      expect([2, 3, 4].map((a) => retryWaitMs('default', job, at, a))).toEqual([
        30_000, 30_000, 30_000,
      ]);
    }
  });

  it('a backoff grows by its factor: 1s, 2s, 4s, each within ±10%', () => {
    const job = backoff(1_000, 2, 600_000);
    for (const at of fires) {
      const waits = [2, 3, 4].map((a) => retryWaitMs('default', job, at, a));
      [1_000, 2_000, 4_000].forEach((base, i) => {
        expect(waits[i]).toBeGreaterThanOrEqual(base * (1 - RETRY_JITTER));
        expect(waits[i]).toBeLessThanOrEqual(base * (1 + RETRY_JITTER));
      });
    }
  });

  it('is a pure function of (namespace, job, fire, attempt): the same on every runner, spread between fires', () => {
    const job = backoff(10_000, 2, 600_000);
    const a = retryWaitMs('default', job, fire, 3);
    // Computed again (another runner, a restart): the same.
    expect(retryWaitMs('default', { ...job }, new Date(fire.getTime()), 3)).toBe(a);
    // Each input changes the draw.
    const others = [
      retryWaitMs('other-ns', job, fire, 3),
      retryWaitMs('default', { ...job, name: 'report' }, fire, 3),
      retryWaitMs('default', job, new Date(fire.getTime() + 1_000), 3),
    ];
    expect(others.some((w) => w !== a)).toBe(true);
    // Over many fires the jitter covers its range, both ways.
    const waits = fires.map((at) => retryWaitMs('default', job, at, 2));
    expect(Math.min(...waits)).toBeLessThan(9_100);
    expect(Math.max(...waits)).toBeGreaterThan(10_900);
    expect(new Set(waits).size).toBeGreaterThan(1_000);
    // And the attempts of one fire are drawn apart: not all at the same point of their range.
    const fractions = [2, 3, 4, 5].map(
      (n) => retryWaitMs('default', job, fire, n) / (10_000 * 2 ** (n - 2)),
    );
    expect(new Set(fractions.map((f) => f.toFixed(3))).size).toBeGreaterThan(1);
  });

  it('never waits longer than max: at the cap the jitter only shortens', () => {
    const job = backoff(1_000, 2, 5_000, 10);
    for (const at of fires) {
      for (let attempt = 2; attempt <= 11; attempt++) {
        const w = retryWaitMs('default', job, at, attempt);
        expect(w).toBeLessThanOrEqual(5_000);
        if (attempt >= 6) expect(w).toBeGreaterThanOrEqual(5_000 * (1 - RETRY_JITTER));
      }
    }
    // The largest factor over the most retries stays a number, at its max.
    const steep = backoff(1_000, 10, 86_400_000, 100);
    expect(retryWaitMs('default', steep, fire, 101)).toBeLessThanOrEqual(86_400_000);
    expect(Number.isFinite(longestRetryWaitsMs(steep))).toBe(true);
  });

  it('factor 1: every wait the initial one, jittered', () => {
    const job = backoff(4_000, 1, 600_000, 5);
    for (const at of fires.slice(0, 200)) {
      for (let attempt = 2; attempt <= 6; attempt++) {
        const w = retryWaitMs('default', job, at, attempt);
        expect(w).toBeGreaterThanOrEqual(3_600);
        expect(w).toBeLessThanOrEqual(4_400);
      }
    }
  });

  it("the longest waits a run can add up to bound every fire's, and the lock probe uses them", () => {
    const job = backoff(60_000, 2, 600_000, 6);
    const longest = longestRetryWaitsMs(job);
    // 1m, 2m, 4m, 8m, then 10m twice, each 10% longer but the capped ones: 16.5m + 20m.
    expect(longest).toBe(66_000 + 132_000 + 264_000 + 528_000 + 600_000 + 600_000);
    for (const at of fires) {
      let total = 0;
      for (let attempt = 2; attempt <= 7; attempt++)
        total += retryWaitMs('default', job, at, attempt);
      expect(total).toBeLessThanOrEqual(longest);
    }
    expect(longestRetryWaitsMs({ retries: 2, retryDelayMs: 120_000 })).toBe(240_000);
    // On a server whose locks expire after 40 minutes: 6 attempts of 1 minute and the waits of
    // the backoff (36.5m) reach it; the same retries 2 minutes apart do not.
    const ttl = 40 * 60_000;
    const jobs = [
      { ...job, name: 'backoff', timeoutMs: 60_000 },
      { name: 'fixed', retries: 6, retryDelayMs: 120_000, timeoutMs: 60_000 },
    ];
    expect(jobsOutlivingLocks(jobs, ttl)).toEqual(['backoff']);
  });

  it('is said in words for `baton explain`', () => {
    expect(describeRetries({ retries: 0, retryDelayMs: 10_000 })).toBe('no retries');
    expect(describeRetries({ retries: 1, retryDelayMs: 0 })).toBe('1 retry, at once');
    expect(describeRetries({ retries: 2, retryDelayMs: 30_000 })).toBe('2 retries, 30s apart');
    expect(describeRetries(backoff(1_500, 2, 600_000))).toBe(
      '3 retries, from 1.5s, ×2 up to 10m, ±10%',
    );
    expect(describeRetries(backoff(4_000, 1, 600_000))).toBe('3 retries, 4s apart ±10%');
  });
});

describe('retryDelay in schedules.yaml', () => {
  const load = (text: string) => parseConfig(file, text);
  const problems = (text: string): string[] => {
    try {
      load(text);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      return err.problems.map((p) => `${p.line}:${p.path}: ${p.message}`);
    }
    return [];
  };
  const job = (retryDelay: string) => `jobs:
  x:
    schedule: "0 3 * * *"
    command: ["true"]
    retries: 3
    retryDelay: ${retryDelay}
`;

  it('takes a duration as before, and {initial, factor, max} with defaults 10s, 2 and 10m', () => {
    expect(load(job('30s')).jobs[0]).toMatchObject({ retries: 3, retryDelayMs: 30_000 });
    expect(load(job('30s')).jobs[0]!.retryBackoff).toBeUndefined();
    expect(load(job('{initial: 1s, factor: 2, max: 1m}')).jobs[0]).toMatchObject({
      retryDelayMs: 1_000,
      retryBackoff: { factor: 2, maxMs: 60_000 },
    });
    expect(load(job('{factor: 1.5}')).jobs[0]).toMatchObject({
      retryDelayMs: 10_000,
      retryBackoff: { factor: 1.5, maxMs: 600_000 },
    });
    // In block style, and from `defaults:` (a job's own form replaces it whole).
    const config = load(`defaults:
  retryDelay:
    initial: 5s
    max: 2m
jobs:
  inherits:
    schedule: "0 3 * * *"
    command: ["true"]
  fixed:
    schedule: "0 3 * * *"
    command: ["true"]
    retryDelay: 20s
`);
    expect(config.jobs[0]).toMatchObject({
      retryDelayMs: 5_000,
      retryBackoff: { factor: 2, maxMs: 120_000 },
    });
    expect(config.jobs[1]!.retryBackoff).toBeUndefined();
    expect(config.jobs[1]!.retryDelayMs).toBe(20_000);
  });

  it('refuses a mistake with its line (exit 78), naming the key', () => {
    expect(problems(job('{initial: 10s, max: 1s}'))).toEqual([
      '6:jobs.x.retryDelay.max: max 1s is shorter than initial 10s',
    ]);
    expect(problems(job('{initial: 30m}'))).toEqual([
      "6:jobs.x.retryDelay.initial: initial 30m is longer than max's default 10m: give max too",
    ]);
    expect(problems(job('{factor: 0.5}'))).toEqual([
      '6:jobs.x.retryDelay.factor: factor must be 1 or more (1: every wait the same, with the jitter)',
    ]);
    expect(problems(job('{factor: 11}'))).toEqual([
      '6:jobs.x.retryDelay.factor: factor must be at most 10',
    ]);
    expect(problems(job('{inital: 1s}'))).toEqual([
      '6:jobs.x.retryDelay.inital: unknown key "inital"',
    ]);
    expect(problems(job('{initial: 0s}'))[0]).toMatch(
      /^6:jobs\.x\.retryDelay\.initial: must be more than 0s/,
    );
    expect(problems(job('{max: 30d}'))[0]).toMatch(
      /^6:jobs\.x\.retryDelay\.max: must be at most 24d/,
    );
    expect(problems(job('soon'))[0]).toMatch(
      /^6:jobs\.x\.retryDelay: expected a duration, got "soon": .*; or \{initial, factor, max\} for a backoff$/,
    );
    // Block style: the line of the key itself.
    expect(
      problems(`jobs:
  x:
    schedule: "0 3 * * *"
    command: ["true"]
    retryDelay:
      initial: 1s
      factor: 0
`),
    ).toEqual([
      '7:jobs.x.retryDelay.factor: factor must be 1 or more (1: every wait the same, with the jitter)',
    ]);
  });

  it('a backoff is part of the fingerprint; a fixed delay leaves it as it was', () => {
    const fixed = load(job('10s')).jobs[0]!;
    const grown = load(job('{initial: 10s}')).jobs[0]!;
    expect(jobFingerprint(grown, file)).not.toBe(jobFingerprint(fixed, file));
    // A job without a backoff has the fingerprint older runners publish (no false drift).
    const { retryBackoff: _none, ...plain } = fixed;
    expect(jobFingerprint(plain, file)).toBe(jobFingerprint(fixed, file));
  });
});

describe('retryDelay in library mode (scheduler.job options)', () => {
  it('takes the same forms, refused with the same messages', () => {
    const config = codeConfig(
      { namespace: 'app' },
      new Map([
        ['grows', { schedule: '0 3 * * *', retries: 2, retryDelay: { initial: '2s', factor: 3 } }],
        ['fixed', { schedule: '0 3 * * *', retries: 2, retryDelay: '30s' }],
      ]),
    );
    expect(config.jobs.find((j) => j.name === 'grows')).toMatchObject({
      retryDelayMs: 2_000,
      retryBackoff: { factor: 3, maxMs: 600_000 },
    });
    expect(config.jobs.find((j) => j.name === 'fixed')).toMatchObject({ retryDelayMs: 30_000 });
    let problems: string[] = [];
    try {
      codeConfig(
        { namespace: 'app' },
        new Map([['bad', { schedule: '0 3 * * *', retryDelay: { initial: '1m', max: '10s' } }]]),
      );
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems = err.problems.map((p) => `${p.file}: ${p.path}: ${p.message}`);
    }
    expect(problems).toEqual([
      'scheduler: jobs.bad.retryDelay.max: max 10s is shorter than initial 1m',
    ]);
  });
});
