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
import { lookBack, MAX_FIRES_PER_PASS, MISSED_WINDOW_MS } from '../../src/schedule/look-back.js';
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

  it('take retryDelay: 0s as "retry at once", also over a default', () => {
    const config = parseConfig(
      file,
      `defaults:
  retryDelay: 1m
jobs:
  eager:
    schedule: "0 3 * * *"
    command: ["false"]
    retries: 3
    retryDelay: 0s
`,
    );
    expect(config.jobs[0]).toMatchObject({ retries: 3, retryDelayMs: 0 });
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

describe('skips: rows | tally', () => {
  it('defaults to rows, is inherited from defaults:, and a wrong value is named at its line', () => {
    const config = parseConfig(
      file,
      `defaults:
  skips: tally
jobs:
  tallied:
    schedule: "* * * * * *"
    command: ["true"]
  rows:
    schedule: "* * * * * *"
    command: ["true"]
    skips: rows
`,
    );
    expect(config.jobs.map((j) => [j.name, j.skips])).toEqual([
      ['tallied', 'tally'],
      ['rows', 'rows'],
    ]);
    expect(
      parseConfig(file, 'jobs:\n  j:\n    schedule: "@daily"\n    command: ["true"]\n').jobs[0]!
        .skips,
    ).toBe('rows');
    let problems: string[] = [];
    try {
      parseConfig(
        file,
        `defaults:
  skips: counted
jobs:
  x:
    schedule: "0 3 * * *"
    command: ["true"]
    skips: [rows]
`,
      );
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems = err.problems.map((p) => `${p.line}:${p.path}: ${p.message}`).sort();
    }
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/^2:defaults\.skips: .*rows.*tally/);
    expect(problems[1]).toMatch(/^7:jobs\.x\.skips: .*rows.*tally/);
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

describe('fan-out and connections', () => {
  function problemsOf(yaml: string): string[] {
    try {
      parseConfig(file, yaml);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      return err.problems.map((p) => `${p.line}:${p.path}: ${p.message}`).sort();
    }
    return [];
  }

  it('reads workers and connections, with URLs from the environment', () => {
    process.env.BATON_TEST_SHOP_URL = 'mysql://shop:secret@db.example:3306/shop';
    try {
      writeFileSync(path.join(dir, 'job.mjs'), 'export default async () => {};\n');
      const config = parseConfig(
        file,
        `connections:
  shop: { urlFromEnv: BATON_TEST_SHOP_URL }
  ledger: { url: "mysql://root@127.0.0.1:3306/ledger" }
jobs:
  reward:
    schedule: "* * * * *"
    module: job.mjs
    workers: 3
    connection: shop
`,
      );
      expect(config.jobs[0]).toMatchObject({ workers: 3, connection: 'shop' });
      expect(config.connections).toEqual({
        shop: { kind: 'env', variable: 'BATON_TEST_SHOP_URL' },
        ledger: { kind: 'url', url: 'mysql://root@127.0.0.1:3306/ledger' },
      });
    } finally {
      delete process.env.BATON_TEST_SHOP_URL;
    }
  });

  it('refuses what cannot work, naming the place and never the URL', () => {
    writeFileSync(path.join(dir, 'job.mjs'), 'export default async () => {};\n');
    const problems = problemsOf(`connections:
  shop: { urlFromEnv: BATON_TEST_UNSET_URL }
  both: { url: "mysql://a:pw-123@h/d", urlFromEnv: X }
  broken: { url: "mysql://a:pw-456@h/d#frag" }
jobs:
  a:
    schedule: "* * * * *"
    module: job.mjs
    connection: nowhere
  b:
    schedule: "* * * * *"
    command: ["true"]
    connection: broken
  c:
    schedule: "* * * * *"
    command: ["true"]
    workers: 2
    overlap: queue
`);
    const expected = [
      /^9:jobs\.a\.connection: unknown connection "nowhere"/,
      /^13:jobs\.b\.connection: `connection` gives a module job its `ctx.db`; this job is a command$/,
      /^17:jobs\.c\.workers: a fan-out job \(`workers` > 1\) cannot use `overlap: queue`$/,
      /^2:connections\.shop\.urlFromEnv: environment variable BATON_TEST_UNSET_URL is not set$/,
      /^3:connections\.both: set exactly one of `url` and `urlFromEnv`$/,
      /^4:connections\.broken\.url: .*'#'/,
    ];
    expect(problems).toHaveLength(expected.length);
    for (const pattern of expected) {
      expect(
        problems.some((p) => pattern.test(p)),
        String(pattern),
      ).toBe(true);
    }
    expect(problems.join('\n')).not.toMatch(/pw-123|pw-456/);
    // The worker slot is stored in a TINYINT: the bound is part of the shape.
    expect(
      problemsOf(
        'jobs:\n  d:\n    schedule: "* * * * *"\n    command: ["true"]\n    workers: 101\n',
      ),
    ).toEqual(['5:jobs.d.workers: workers must be at most 100']);
  });
});
