/**
 * Schedules created at run time (docs/library-mode.md): what `scheduler.schedules.upsert` refuses
 * and how it says it (every problem of a call at once, each naming its field, nothing written),
 * the key rule, the subjects' names, and when the subjects fire (daemon/dynamic-fires.ts: groups
 * of one expression, changed one subject at a time).
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { DynamicFires } from '../../src/daemon/dynamic-fires.js';
import { subjectDefinition } from '../../src/daemon/dynamic-schedules.js';
import { BatonError, ConfigError } from '../../src/errors.js';
import { createScheduler } from '../../src/index.js';
import { codeConfig, type JobOptions } from '../../src/library/job-options.js';
import { checkScheduleInput, jobProblem } from '../../src/library/schedule-input.js';
import { parseSchedule } from '../../src/schedule/cron.js';
import {
  jobOfSubject,
  keyMaxFor,
  keyProblem,
  splitSubject,
  subjectName,
} from '../../src/schedule-keys.js';
import { paramsOf, storedParams } from '../../src/store/schedules.js';

const definitions = codeConfig(
  { namespace: 'n' },
  new Map<string, JobOptions>([
    ['report', { timezone: 'Asia/Seoul', timeout: '5m' }],
    ['fast', { prefer: { hosts: ['a'], lead: '10s' } }],
    ['own', { schedule: '0 3 * * *' }],
  ]),
).jobs;
const job = (name: string) => definitions.find((j) => j.name === name)!;

/** The problems of one upsert, as `path: message`; [] when accepted. */
function refusals(key: unknown, input: unknown, name = 'report'): string[] {
  try {
    checkScheduleInput('schedules.upsert', name, key, input, job(name));
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.problems.map((p) => `${p.file}: ${p.path}: ${p.message}`);
  }
}

const KEY_RULE =
  "may contain only ASCII letters, digits, '_', '.', '@' and '-', and must start with a letter or digit";

describe('a schedule key', () => {
  it('refuses what looks like an option, a path, unicode, nothing, or more than the job column holds', () => {
    expect(keyProblem('report', '--all')).toBe(`"--all" ${KEY_RULE}`);
    expect(keyProblem('report', '../x')).toBe(`"../x" ${KEY_RULE}`);
    expect(keyProblem('report', 'tenant-é')).toBe(`"tenant-é" ${KEY_RULE}`);
    expect(keyProblem('report', 'a b')).toBe(`"a b" ${KEY_RULE}`);
    expect(keyProblem('report', 'a:b')).toBe(`"a:b" ${KEY_RULE}`);
    expect(keyProblem('report', '')).toBe('must not be empty');
    expect(keyProblem('report', 42)).toBe('expected a string, got number');
    expect(keyProblem('report', 'x'.repeat(300))).toBe(
      'is 300 characters long; a key of report may have at most 121 (the job\'s name, ":" and ' +
        "the key fit the history's job column, 128 characters)",
    );
    // A long key's message does not repeat it whole.
    expect(keyProblem('report', `-${'x'.repeat(100)}`)).toBe(`"-${'x'.repeat(39)}…" ${KEY_RULE}`);
  });

  it('takes letters, digits, _ . @ - and exactly what fits the column', () => {
    for (const key of ['t1', 'Tenant_42', 'acme.eu-west', 'ops@acme.com', '0', 'a..b']) {
      expect(keyProblem('report', key)).toBeNull();
    }
    expect(keyMaxFor('report')).toBe(121);
    expect(keyProblem('report', 'k'.repeat(121))).toBeNull();
    expect(subjectName('report', 'k'.repeat(121))).toHaveLength(128);
    expect(keyProblem('report', 'k'.repeat(122))).toMatch(/^is 122 characters long/);
  });

  it('names a subject <job>:<key>, split at the first colon (a job name has none)', () => {
    expect(subjectName('report', 'acme')).toBe('report:acme');
    expect(splitSubject('report:acme')).toEqual({ job: 'report', key: 'acme' });
    expect(splitSubject('report')).toBeNull();
    expect(jobOfSubject('report:acme')).toBe('report');
    expect(jobOfSubject('report')).toBe('report');
  });
});

