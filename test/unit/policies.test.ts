/**
 * The pure parts of the fault-handling policies: durations as written in schedules.yaml, the job
 * policy keys with their defaults, and the look-back window that decides which fires are caught up
 * or recorded as missed after an outage.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '../../src/config/duration.js';
import { parseConfig } from '../../src/config/load.js';
import type { JobDefinition } from '../../src/config/schema.js';
import { lookBack, MAX_FIRES_PER_PASS, MISSED_WINDOW_MS } from '../../src/daemon/recovery.js';
import { ConfigError } from '../../src/errors.js';
import { parseSchedule } from '../../src/schedule/cron.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-policies-'));
const file = path.join(dir, 'schedules.yaml');
writeFileSync(file, '');

describe('durations', () => {
  it('need a unit and may combine units', () => {
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('30m')).toBe(1_800_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('1.5s')).toBe(1_500);
    expect(parseDuration('2d')).toBe(172_800_000);
    for (const bad of ['90', '', 's', '10 minutes', '-5s', '5s ago', '1h 30m']) {
      expect(parseDuration(bad), bad).toBeNull();
    }
  });

  it('format back the way people write them', () => {
    expect(formatDuration(90_000)).toBe('1m30s');
    expect(formatDuration(500)).toBe('500ms');
    expect(formatDuration(93_600_000)).toBe('1d2h');
  });
});

describe('job policy keys', () => {
  it('have safe defaults and are inherited from defaults:', () => {
    const config = parseConfig(
      file,
      `defaults:
  timeout: 30m
  retryDelay: 1m
jobs:
  plain:
    schedule: "0 3 * * *"
    command: ["true"]
  tuned:
    schedule: "0 4 * * *"
    command: ["true"]
    timeout: 90s
    retries: 2
    catchUp: 10m
    overlap: queue
`,
    );
    const [plain, tuned] = config.jobs;
    expect(plain).toMatchObject({
      timeoutMs: 1_800_000,
      retries: 0,
      retryDelayMs: 60_000,
      catchUpMs: null,
      overlap: 'skip',
    });
    expect(tuned).toMatchObject({
      timeoutMs: 90_000,
      retries: 2,
      retryDelayMs: 60_000,
      catchUpMs: 600_000,
      overlap: 'queue',
    });
  });

  it('are validated together, each problem at its line', () => {
    let problems: string[] = [];
    try {
      parseConfig(
        file,
        `jobs:
  x:
    schedule: "0 3 * * *"
    command: ["true"]
    timeout: 90
    retryDelay: soon
    retries: -1
    overlap: sometimes
`,
      );
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems = err.problems.map((p) => `${p.line}:${p.path}: ${p.message}`).sort();
    }
    expect(problems).toHaveLength(4);
    expect(problems[0]).toMatch(/^5:jobs\.x\.timeout: expected a duration, got 90: write a number/);
    expect(problems[1]).toMatch(/^6:jobs\.x\.retryDelay: expected a duration, got "soon"/);
    expect(problems[2]).toBe('7:jobs.x.retries: retries must be 0 or more');
    expect(problems[3]).toMatch(/^8:jobs\.x\.overlap: .*skip.*queue.*allow/);
  });
});

describe('look-back after an outage', () => {
  const job = (catchUpMs: number | null) =>
    ({ name: 'settle', catchUpMs }) as unknown as JobDefinition;
  const everyMinute = parseSchedule('* * * * *', 'UTC');
  const now = new Date('2026-11-30T03:10:30Z');

  it('covers the catch-up window, oldest fire first, up to now', () => {
    const { fires, from } = lookBack(job(600_000), everyMinute, now, new Date(0));
    expect(from.toISOString()).toBe('2026-11-30T03:00:30.000Z');
    expect(fires.map((f) => f.toISOString().slice(11, 16))).toEqual([
      '03:01',
      '03:02',
      '03:03',
      '03:04',
      '03:05',
      '03:06',
      '03:07',
      '03:08',
      '03:09',
      '03:10',
    ]);
  });

  it('covers the last hour without catchUp, and never reaches before the job was known', () => {
    expect(lookBack(job(null), everyMinute, now, new Date(0)).fires).toHaveLength(
      MISSED_WINDOW_MS / 60_000,
    );
    const knownSince = new Date('2026-11-30T03:08:00Z');
    const { fires } = lookBack(job(null), everyMinute, now, knownSince);
    expect(fires.map((f) => f.toISOString().slice(11, 16))).toEqual(['03:09', '03:10']);
  });

  it('keeps the newest fires when an every-second job was out for longer than a pass covers', () => {
    const everySecond = parseSchedule('* * * * * *', 'UTC');
    const { fires } = lookBack(job(7_200_000), everySecond, now, new Date(0));
    expect(fires).toHaveLength(MAX_FIRES_PER_PASS);
    expect(fires.at(-1)!.getTime()).toBe(now.getTime());
  });
});
