import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-config-'));
mkdirSync(path.join(dir, 'jobs'));
writeFileSync(path.join(dir, 'jobs/refresh.ts'), 'export default async () => {};\n');
const file = path.join(dir, 'schedules.yaml');

function problems(yaml: string): string[] {
  try {
    parseConfig(file, yaml);
  } catch (err) {
    if (err instanceof ConfigError)
      return err.problems.map((p) => `${p.line}:${p.path}: ${p.message}`);
    throw err;
  }
  return [];
}

describe('parseConfig', () => {
  it('reads the example from the issue, with defaults applied', () => {
    const config = parseConfig(
      file,
      `namespace: prod
defaults:
  timezone: Asia/Seoul
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ["/opt/batch/settle.sh", "--day", "yesterday"]
    description: nightly provider settlement
  refresh:
    schedule: "*/5 * * * *"
    timezone: UTC
    module: jobs/refresh.ts
    env: { REGION: kr, RETRIES: 3 }
  cleanup:
    schedule: "@hourly"
    command: "find /tmp/batch -mtime +7 -delete"
    shell: true
    enabled: false
`,
    );
    expect(config.namespace).toBe('prod');
    expect(config.jobs.map((j) => j.name)).toEqual(['settle', 'refresh', 'cleanup']);
    const [settle, refresh, cleanup] = config.jobs;
    expect(settle).toMatchObject({
      timezone: 'Asia/Seoul',
      enabled: true,
      cwd: dir,
      description: 'nightly provider settlement',
      target: { kind: 'command', argv: ['/opt/batch/settle.sh', '--day', 'yesterday'] },
    });
    expect(refresh).toMatchObject({
      timezone: 'UTC',
      target: { kind: 'module', path: path.join(dir, 'jobs/refresh.ts') },
      env: { REGION: 'kr', RETRIES: '3' },
    });
    expect(cleanup).toMatchObject({
      enabled: false,
      target: { kind: 'shell', script: 'find /tmp/batch -mtime +7 -delete' },
    });
  });

  it('defaults the namespace and the time zone', () => {
    const config = parseConfig(
      file,
      'jobs:\n  a:\n    schedule: "* * * * * *"\n    command: ["true"]\n',
    );
    expect(config.namespace).toBe('default');
    expect(config.jobs[0]!.timezone).toBe('UTC');
  });

  it('refuses schedule, command and module in defaults', () => {
    expect(
      problems(
        'defaults:\n  schedule: "* * * * *"\njobs:\n  a:\n    schedule: "* * * * *"\n    command: ["true"]\n',
      ),
    ).toEqual(['2:defaults.schedule: unknown key "schedule"']);
  });

  it('refuses an empty file, an empty job list and a list command with shell: true', () => {
    expect(problems('')).toEqual(['undefined:: expected a mapping with a `jobs:` key']);
    expect(problems('jobs: {}\n')).toEqual(['1:jobs: no jobs defined']);
    expect(
      problems('jobs:\n  a:\n    schedule: "* * * * *"\n    command: ["ls"]\n    shell: true\n'),
    ).toEqual(['5:jobs.a.shell: with `shell: true` give `command` as one string, not a list']);
  });

  it('refuses a missing working directory and a namespace with unsafe characters', () => {
    expect(
      problems(
        'jobs:\n  a:\n    schedule: "* * * * *"\n    command: ["ls"]\n    cwd: nowhere\n',
      )[0],
    ).toMatch(/^5:jobs\.a\.cwd: directory not found/);
    expect(
      problems(
        'namespace: "prod env"\njobs:\n  a:\n    schedule: "* * * * *"\n    command: ["ls"]\n',
      )[0],
    ).toMatch(/^1:namespace: namespace may contain only/);
  });

  describe('retention:', () => {
    const JOB = 'jobs:\n  a:\n    schedule: "@daily"\n    command: ["true"]\n';
    const DAY = 86_400_000;

    it('is kept forever without the key; one duration covers runs and skips', () => {
      expect(parseConfig(file, JOB).retention).toBeNull();
      expect(parseConfig(file, `${JOB}retention: 30d\n`).retention).toEqual({
        runsMs: 30 * DAY,
        skipsMs: 30 * DAY,
      });
    });

    it('takes runs and skips apart; a missing one is kept forever', () => {
      expect(parseConfig(file, `${JOB}retention: { runs: 90d, skips: 7d }\n`).retention).toEqual({
        runsMs: 90 * DAY,
        skipsMs: 7 * DAY,
      });
      expect(parseConfig(file, `${JOB}retention:\n  skips: 36h\n`).retention).toEqual({
        runsMs: null,
        skipsMs: 36 * 3_600_000,
      });
    });

    it('refuses what is not a duration, with the line', () => {
      expect(problems(`${JOB}retention: forever\n`)).toEqual([
        '5:retention: expected a duration, got "forever": write a number with a unit: 500ms, 90s, 30m, 2h, 1d (or 1h30m)',
      ]);
      expect(problems(`${JOB}retention: 30\n`)[0]).toMatch(
        /^5:retention: expected a duration, got 30:/,
      );
      expect(problems(`${JOB}retention:\n  runs: 90d\n  skips: a week\n`)[0]).toMatch(
        /^7:retention\.skips: expected a duration, got "a week"/,
      );
      expect(problems(`${JOB}retention:\n  runs: 90d\n  logs: 7d\n`)).toEqual([
        '7:retention.logs: unknown key "logs"',
      ]);
      expect(problems(`${JOB}retention: {}\n`)).toEqual([
        '5:retention: give `runs`, `skips`, `output` or some (durations)',
      ]);
    });

    it('refuses less than a day, and less than a catchUp window', () => {
      expect(problems(`${JOB}retention: 12h\n`)).toEqual([
        '5:retention: 12h is shorter than 1d: baton keeps at least a day of history (what `explain` and the recovery after an outage read)',
      ]);
      const weekly =
        'jobs:\n  w:\n    schedule: "@weekly"\n    command: ["true"]\n    catchUp: 7d\n';
      expect(problems(`${weekly}retention:\n  runs: 30d\n  skips: 2d\n`)).toEqual([
        '8:retention.skips: 2d is shorter than the catchUp window of job w (7d): after an outage its runner would find a pruned fire unrun and run it again',
      ]);
    });
  });
  describe('catchUp:', () => {
    const job = (extra: string) =>
      `jobs:\n  a:\n    schedule: "@hourly"\n    command: ["true"]\n${extra}`;
    const read = (extra: string) => {
      const [j] = parseConfig(file, job(extra)).jobs;
      return { ms: j!.catchUpMs, fires: j!.catchUpFires };
    };

    it('a duration is the window of the latest fire; the object form chooses all or latest', () => {
      expect(read('')).toEqual({ ms: null, fires: 'latest' });
      expect(read('    catchUp: 10m\n')).toEqual({ ms: 600_000, fires: 'latest' });
      expect(read('    catchUp: {window: 6h, fires: all}\n')).toEqual({
        ms: 21_600_000,
        fires: 'all',
      });
      expect(read('    catchUp:\n      window: 2h\n')).toEqual({ ms: 7_200_000, fires: 'latest' });
      const inherited = parseConfig(
        file,
        `defaults:\n  catchUp: {window: 1h, fires: all}\n${job('')}`,
      );
      expect(inherited.jobs[0]!.catchUpFires).toBe('all');
    });

    it('names the mistake in the form written, with its line', () => {
      expect(problems(job('    catchUp: soon\n'))[0]).toMatch(
        /^5:jobs\.a\.catchUp: expected a duration, got "soon": .*or \{window: <duration>, fires: latest \| all\}$/,
      );
      expect(problems(job('    catchUp:\n      window: 6h\n      fires: every\n'))[0]).toMatch(
        /^7:jobs\.a\.catchUp\.fires: /,
      );
      expect(problems(job('    catchUp:\n      window: 6h\n      fire: all\n'))).toEqual([
        '7:jobs.a.catchUp.fire: unknown key "fire"',
      ]);
      expect(problems(job('    catchUp:\n      window: 6s6\n'))[0]).toMatch(
        /^6:jobs\.a\.catchUp\.window: expected a duration/,
      );
    });
  });
  describe('durations are finite and bounded', () => {
    const huge = `${'9'.repeat(400)}d`;
    const job = (extra: string) =>
      `jobs:\n  a:\n    schedule: "0 3 * * *"\n    command: ["true"]\n${extra}`;

    it('refuses a number of days too long for a double (Infinity) wherever a duration is read', () => {
      // Read as Infinity, each was taken: `within Infinityd`, a timeout that never fires.
      const bounded = /must be at most 3650d, got "9{19}…9{8}d": no duration in baton is longer/;
      expect(problems(job(`    expect: ${huge}\n`))).toEqual([
        expect.stringMatching(new RegExp(`^5:jobs\\.a\\.expect: ${bounded.source}`)),
      ]);
      expect(problems(job(`    catchUp: ${huge}\n`))[0]).toMatch(
        /^5:jobs\.a\.catchUp: must be at most 3650d/,
      );
      expect(problems(job(`    catchUp: {window: ${huge}}\n`))[0]).toMatch(
        /^5:jobs\.a\.catchUp\.window: must be at most 3650d/,
      );
      expect(problems(`retention: ${huge}\n${job('')}`)[0]).toMatch(
        /^1:retention: must be at most 3650d/,
      );
      expect(problems(job(`    jitter: ${huge}\n`))[0]).toMatch(
        /^5:jobs\.a\.jitter: must be at most 3650d/,
      );
      expect(problems(job(`    timeout: ${huge}\n`))[0]).toMatch(
        /^5:jobs\.a\.timeout: must be at most 24d/,
      );
    });

    it("a job's timeout and retryDelay are at most 24d: a longer Node.js timer fires at once", () => {
      expect(problems(job('    timeout: 30d\n    retryDelay: 25d\n'))).toEqual([
        '5:jobs.a.timeout: must be at most 24d, got "30d": a timer\'s longest in Node.js is about 24.8 days',
        '6:jobs.a.retryDelay: must be at most 24d, got "25d": a timer\'s longest in Node.js is about 24.8 days',
      ]);
      expect(parseConfig(file, job('    timeout: 24d\n')).jobs[0]!.timeoutMs).toBe(24 * 86_400_000);
    });

    it('after.within: more than 0, at most 366d, and never Infinity', () => {
      const child = (within: string) =>
        `${job('')}  r:\n    command: ["true"]\n    after: {jobs: a, within: ${within}}\n`;
      expect(problems(child('0s'))).toEqual([
        '7:jobs.r.after.within: must be more than 0s, got "0s"',
      ]);
      expect(problems(child('5000000d'))).toEqual([
        '7:jobs.r.after.within: must be at most 366d, got "5000000d": a child waits for its ' +
          "parents' verdicts of an instant at most a year",
      ]);
      expect(problems(child(huge))[0]).toMatch(/^7:jobs\.r\.after\.within: must be at most 366d/);
      expect(parseConfig(file, child('366d')).jobs[1]!.after!.withinMs).toBe(366 * 86_400_000);
    });
  });

  describe('jitter:', () => {
    const job = (extra: string, schedule = '*/5 * * * *') =>
      `jobs:\n  a:\n    schedule: "${schedule}"\n    command: ["true"]\n${extra}`;

    it('is 0 without the key; read on a job or inherited from defaults, 0s turns it off', () => {
      expect(parseConfig(file, job('')).jobs[0]!.jitterMs).toBe(0);
      expect(parseConfig(file, job('    jitter: 30s\n')).jobs[0]!.jitterMs).toBe(30_000);
      const inherited = parseConfig(
        file,
        `defaults:\n  jitter: 1m\n${job('')}  b:\n    schedule: "@hourly"\n    command: ["true"]\n    jitter: 0s\n`,
      );
      expect(inherited.jobs.map((j) => j.jitterMs)).toEqual([60_000, 0]);
    });

    it('refuses what is not a duration', () => {
      expect(problems(job('    jitter: 30\n'))[0]).toMatch(
        /^5:jobs\.a\.jitter: expected a duration, got 30:/,
      );
    });

    it('refuses a jitter not shorter than the shortest period, with the line', () => {
      expect(problems(job('    jitter: 5m\n'))).toEqual([
        "5:jobs.a.jitter: jitter 5m is not shorter than the schedule's shortest period (5m between fires): write less than 5m",
      ]);
      // The gaps of 9:00 and 10:00 are 1h and 23h: the shortest one is the bound.
      expect(problems(job('    jitter: 2h\n', '0 9,10 * * *'))[0]).toMatch(
        /^5:jobs\.a\.jitter: jitter 2h is not shorter than the schedule's shortest period \(1h between fires\)/,
      );
      expect(problems(job('    jitter: 59m\n', '0 9,10 * * *'))).toEqual([]);
      expect(problems(job('    jitter: 2s\n', '*/3 * * * * *'))).toEqual([]);
    });

    it('names defaults.jitter for a job that inherits a jitter too long for it', () => {
      expect(
        problems(
          `defaults:\n  jitter: 10m\n${job('')}  b:\n    schedule: "@hourly"\n    command: ["true"]\n`,
        ),
      ).toEqual([
        "2:defaults.jitter: jitter 10m is not shorter than the schedule's shortest period (5m between fires): write less than 5m (inherited by jobs.a)",
      ]);
    });
  });
});