describe('scheduler.schedules.upsert input', () => {
  it('accepts a definition, the time zone defaulting to the job’s', () => {
    expect(
      checkScheduleInput(
        'schedules.upsert',
        'report',
        't1',
        { schedule: '0 3 * * *' },
        job('report'),
      ),
    ).toEqual({ schedule: '0 3 * * *', timezone: 'Asia/Seoul', params: {} });
    expect(
      checkScheduleInput(
        'schedules.upsert',
        'report',
        't1',
        { schedule: '*/5 * * * * *', timezone: 'UTC', params: { TENANT: 't1', _x: '' } },
        job('report'),
      ),
    ).toEqual({ schedule: '*/5 * * * * *', timezone: 'UTC', params: { TENANT: 't1', _x: '' } });
  });

  it('refuses each bad field with its own message, all at once', () => {
    expect(
      refusals('--all', {
        schedule: 'every day',
        timezone: 'Mars/Olympus',
        params: { '1st': 'a', BATON_JOB: 'b', n: 3 },
        extra: true,
      }),
    ).toEqual([
      `scheduler: schedules.upsert.key: "--all" ${KEY_RULE}`,
      'scheduler: schedules.upsert.extra: unknown option (options: schedule, timezone, params)',
      'scheduler: schedules.upsert.timezone: unknown time zone "Mars/Olympus" (use an IANA name such as Asia/Seoul or UTC)',
      expect.stringMatching(
        /^scheduler: schedules\.upsert\.schedule: invalid cron expression "every day": /,
      ),
      'scheduler: schedules.upsert.params: "1st": a name has letters, digits and _, and does not start with a digit',
      'scheduler: schedules.upsert.params: "BATON_JOB": BATON_* names are baton\'s own (the fire\'s)',
      'scheduler: schedules.upsert.params: "n": expected a string value, got number 3',
    ]);
  });

  it('refuses a missing or malformed schedule, a wrong shape, and params too large to record', () => {
    expect(refusals('t1', {})).toEqual([
      'scheduler: schedules.upsert.schedule: required: a cron expression',
    ]);
    expect(refusals('t1', { schedule: 5 })).toEqual([
      'scheduler: schedules.upsert.schedule: expected a string, got number 5',
    ]);
    expect(refusals('t1', { schedule: '0 0 31 2 *' })).toEqual([
      'scheduler: schedules.upsert.schedule: "0 0 31 2 *" never fires',
    ]);
    expect(refusals('t1', { schedule: `0 ${'1,'.repeat(200)}1 * * *` })).toEqual([
      'scheduler: schedules.upsert.schedule: is 409 characters long, more than 255',
    ]);
    expect(refusals('t1', '0 3 * * *')).toEqual([
      'scheduler: schedules.upsert: expected an object {schedule, timezone?, params?}, got "0 3 * * *"',
    ]);
    expect(refusals('t1', null)).toEqual([
      'scheduler: schedules.upsert: expected an object {schedule, timezone?, params?}, got null',
    ]);
    expect(refusals('t1', { schedule: '0 3 * * *', params: ['a'] })).toEqual([
      'scheduler: schedules.upsert.params: expected an object of strings (name → value), got an array',
    ]);
    expect(refusals('t1', { schedule: '0 3 * * *', timezone: 'x'.repeat(65) })).toEqual([
      'scheduler: schedules.upsert.timezone: is 65 characters long, more than 64',
    ]);
    // The limit of `baton run --env`, as the run's row records the params.
    expect(refusals('t1', { schedule: '0 3 * * *', params: { BIG: 'x'.repeat(33_000) } })).toEqual([
      'scheduler: schedules.upsert.params: 33028 bytes as recorded, more than 32768 (32 KiB): keep large values where the handler reads them (a table, a file), and pass their name',
    ]);
  });

  it("holds a schedule to the job's prefer lead, as the file does", () => {
    expect(refusals('t1', { schedule: '*/5 * * * * *' }, 'fast')).toEqual([
      "scheduler: schedules.upsert.schedule: the lead of fast's `prefer` 10s is not shorter than the schedule's shortest period (5s between fires): write less than 5s",
    ]);
    expect(refusals('t1', { schedule: '*/30 * * * * *' }, 'fast')).toEqual([]);
  });

  it('names a job that cannot have schedules', () => {
    expect(jobProblem('nope', null, ['report', 'fast'])).toBe(
      'unknown job "nope": define it with scheduler.job(name, options, handler) first (jobs: report, fast)',
    );
    expect(jobProblem(7, null, [])).toBe("expected a job's name, got number");
    const fileJob = { ...job('own'), target: { kind: 'command' as const, argv: ['true'] } };
    expect(jobProblem('own', fileJob, ['report'])).toBe(
      'own is a job of a schedules file; schedules created at run time are for handler jobs (scheduler.job)',
    );
    const child = {
      ...job('report'),
      after: { jobs: ['own'], on: 'success' as const, withinMs: 1 },
    };
    expect(jobProblem('report', child, ['report'])).toBe(
      'report runs after its parents (`after:`): it cannot have schedules of its own',
    );
    expect(jobProblem('report', job('report'), ['report'])).toBeNull();
  });

  it('is refused before anything is written, and before start() only once the input is good', async () => {
    const scheduler = createScheduler({
      databaseUrl: 'mysql://root@127.0.0.1:1/never',
      host: 'app-1',
      namespace: 'n',
      log: pino({ level: 'silent' }),
    });
    scheduler.job('report', {}, () => {});
    const thrown = async (p: Promise<unknown>) =>
      p.then(
        () => null,
        (err: unknown) => err,
      );
    const bad = await thrown(scheduler.schedules.upsert('report', '../x', { schedule: 'x' }));
    expect(bad).toBeInstanceOf(ConfigError);
    expect((bad as Error).message).toBe(
      'invalid configuration (2 problems):\n' +
        `  scheduler: schedules.upsert.key: "../x" ${KEY_RULE}\n` +
        '  scheduler: schedules.upsert.schedule: invalid cron expression "x": invalid configuration format (\'x\'), exactly five, six, or seven space separated parts are required.',
    );
    const unknown = await thrown(
      scheduler.schedules.upsert('other', 't1', { schedule: '* * * * *' }),
    );
    expect((unknown as Error).message).toContain(
      'scheduler: schedules.upsert.job: unknown job "other": define it with scheduler.job',
    );
    const early = await thrown(
      scheduler.schedules.upsert('report', 't1', { schedule: '* * * * *' }),
    );
    expect(early).toBeInstanceOf(BatonError);
    expect(early).toMatchObject({
      code: 'SCHEDULER_NOT_STARTED',
      message:
        'scheduler.schedules.upsert(): start the scheduler first (await scheduler.start()): the ' +
        'schedules live in the database',
    });
    const removeBad = await thrown(scheduler.schedules.remove('report', '--all'));
    expect((removeBad as Error).message).toContain(`schedules.remove.key: "--all" ${KEY_RULE}`);
    const listBad = await thrown(scheduler.schedules.list('../etc'));
    expect((listBad as Error).message).toContain(
      `schedules.list.job: "../etc" is not a job's name`,
    );
  });
});

describe('the stored params', () => {
  it('are stored with their names sorted, so that equal params are equal text', () => {
    expect(storedParams({ b: '2', a: '1' })).toBe('{"a":"1","b":"2"}');
    expect(storedParams({})).toBeNull();
    expect(paramsOf('{"a":"1"}')).toEqual({ a: '1' });
    expect(paramsOf(null)).toEqual({});
    for (const text of ['[1]', '{"a":1}', 'nope', 'null']) expect(paramsOf(text)).toBeNull();
  });
});

describe('a subject’s definition', () => {
  it("is its job's with the schedule's timing, without parents or jitter", () => {
    const row = {
      job: 'report',
      key: 't1',
      schedule: '*/2 * * * * *',
      timezone: 'UTC',
      params: {},
      paramsText: null,
      revision: 1,
      createdAt: new Date(),
      updatedAt: new Date(),
      removedAt: null,
    };
    const base = { ...job('report'), jitterMs: 30_000 };
    const subject = subjectDefinition(base, row);
    expect(subject).toMatchObject({
      name: 'report:t1',
      schedule: '*/2 * * * * *',
      timezone: 'UTC',
      jitterMs: 0,
      timeoutMs: 300_000,
      target: { kind: 'handler' },
    });
    expect(subject.after).toBeUndefined();
  });
});