describe('names that every object has (constructor, toString, __proto__)', () => {
  it('are unknown pools and unknown connections, not members of Object', () => {
    writeFileSync(path.join(dir, 'job.mjs'), 'export default async () => {};\n');
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(
        problems(
          `pools:\n  db: {slots: 1}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n` +
            `    module: job.mjs\n    pool: "${name}"\n    connection: "${name}"\n`,
        ),
      ).toEqual([
        expect.stringMatching(new RegExp(`jobs\\.settle\\.pool: unknown pool "${name}"`)),
        expect.stringMatching(
          new RegExp(`jobs\\.settle\\.connection: unknown connection "${name}"`),
        ),
      ]);
    }
  });
});

describe('schedule: a list, an interval, instants, bounds (docs/schedules.md)', () => {
  const job = (body: string) => `jobs:\n  settle:\n    command: ["true"]\n${body}`;
  const scheduleOf = (body: string) => parseConfig(file, job(body)).jobs[0]!.schedule;

  it('is written out as one line of text, the job’s timing everywhere', () => {
    expect(scheduleOf('    schedule: ["0 3 * * 1-5", "0 9 * * 6"]\n')).toBe(
      '0 3 * * 1-5 | 0 9 * * 6',
    );
    expect(scheduleOf('    schedule: {every: 90m, anchor: 2027-01-01T00:00Z}\n')).toBe(
      '@every 90m anchor 2027-01-01T00:00Z',
    );
    expect(
      scheduleOf('    schedule: {at: [2027-01-01T03:00Z, "2027-01-02T03:00:00+09:00"]}\n'),
    ).toBe('@at 2027-01-01T03:00Z, 2027-01-02T03:00:00+09:00');
    expect(
      scheduleOf(
        '    schedule: ["0 12 * * *", {every: 2h}]\n    from: 2027-01-01\n    until: 2027-06-30T00:00Z\n    maxFires: 10\n',
      ),
    ).toBe('0 12 * * * | @every 2h; from 2027-01-01; until 2027-06-30T00:00Z; max 10');
    // The text itself is a schedule too: it is what a runner reads back from baton_timings.
    expect(scheduleOf('    schedule: "@every 90m | 0 12 * * *; from 2027-01-01"\n')).toBe(
      '@every 90m | 0 12 * * *; from 2027-01-01',
    );
  });

  it('refuses what it cannot read, at the line that says it', () => {
    expect(problems(job('    schedule: {every: 90}\n'))).toEqual([
      '4:jobs.settle.schedule: "@every 90": the period must be whole seconds, at least 1s (90s, 30m, 2h, 1d, 1h30m)',
    ]);
    expect(problems(job('    schedule: "0 3 * * *"\n    maxFires: 3\n'))[0]).toMatch(
      /^4:jobs\.settle\.schedule: .*max needs from/,
    );
    expect(problems(job('    schedule: ["0 3 * * *", "0 0 31 2 *"]\n'))).toEqual([
      '4:jobs.settle.schedule: "0 0 31 2 *" never fires',
    ]);
    expect(problems(job('    schedule: {at: "--help"}\n'))[0]).toMatch(
      /jobs\.settle\.schedule: @at "--help" is not an instant/,
    );
    expect(problems(job('    schedule: {every: 1h, cron: "0 3 * * *"}\n'))[0]).toMatch(
      /^4:jobs\.settle\.schedule/,
    );
    expect(
      problems(
        'jobs:\n  a:\n    after: {jobs: [b]}\n    from: 2027-01-01\n    command: ["true"]\n  b:\n    schedule: "@daily"\n    command: ["true"]\n',
      ),
    ).toContain("4:jobs.a.from: `from` bounds a job's own schedule; this job has none");
  });
});

describe('schedule entries and bounds keep to one thing each', () => {
  const job = (body: string) => `jobs:\n  settle:\n    command: ["true"]\n${body}`;
  it('refuses a separator of the line inside an entry, a field or a bound', () => {
    for (const body of [
      '    schedule: ["0 4 * * *", "0 3 * * *; until 2020-01-01"]\n',
      '    schedule: {every: "1h; until 2020-01-01"}\n',
      '    schedule: ["0 4 * * *", "0 3 * * * | 0 5 * * *"]\n',
      '    schedule: "@daily"\n    from: "2027-01-01; max 3"\n',
      '    schedule: {at: ["2027-01-01T03:00Z, 2027-01-02T03:00Z"]}\n',
    ]) {
      expect(problems(job(body)).length, body).toBeGreaterThan(0);
    }
    expect(
      problems(job('    schedule: "@daily"\n    maxFires: 1001\n    from: 2027-01-01\n'))[0],
    ).toMatch(/jobs\.settle\.maxFires/);
  });
});