describe('when the subjects fire (DynamicFires)', () => {
  const at = (iso: string) => new Date(iso);
  const everyTwo = parseSchedule('*/2 * * * * *', 'UTC');
  const everyFive = parseSchedule('*/5 * * * * *', 'UTC');

  it('fires every subject of a group at its instants, from the next one after it joined', () => {
    const fires = new DynamicFires();
    fires.set('report:a', everyTwo, at('2026-01-01T00:00:00.500Z'));
    fires.set('report:b', everyTwo, at('2026-01-01T00:00:01.000Z'));
    expect(fires.size).toBe(2);
    expect(fires.sleepMs(at('2026-01-01T00:00:01.000Z'))).toBe(1_000);
    expect(fires.take(at('2026-01-01T00:00:01.900Z')).due).toEqual([]);
    const wake = fires.take(at('2026-01-01T00:00:02.010Z'));
    expect(wake.due.map((f) => [f.job, f.scheduledAt.toISOString(), f.lateMs])).toEqual([
      ['report:a', '2026-01-01T00:00:02.000Z', 10],
      ['report:b', '2026-01-01T00:00:02.000Z', 10],
    ]);
    expect(fires.nextFire('report:b')).toEqual(at('2026-01-01T00:00:04.000Z'));
  });

  it('moves a subject to its new schedule, and forgets a removed one', () => {
    const fires = new DynamicFires();
    const now = at('2026-01-01T00:00:00.000Z');
    fires.set('report:a', everyTwo, now);
    fires.set('report:b', everyTwo, now);
    fires.set('report:a', everyFive, at('2026-01-01T00:00:01.000Z'));
    fires.delete('report:b');
    fires.delete('report:b');
    const due = (iso: string) => fires.take(at(iso)).due.map((f) => f.job);
    expect(due('2026-01-01T00:00:02.000Z')).toEqual([]);
    expect(due('2026-01-01T00:00:05.000Z')).toEqual(['report:a']);
    fires.delete('report:a');
    expect(fires.size).toBe(0);
    expect(fires.sleepMs(at('2026-01-01T00:00:05.000Z'))).toBe(30_000);
  });

  it('hands on the instants between a recent change and its application, late, and no others', () => {
    const fires = new DynamicFires();
    const now = at('2026-01-01T00:00:03.400Z');
    const everySecond = parseSchedule('* * * * * *', 'UTC');
    // Written at 00:00:01.500, read here 1.9 s later: its instant 00:00:02 is due now.
    fires.set('report:a', everyTwo, now, at('2026-01-01T00:00:01.500Z'));
    // Written 6 s ago (a row read at a start): from its next instant only.
    fires.set('report:b', everyTwo, now, at('2025-12-31T23:59:57.400Z'));
    // Every second, written 3.4 s ago: its three instants since.
    fires.set('other:c', everySecond, now, at('2026-01-01T00:00:00.000Z'));
    // Removed before the wake: none of its instants.
    fires.set('other:d', everySecond, now, at('2026-01-01T00:00:00.000Z'));
    fires.delete('other:d');
    expect(fires.sleepMs(now)).toBe(0);
    const wake = fires.take(now);
    expect(wake.due.map((f) => [f.job, f.scheduledAt.toISOString(), f.lateMs])).toEqual([
      ['other:c', '2026-01-01T00:00:01.000Z', 2_400],
      ['report:a', '2026-01-01T00:00:02.000Z', 1_400],
      ['other:c', '2026-01-01T00:00:02.000Z', 1_400],
      ['other:c', '2026-01-01T00:00:03.000Z', 400],
    ]);
    expect(fires.take(now).due).toEqual([]);
    expect(fires.nextFire('report:b')).toEqual(at('2026-01-01T00:00:04.000Z'));
    // A change of params only (the same timing): nothing again.
    fires.set('report:a', everyTwo, now, at('2026-01-01T00:00:01.500Z'));
    expect(fires.take(now).due).toEqual([]);
  });

  it('reports fires missed by a long stall once per job, not once per key', () => {
    const fires = new DynamicFires();
    const now = at('2026-01-01T00:00:00.000Z');
    for (const key of ['a', 'b', 'c']) fires.set(`report:${key}`, everyTwo, now);
    fires.set('other:a', everyTwo, now);
    const wake = fires.take(at('2026-01-01T00:02:00.000Z'));
    expect(wake.missed.map((m) => m.job)).toEqual(['report:*', 'other:*']);
    // The fires within the tolerance still run, each subject's.
    expect(new Set(wake.due.map((f) => f.job))).toEqual(
      new Set(['report:a', 'report:b', 'report:c', 'other:a']),
    );
  });
});
