/**
 * `baton status` as a pure function (src/fleet/status.ts) and the dead-man's switch
 * (src/schedule/dead-man.ts): from registry rows, running rows, pauses, per-job history facts and a
 * database instant, the report and exactly the warnings it must carry — runner states and their
 * edges (alive / stopped / gone / stale), clock offsets and their sign, schedule drift (between
 * runners, and between the local schedules file and the runners, including a job of the file no
 * runner loaded), both shapes of the registry's `schedule` column (`{job: fp}` and `{job: {fp,
 * since}}`), the dead-man's rules (own `expect:`, two fires plus a grace, never-ran jobs judged
 * from when a runner loaded them — not from the runner's start —, paused or disabled jobs), next
 * fires, and the JSON shape. Also the schedule's latest fire, `baton explain`'s default fire (the
 * rest of explain is in explain.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { scheduleFingerprint } from '../../src/config/fingerprint.js';
import { parseConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import {
  defaultGraceMs,
  expectation,
  lastFireAtOrBefore,
  MIN_GRACE_MS,
} from '../../src/schedule/dead-man.js';
import { driftWarnings } from '../../src/fleet/drift.js';
import {
  buildStatus,
  STALE_RUNNER_MS,
  statusToJson,
  type StatusInput,
} from '../../src/fleet/status.js';
import { parseSchedule } from '../../src/schedule/cron.js';
import { upcomingAnchor, upcomingInstants } from '../../src/schedule/upcoming.js';
import { emptySchedule, loadSchedule, registryView } from '../../src/daemon/loaded-schedule.js';
import type { JobHistoryFacts, RunningRun } from '../../src/store/fleet-reads.js';
import type { Pause } from '../../src/store/pauses.js';
import { loadedJobs, type RunnerRecord } from '../../src/store/runners.js';

const NOW = new Date('2027-03-10T12:00:00.000Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const at = (iso: string) => new Date(iso);

/**
 * A registry row as store/runners.ts reads it; `schedule` is its `schedule` column, decoded as
 * `toRunnerRecord` decodes it.
 */
function runner(
  host: string,
  { schedule = { tick: 'aaaaaaaaaaaaaaaa' }, ...o }: RunnerFields = {},
): RunnerRecord {
  const row = {
    namespace: 'ns',
    host,
    pid: 100,
    version: '0.1.0',
    startedAt: ago(3_600_000),
    lastSeenAt: ago(1_000),
    stoppedAt: null,
    clockOffsetMs: 3,
    lockConnectionId: 7,
    ...o,
  };
  return { ...row, jobs: loadedJobs({ schedule, startedAt: row.startedAt }) };
}

type RunnerFields = Partial<Omit<RunnerRecord, 'jobs'>> & { schedule?: Loaded };

const config = (yaml: string) => parseConfig('/etc/baton/schedules.yaml', yaml);

/**
 * The registry's `schedule` column: `{job: fp}`, or in the shape runners that say since when
 * write, `{job: {fp, since}}`. Typed loosely on purpose: the decoder accepts anything.
 */
type Loaded = Readonly<Record<string, unknown>>;

/** What a runner that loaded `file` says it loaded: the real fingerprints, old shape. */
const printsOf = (file: Config): Loaded => scheduleFingerprint(file);

/** The same in the new shape, every job loaded at `since`. */
const loadedAt = (file: Config, since: Date): Loaded =>
  Object.fromEntries(
    Object.entries(scheduleFingerprint(file)).map(([job, fp]) => [
      job,
      { fp, since: since.toISOString() },
    ]),
  );

const TICK = config(`
namespace: ns
jobs:
  tick:
    schedule: "*/10 * * * *"
    command: ["true"]
`);

/** A success a minute ago for every named job: no dead-man warnings unless a test wants them. */
function fresh(...jobs: string[]): Map<string, JobHistoryFacts> {
  return new Map(
    jobs.map((j) => [j, { lastSuccessAt: ago(60_000), firstSeenAt: ago(86_400_000) }]),
  );
}

function status(o: Partial<StatusInput>) {
  return buildStatus({
    now: NOW,
    namespace: 'ns',
    runners: [],
    running: [],
    config: null,
    pauses: [],
    history: new Map(),
    ...o,
  });
}

describe('runner states', () => {
  it('alive within --gone-after, gone after it, stopped when stopped_at is set, stale rows left out', () => {
    const report = status({
      runners: [
        runner('fresh', { lastSeenAt: ago(15_000) }),
        runner('late', { lastSeenAt: ago(15_001) }),
        runner('drained', { lastSeenAt: ago(60_000), stoppedAt: ago(60_000) }),
        runner('ancient', { lastSeenAt: ago(STALE_RUNNER_MS + 1) }),
      ],
      history: fresh('tick'),
    });
    expect(report.runners.map((r) => [r.host, r.state, r.alive])).toEqual([
      ['fresh', 'alive', true],
      ['late', 'gone', false],
      ['drained', 'stopped', false],
    ]);
    expect(report.warnings).toEqual([
      {
        kind: 'runner-gone',
        message: expect.stringMatching(
          /^runner late \(pid 100\) stopped heartbeating: last seen 15s ago/,
        ),
        hosts: ['late'],
      },
    ]);
  });

  it('a live runner detached from the fleet (split brain) is CRITICAL; a gone one is only gone', () => {
    const why = 'after a failover from server_id 2, none of the runners alive with it there (a) …';
    const report = status({
      runners: [
        runner('a', { lastSeenAt: ago(30_000) }),
        runner('b', { detached: why }),
        runner('c', { lastSeenAt: ago(30_000), detached: why }),
      ],
      history: fresh('tick'),
    });
    expect(report.warnings.filter((w) => w.kind === 'detached')).toEqual([
      {
        kind: 'detached',
        message: `runner b (pid 100) is detached from the fleet: ${why}`,
        hosts: ['b'],
      },
    ]);
    expect(report.state).toBe('CRITICAL');
    expect(status({ runners: [runner('b')], history: fresh('tick') }).state).toBe('OK');
  });

  it('takes --gone-after as given', () => {
    const runners = [runner('a', { lastSeenAt: ago(4_000) })];
    const kinds = (goneAfterMs: number) =>
      status({ runners, goneAfterMs, history: fresh('tick') }).warnings.map((w) => w.kind);
    expect(kinds(3_000)).toEqual(['no-runner', 'runner-gone']);
    expect(kinds(5_000)).toEqual([]);
  });

  it('a stopped runner is not gone, however long ago it stopped', () => {
    const report = status({
      runners: [runner('a', { lastSeenAt: ago(86_400_000), stoppedAt: ago(86_400_000) })],
    });
    expect(report.runners[0]!.state).toBe('stopped');
    // Not gone; but with no other runner, nothing runs: that is the one critical finding.
    expect(report.warnings.map((w) => w.kind)).toEqual(['no-runner']);
    const twoOfThem = status({
      runners: [
        runner('a', { lastSeenAt: ago(86_400_000), stoppedAt: ago(86_400_000) }),
        runner('b'),
      ],
    });
    expect(twoOfThem.warnings).toEqual([]);
  });
});

describe('the monitoring state', () => {
  const PAUSE: Pause = { job: 'tick', reason: null, pausedBy: 'ops', pausedAt: ago(60_000) };
  const live = [runner('a', { schedule: printsOf(TICK) })];

  it('no live runner: one critical no-runner finding, not drift per job of the file', () => {
    const file = config(`
namespace: ns
jobs:
  tick:
    schedule: "*/10 * * * *"
    command: ["true"]
  tock:
    schedule: "*/10 * * * *"
    command: ["true"]
`);
    const report = status({
      config: file,
      runners: [
        runner('srv-01', { lastSeenAt: ago(120_000), stoppedAt: ago(120_000) }),
        runner('srv-02', { lastSeenAt: ago(60_000) }),
      ],
      history: fresh('tick', 'tock'),
    });
    expect(report.warnings.map((w) => [w.kind, w.hosts ?? null])).toEqual([
      ['no-runner', ['srv-01', 'srv-02']],
      ['runner-gone', ['srv-02']],
    ]);
    expect(report.warnings[0]!.message).toBe(
      'no runner alive in namespace "ns": stopped: srv-01; gone: srv-02; the last one was seen ' +
        '1m ago; no job runs until one starts',
    );
    expect(report.state).toBe('CRITICAL');
    const empty = status({});
    expect(empty.warnings.map((w) => w.message)).toEqual([
      'no runner alive in namespace "ns": no runner has registered in it for 7d; no job runs ' +
        'until one starts',
    ]);
    expect(statusToJson(empty)).toMatchObject({ state: 'CRITICAL', exitCode: 2, healthy: false });
  });

  it('a pause is informational (exit 0) unless warnPaused; a job past expect is critical', () => {
    const paused = status({ config: TICK, runners: live, pauses: [PAUSE], history: fresh('tick') });
    expect(paused.state).toBe('OK');
    expect(statusToJson(paused)).toMatchObject({
      state: 'OK',
      exitCode: 0,
      healthy: true,
      warnings: [{ kind: 'paused', severity: 'info', job: 'tick' }],
    });
    const warned = status({
      config: TICK,
      runners: live,
      pauses: [PAUSE],
      history: fresh('tick'),
      warnPaused: true,
    });
    expect(statusToJson(warned)).toMatchObject({
      state: 'WARNING',
      exitCode: 1,
      warnings: [{ kind: 'paused', severity: 'warning' }],
    });
    const overdue = status({
      config: TICK,
      runners: live,
      history: new Map([['tick', { lastSuccessAt: ago(86_400_000), firstSeenAt: null }]]),
    });
    expect(statusToJson(overdue)).toMatchObject({
      state: 'CRITICAL',
      exitCode: 2,
      warnings: [{ kind: 'no-success', severity: 'critical' }],
    });
  });

  it('failures since the last success are a warning until it succeeds; not when paused or disabled', () => {
    const failures = {
      count: 3,
      latest: { status: 'timeout' as const, scheduledAt: at('2027-03-10T11:50:00Z') },
    };
    const facts = { lastSuccessAt: ago(60_000), firstSeenAt: null, failures };
    const report = status({ config: TICK, runners: live, history: new Map([['tick', facts]]) });
    expect(report.state).toBe('WARNING');
    expect(report.warnings).toEqual([
      {
        kind: 'failing',
        message:
          'job "tick" is failing: 3 runs failed, timed out or were lost since its last success ' +
          '(2027-03-10T11:59:00.000Z); the latest, the fire of 2027-03-10T11:50:00.000Z, ended ' +
          'timeout',
        job: 'tick',
      },
    ]);
    expect(statusToJson(report).jobs[0]).toMatchObject({
      failuresSinceSuccess: 3,
      lastFailure: { status: 'timeout', scheduledAt: '2027-03-10T11:50:00.000Z' },
    });
    const never = status({
      config: TICK,
      runners: live,
      history: new Map([
        ['tick', { ...facts, lastSuccessAt: null, failures: { ...failures, count: 1000 } }],
      ]),
    });
    expect(never.warnings.find((w) => w.kind === 'failing')!.message).toMatch(
      /^job "tick" is failing: at least 1000 runs failed, timed out or were lost and it has never run successfully;/,
    );
    const history = new Map([['tick', facts]]);
    expect(status({ config: TICK, runners: live, pauses: [PAUSE], history }).state).toBe('OK');
    const off = config(`
namespace: ns
jobs:
  tick:
    schedule: "*/10 * * * *"
    command: ["true"]
    enabled: false
`);
    const disabled = status({ config: off, runners: live, history }).warnings;
    expect(disabled.filter((w) => w.kind === 'failing')).toEqual([]);
    // Without a schedules file, the live runners' jobs are judged.
    expect(status({ runners: live, history }).warnings.map((w) => w.kind)).toEqual(['failing']);
  });
});

describe('clock offsets', () => {
  it('warns for each live runner beyond the threshold, with the sign in words', () => {
    const report = status({
      runners: [
        runner('behind', { clockOffsetMs: -2_003 }),
        runner('ok', { clockOffsetMs: 999 }),
        runner('edge', { clockOffsetMs: -1_000 }),
        runner('ahead', { clockOffsetMs: 1_498 }),
        runner('unmeasured', { clockOffsetMs: null }),
        // A gone runner's offset is old news: it gets the runner-gone warning only.
        runner('dead', { clockOffsetMs: 9_000, lastSeenAt: ago(60_000) }),
      ],
      history: fresh('tick'),
    });
    const clock = report.warnings.filter((w) => w.kind === 'clock-offset');
    expect(clock.map((w) => w.hosts)).toEqual([['behind'], ['ahead']]);
    expect(clock[0]!.message).toContain("runner behind's clock is 2s behind the database's");
    expect(clock[1]!.message).toContain("runner ahead's clock is 1.5s ahead of the database's");
    expect(report.warnings.filter((w) => w.kind === 'runner-gone').map((w) => w.hosts)).toEqual([
      ['dead'],
    ]);
  });

  it('takes --clock-threshold as given', () => {
    const runners = [runner('a', { clockOffsetMs: 300 })];
    const warned = status({ runners, clockThresholdMs: 250, history: fresh('tick') }).warnings;
    expect(warned.map((w) => w.kind)).toEqual(['clock-offset']);
  });
});

describe('schedule drift', () => {
  it('is silent when every live runner loaded the same definitions', () => {
    expect(driftWarnings([runner('a'), runner('b'), runner('c')])).toEqual([]);
  });

  it('names the job and every live runner, grouped by definition', () => {
    const report = status({
      runners: [
        runner('srv-01', { schedule: { tick: '1111111111111111', tock: 'tttt' } }),
        runner('srv-02', { schedule: { tick: '2222222222222222', tock: 'tttt' } }),
        runner('srv-03', { schedule: { tick: '1111111111111111', tock: 'tttt' } }),
      ],
      history: fresh('tick', 'tock'),
    });
    expect(report.warnings).toEqual([
      {
        kind: 'schedule-drift',
        message:
          'schedule drift for job "tick": the runners loaded different definitions of it: ' +
          'definition 11111111 on srv-01, srv-03; definition 22222222 on srv-02',
        job: 'tick',
        hosts: ['srv-01', 'srv-02', 'srv-03'],
      },
    ]);
  });

  it('names a job that only some runners loaded, and those without it', () => {
    const warnings = driftWarnings([
      runner('a', { schedule: { tick: 'x', extra: 'e' } }),
      runner('b', { schedule: { tick: 'x' } }),
    ]);
    expect(warnings).toEqual([
      {
        kind: 'schedule-drift',
        message:
          'schedule drift for job "extra": only some runners loaded it: definition e on a; ' +
          'not loaded on b',
        job: 'extra',
        hosts: ['a', 'b'],
      },
    ]);
  });

  it('counts only live runners: a gone or stopped one with an old schedule is no drift', () => {
    const report = status({
      runners: [
        runner('a'),
        runner('old', { schedule: { tick: 'old' }, lastSeenAt: ago(20_000) }),
        runner('drained', { schedule: {}, stoppedAt: ago(5_000) }),
      ],
      history: fresh('tick'),
    });
    expect(report.warnings.map((w) => w.kind)).toEqual(['runner-gone']);
  });
});

describe('schedule drift by the next fires runners compute (time-zone data)', () => {
  const after = '2027-03-10T12:00:00.000Z';
  const next = (...at: string[]) => ({ after, at });
  const loaded = (fp: string, upcoming?: { after: string; at: string[] }) => ({
    tick: { fp, since: ago(60_000).toISOString(), ...(upcoming && { next: upcoming }) },
  });
  const agreed = next('2027-03-10T13:00:00.000Z', '2027-03-10T14:00:00.000Z');

  it('is silent when runners with one definition list the same fires', () => {
    expect(
      driftWarnings([
        runner('a', { schedule: loaded('x', agreed) }),
        runner('b', { schedule: loaded('x', agreed) }),
      ]),
    ).toEqual([]);
  });

  it('names the runners and the first fire that differs, though the definitions are equal', () => {
    const warnings = driftWarnings([
      runner('srv-01', { schedule: loaded('x', agreed) }),
      runner('srv-02', {
        schedule: loaded('x', next('2027-03-10T13:00:00.000Z', '2027-03-10T15:00:00.000Z')),
      }),
      runner('srv-03', { schedule: loaded('x', agreed) }),
    ]);
    expect(warnings).toEqual([
      {
        kind: 'schedule-drift',
        message:
          'schedule drift for job "tick": the runners compute different fires from one ' +
          'definition of it (different time-zone data?): fire 2 after 2027-03-10T12:00:00.000Z ' +
          'is 2027-03-10T14:00:00.000Z on srv-01, srv-03; 2027-03-10T15:00:00.000Z on srv-02',
        job: 'tick',
        hosts: ['srv-01', 'srv-02', 'srv-03'],
      },
    ]);
  });

  it('a list that ends early differs at its end ("none")', () => {
    const [warning] = driftWarnings([
      runner('a', { schedule: loaded('x', agreed) }),
      runner('b', { schedule: loaded('x', next('2027-03-10T13:00:00.000Z')) }),
    ]);
    expect(warning!.message).toMatch(
      /fire 2 after \S+ is 2027-03-10T14:00:00.000Z on a; none on b$/,
    );
  });

  it('compares only lists from one anchor and one definition, and rows that have them', () => {
    const lastHour = { after: '2027-03-10T11:00:00.000Z', at: ['2027-03-10T12:00:00.000Z'] };
    expect(
      driftWarnings([
        runner('a', { schedule: loaded('x', agreed) }),
        // A runner whose registry tick has not seen the hour turn yet.
        runner('b', { schedule: loaded('x', lastHour) }),
        // An older runner: no next fires.
        runner('c', { schedule: loaded('x') }),
        runner('d', { schedule: { tick: 'x' } }),
      ]),
    ).toEqual([]);
    // Two definitions are one warning, of the definitions, not of their fires too.
    const differ = driftWarnings([
      runner('a', { schedule: loaded('x', agreed) }),
      runner('b', { schedule: loaded('y', next('2027-03-10T12:30:00.000Z')) }),
    ]);
    expect(differ.map((w) => w.message)).toEqual([
      'schedule drift for job "tick": the runners loaded different definitions of it: ' +
        'definition x on a; definition y on b',
    ]);
  });

  it("a runner counts them from the start of the UTC hour, in the job's zone", () => {
    const anchor = upcomingAnchor(new Date('2027-03-10T12:34:56.789Z'));
    expect(anchor.toISOString()).toBe(after);
    // :30 in Kolkata (+05:30) is :00 UTC; strictly after the anchor.
    expect(upcomingInstants(parseSchedule('30 * * * *', 'Asia/Kolkata'), anchor)).toEqual([
      '2027-03-10T13:00:00.000Z',
      '2027-03-10T14:00:00.000Z',
      '2027-03-10T15:00:00.000Z',
    ]);
  });

  it('a runner registers them for its enabled jobs, the same for jobs of one expression', async () => {
    const file = config(`
namespace: ns
jobs:
  kolkata:
    schedule: "30 * * * *"
    timezone: Asia/Kolkata
    command: ["true"]
  twin:
    schedule: "30 * * * *"
    timezone: Asia/Kolkata
    command: ["true", "twin"]
  off:
    schedule: "30 * * * *"
    enabled: false
    command: ["true"]
`);
    const loaded = loadSchedule(file, emptySchedule(file), NOW);
    const view = await registryView(loaded, upcomingAnchor(NOW));
    const fires = ['13:00', '14:00', '15:00'].map((t) => `2027-03-10T${t}:00.000Z`);
    expect(view.kolkata!.next).toEqual({ after, at: fires });
    expect(view.twin!.next).toEqual({ after, at: fires });
    expect(view.off).toEqual({ fp: expect.any(String), since: null });
  });

  it('decodes next fires from the registry row, and leaves out any other shape', () => {
    const jobs = loadedJobs({
      startedAt: ago(60_000),
      schedule: {
        good: { fp: 'f', next: agreed },
        noAfter: { fp: 'f', next: { at: ['2027-03-10T13:00:00.000Z'] } },
        notStrings: { fp: 'f', next: { after, at: [1, 2] } },
      },
    });
    expect(jobs.get('good')!.next).toEqual(agreed);
    expect(jobs.get('noAfter')!.next).toBeUndefined();
    expect(jobs.get('notStrings')!.next).toBeUndefined();
  });
});

describe('the registry schedule column, in both shapes', () => {
  it('reads {job: fp} (since = the start) and {job: {fp, since}}; since never before the start', () => {
    const startedAt = ago(60_000);
    const jobs = loadedJobs({
      startedAt,
      schedule: {
        old: 'f1',
        fresh: { fp: 'f2', since: ago(5_000).toISOString() },
        early: { fp: 'f3', since: ago(120_000).toISOString() },
        asDate: { fp: 'f4', since: ago(7_000) },
        noSince: { fp: 'f5' },
        garbage: { since: ago(1).toISOString() },
        number: 7,
      },
    });
    expect(Object.fromEntries(jobs)).toEqual({
      old: { fingerprint: 'f1', since: startedAt },
      fresh: { fingerprint: 'f2', since: ago(5_000) },
      early: { fingerprint: 'f3', since: startedAt },
      asDate: { fingerprint: 'f4', since: ago(7_000) },
      noSince: { fingerprint: 'f5', since: startedAt },
    });
  });

  it('drift compares fingerprints whatever the shape', () => {
    const fleet = [
      runner('a', { schedule: { tick: 'x' } }),
      runner('b', { schedule: { tick: { fp: 'x', since: ago(10).toISOString() } } }),
    ];
    expect(driftWarnings(fleet)).toEqual([]);
    const differ = driftWarnings([
      ...fleet,
      runner('c', { schedule: { tick: { fp: 'y', since: ago(10).toISOString() } } }),
    ]);
    expect(differ.map((w) => w.message)).toEqual([
      'schedule drift for job "tick": the runners loaded different definitions of it: ' +
        'definition x on a, b; definition y on c',
    ]);
  });
  it('decodes the column once: a job named like an Object property is no job of every runner', () => {
    // `name in schedule` counted "constructor" as loaded by every runner; the decoded map does not.
    const file = config(`
namespace: ns
jobs:
  constructor:
    schedule: "0 3 * * *"
    command: ["true"]
`);
    const report = status({ config: file, runners: [runner('a', { schedule: { tick: 'x' } })] });
    expect(report.jobs.map((j) => [j.name, j.loadedBy])).toEqual([
      ['constructor', []],
      ['tick', ['a']],
    ]);
    expect(report.runners.map((r) => r.jobs)).toEqual([['tick']]);
    expect(report.warnings.map((w) => w.message)).toContain(
      'schedule drift for job "constructor": it is in /etc/baton/schedules.yaml but no live ' +
        'runner loaded it (live: a)',
    );
  });
});

describe('schedule drift against the local schedules file', () => {
  const FILE_TEXT = `
namespace: ns
jobs:
  tick:
    schedule: "*/10 * * * *"
    command: ["true"]
  nightly:
    schedule: "0 3 * * *"
    command: ["true"]
  off:
    schedule: "0 4 * * *"
    command: ["true"]
    enabled: false
`;
  const FILE = config(FILE_TEXT);
  const prints = scheduleFingerprint(FILE);
  const tick8 = prints.tick!.slice(0, 8);

  it('is silent when the live runners loaded exactly the file', () => {
    const fleet = [
      runner('a', { schedule: printsOf(FILE) }),
      runner('b', { schedule: loadedAt(FILE, ago(5_000)) }),
    ];
    expect(driftWarnings(fleet, FILE)).toEqual([]);
    // The same file installed in another folder is the same schedule.
    const elsewhere = parseConfig('/opt/other/schedules.yaml', FILE_TEXT);
    expect(driftWarnings(fleet, elsewhere)).toEqual([]);
  });

  it('an enabled job of the file that no live runner loaded; a disabled one is not drift', () => {
    const onlyTick = { tick: prints.tick! };
    const fleet = [runner('srv-02', { schedule: onlyTick })];
    const report = status({ config: FILE, runners: fleet, history: fresh('tick') });
    expect(report.warnings).toEqual([
      {
        kind: 'schedule-drift',
        message:
          'schedule drift for job "nightly": it is in /etc/baton/schedules.yaml but no live ' +
          'runner loaded it (live: srv-02)',
        job: 'nightly',
        hosts: ['srv-02'],
      },
    ]);
    // No history and nobody loaded it: the dead-man cannot judge it, the drift says it.
    expect(report.jobs.find((j) => j.name === 'nightly')).toMatchObject({
      loadedBy: [],
      overdueAt: null,
    });
    const down = status({
      config: FILE,
      runners: [runner('srv-02', { lastSeenAt: ago(60_000) })],
    });
    // With no live runner at all (a gone one does not count), the no-runner finding says it
    // once, rather than drift for every enabled job of the file.
    expect(down.warnings.map((w) => [w.kind, w.job ?? null])).toEqual([
      ['no-runner', null],
      ['runner-gone', null],
    ]);
  });

  it('the file has another definition than the runners run: names this file and the hosts', () => {
    const fleet = ['srv-01', 'srv-02'].map((h) =>
      runner(h, { schedule: { ...prints, tick: '5555555555555555' } }),
    );
    expect(driftWarnings(fleet, FILE)).toEqual([
      {
        kind: 'schedule-drift',
        message:
          'schedule drift for job "tick": this file (/etc/baton/schedules.yaml) has a different ' +
          `definition than the runners loaded: definition 55555555 on srv-01, srv-02; definition ${tick8} in this file`,
        job: 'tick',
        hosts: ['srv-01', 'srv-02'],
      },
    ]);
  });

  it('runners that disagree: the file sides with one group, or with none', () => {
    const fleet = [
      runner('srv-01', { schedule: prints }),
      runner('srv-02', { schedule: { ...prints, tick: '2222222222222222' } }),
    ];
    expect(driftWarnings(fleet, FILE).map((w) => w.message)).toEqual([
      'schedule drift for job "tick": the runners loaded different definitions of it: ' +
        `definition ${tick8} on srv-01 and in this file (/etc/baton/schedules.yaml); ` +
        'definition 22222222 on srv-02',
    ]);
    const third = driftWarnings(
      [runner('srv-03', { schedule: { ...prints, tick: '3333333333333333' } }), ...fleet],
      FILE,
    );
    expect(third.map((w) => w.message)).toEqual([
      'schedule drift for job "tick": the runners loaded different definitions of it: ' +
        `definition 33333333 on srv-03; definition ${tick8} on srv-01 and in this file ` +
        '(/etc/baton/schedules.yaml); definition 22222222 on srv-02',
    ]);
  });

  it('a job the runners run that is not in the file; and one only some runners run', () => {
    const fleet = [
      runner('a', { schedule: { ...prints, extra: 'eeeeeeeeeeeeeeee' } }),
      runner('b', { schedule: { ...prints, extra: 'eeeeeeeeeeeeeeee', more: 'm' } }),
    ];
    expect(driftWarnings(fleet, FILE).map((w) => w.message)).toEqual([
      'schedule drift for job "extra": the runners loaded it, but it is not in this file ' +
        '(/etc/baton/schedules.yaml): definition eeeeeeee on a, b',
      'schedule drift for job "more": only some runners loaded it: definition m on b; ' +
        'not loaded on a; not in this file (/etc/baton/schedules.yaml)',
    ]);
  });
});

describe("the dead-man's switch", () => {
  const FAILING = config(`
namespace: ns
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ["true"]
    expect: 26h
`);

  // A live runner that loaded exactly the file: no drift in these tests.
  const runsFailing = [runner('a', { schedule: printsOf(FAILING) })];

  it('with its own expect: warns once the last success is older than that', () => {
    const within = status({
      config: FAILING,
      runners: runsFailing,
      history: new Map([['settle', { lastSuccessAt: ago(26 * 3_600_000), firstSeenAt: null }]]),
    });
    expect(within.warnings).toEqual([]);
    expect(within.jobs[0]).toMatchObject({ expectMs: 26 * 3_600_000, overdueAt: NOW });
    const over = status({
      config: FAILING,
      runners: runsFailing,
      history: new Map([['settle', { lastSuccessAt: ago(26 * 3_600_000 + 1), firstSeenAt: null }]]),
    });
    expect(over.warnings).toEqual([
      {
        kind: 'no-success',
        message: expect.stringMatching(
          /^job "settle" has had no successful run for 1d2h \(last success 2027-03-09T09:59:59\.999Z; expected one within 1d2h\)$/,
        ),
        job: 'settle',
      },
    ]);
  });

  it('a job that never succeeded is judged from its first history row', () => {
    const report = status({
      config: FAILING,
      runners: runsFailing,
      history: new Map([['settle', { lastSuccessAt: null, firstSeenAt: ago(27 * 3_600_000) }]]),
    });
    expect(report.warnings.map((w) => [w.kind, w.job])).toEqual([['no-success', 'settle']]);
    expect(report.warnings[0]!.message).toMatch(/^job "settle" has never run successfully/);
  });

  it('a job that never ran at all is judged from the earliest live runner that loaded it', () => {
    const yearly = config(`
namespace: ns
jobs:
  yearly:
    schedule: "0 0 1 1 *"
    command: ["true"]
    expect: 2s
`);
    const loaded = (host: string, startedAt: Date) =>
      runner(host, { startedAt, schedule: printsOf(yearly) });
    const young = status({ config: yearly, runners: [loaded('a', ago(1_500))] });
    expect(young.warnings).toEqual([]);
    const old = status({
      config: yearly,
      runners: [loaded('a', ago(1_500)), loaded('b', ago(2_500))],
    });
    expect(old.warnings.map((w) => [w.kind, w.job])).toEqual([['no-success', 'yearly']]);
    // Not loaded by any live runner and no history: nothing says since when it should have run,
    // so no no-success — but it is drift: the file has a job the fleet does not run (and the
    // fleet runs a job the file does not have).
    const unknown = status({ config: yearly, runners: [runner('a', { startedAt: ago(9e6) })] });
    expect(unknown.warnings.filter((w) => w.kind === 'no-success')).toEqual([]);
    expect(unknown.warnings).toEqual([
      {
        kind: 'schedule-drift',
        message:
          'schedule drift for job "tick": the runners loaded it, but it is not in this file ' +
          '(/etc/baton/schedules.yaml): definition aaaaaaaa on a',
        job: 'tick',
        hosts: ['a'],
      },
      {
        kind: 'schedule-drift',
        message:
          'schedule drift for job "yearly": it is in /etc/baton/schedules.yaml but no live ' +
          'runner loaded it (live: a)',
        job: 'yearly',
        hosts: ['a'],
      },
    ]);
  });

  it('a job added by a reload is judged from when the runner loaded it, not from its start', () => {
    const yearly = config(`
namespace: ns
jobs:
  yearly:
    schedule: "0 0 1 1 *"
    command: ["true"]
    expect: 2s
`);
    // Up for a week; the job came with a reload 1.5 s ago: not overdue.
    const week = ago(7 * 86_400_000);
    const reloaded = (since: Date) =>
      status({
        config: yearly,
        runners: [runner('a', { startedAt: week, schedule: loadedAt(yearly, since) })],
      });
    expect(reloaded(ago(1_500)).warnings).toEqual([]);
    expect(reloaded(ago(1_500)).jobs[0]).toMatchObject({
      overdueAt: new Date(ago(1_500).getTime() + 2_000),
    });
    // 2.5 s after the reload it is.
    const late = reloaded(ago(2_500));
    expect(late.warnings.map((w) => [w.kind, w.job])).toEqual([['no-success', 'yearly']]);
    expect(late.warnings[0]!.message).toMatch(
      /^job "yearly" has never run successfully in the 2\.5s since it appeared/,
    );
    // The earliest runner that had it counts; a registry row that does not say since when
    // (the old shape) counts from its runner's start.
    const mixed = status({
      config: yearly,
      runners: [
        runner('a', { startedAt: week, schedule: loadedAt(yearly, ago(1_000)) }),
        runner('b', { startedAt: ago(1_800), schedule: printsOf(yearly) }),
      ],
    });
    expect(mixed.warnings).toEqual([]);
    expect(mixed.jobs[0]!.overdueAt).toEqual(new Date(ago(1_800).getTime() + 2_000));
    const old = status({
      config: yearly,
      runners: [runner('b', { startedAt: week, schedule: printsOf(yearly) })],
    });
    expect(old.warnings.map((w) => w.kind)).toEqual(['no-success']);
  });

  it('by default allows two fires plus a grace of max(1 min, 10% of the period)', () => {
    // Every 10 minutes; last success at 11:40:05 → fires 11:50, 12:00 → overdue after 12:01.
    const history = (lastSuccessAt: Date) =>
      new Map([['tick', { lastSuccessAt, firstSeenAt: null }]]);
    const runners = [runner('a', { schedule: printsOf(TICK) })];
    const ok = status({ config: TICK, runners, history: history(at('2027-03-10T11:40:05Z')) });
    expect(ok.jobs[0]!.overdueAt).toEqual(at('2027-03-10T12:01:00Z'));
    expect(ok.warnings).toEqual([]);
    const late = status({
      config: TICK,
      runners: runners.map((r) => ({ ...r, lastSeenAt: at('2027-03-10T12:01:00Z') })),
      history: history(at('2027-03-10T11:40:05Z')),
      now: at('2027-03-10T12:01:00.001Z'),
    });
    expect(late.warnings.map((w) => w.kind)).toEqual(['no-success']);
  });

  it('counts fires, not lengths: a weekday job that succeeded on Friday is not overdue on Sunday', () => {
    const weekdays = parseSchedule('0 9 * * 1-5', 'UTC');
    const friday = at('2027-03-05T09:00:30Z');
    const e = expectation({ expectMs: null, schedule: weekdays }, friday)!;
    // Monday 09:00 and Tuesday 09:00 are the two fires; the period there is a day → grace 2.4 h.
    expect(e.overdueAt).toEqual(at('2027-03-09T11:24:00Z'));
    expect(e.rule).toBe('default');
  });

  it('grace: a minute at least, 10% of long periods', () => {
    expect(defaultGraceMs(1_000)).toBe(MIN_GRACE_MS);
    expect(defaultGraceMs(86_400_000)).toBe(8_640_000);
    expect(expectation({ expectMs: null, schedule: null }, NOW)).toBeNull();
    expect(expectation({ expectMs: 5_000, schedule: null }, NOW)).toEqual({
      overdueAt: new Date(NOW.getTime() + 5_000),
      expectMs: 5_000,
      rule: 'expect',
    });
  });

  it('a paused job gets the paused warning instead; a disabled job or one not in the file none', () => {
    const file = config(`
namespace: ns
jobs:
  held:
    schedule: "* * * * * *"
    command: ["true"]
    expect: 1s
  off:
    schedule: "* * * * * *"
    command: ["true"]
    enabled: false
    expect: 1s
`);
    const old = { lastSuccessAt: ago(86_400_000), firstSeenAt: null };
    const pause: Pause = {
      job: 'held',
      reason: 'bank holiday',
      pausedBy: 'ops@srv-01',
      pausedAt: at('2027-03-10T08:00:00Z'),
    };
    const report = status({
      config: file,
      pauses: [pause],
      runners: [runner('a', { schedule: { ...printsOf(file), elsewhere: 'e' } })],
      history: new Map([
        ['held', old],
        ['off', old],
        ['elsewhere', old],
      ]),
    });
    expect(report.warnings).toEqual([
      expect.objectContaining({ kind: 'schedule-drift', job: 'elsewhere' }),
      {
        kind: 'paused',
        message:
          'job "held" is paused by ops@srv-01 since 2027-03-10T08:00:00.000Z: bank holiday; ' +
          'every runner skips its fires until "baton resume held"',
        job: 'held',
      },
    ]);
    const byName = Object.fromEntries(report.jobs.map((j) => [j.name, j]));
    expect(byName.held).toMatchObject({ paused: true, enabled: true });
    expect(byName.off).toMatchObject({ paused: false, enabled: false, nextFire: null });
    expect(byName.elsewhere).toMatchObject({ inConfig: false, enabled: null, nextFire: null });
  });
});

describe('jobs, running runs and the JSON shape', () => {
  it('next fires come from the local file at database time; without a file there are none', () => {
    const report = status({ config: TICK, history: fresh('tick') });
    expect(report.jobs[0]).toMatchObject({ name: 'tick', nextFire: at('2027-03-10T12:10:00Z') });
    const noFile = status({ runners: [runner('a')], history: fresh('tick') });
    expect(noFile.jobs).toMatchObject([{ name: 'tick', nextFire: null, loadedBy: ['a'] }]);
  });

  it('a running run says where, since when and for how long', () => {
    const run: RunningRun = {
      id: 42,
      job: 'tick',
      scheduledAt: at('2027-03-10T11:50:00Z'),
      trigger: 'schedule',
      host: 'srv-02',
      pid: 4242,
      startedAt: at('2027-03-10T11:50:00.012Z'),
      attempts: 1,
    };
    const json = statusToJson(
      status({
        config: TICK,
        running: [run],
        runners: [runner('srv-02', { schedule: printsOf(TICK) })],
        history: fresh('tick'),
      }),
    );
    expect(json.running).toEqual([
      {
        runId: 42,
        job: 'tick',
        host: 'srv-02',
        pid: 4242,
        trigger: 'schedule',
        scheduledAt: '2027-03-10T11:50:00.000Z',
        startedAt: '2027-03-10T11:50:00.012Z',
        runningForMs: 599_988,
        attempts: 1,
        warnAt: null,
        slow: false,
      },
    ]);
    expect(json).toMatchObject({
      namespace: 'ns',
      now: NOW.toISOString(),
      state: 'OK',
      exitCode: 0,
      healthy: true,
      runners: [
        {
          host: 'srv-02',
          pid: 100,
          version: '0.1.0',
          state: 'alive',
          alive: true,
          clockOffsetMs: 3,
          lastSeenAt: ago(1_000).toISOString(),
          lastSeenAgoMs: 1_000,
          stoppedAt: null,
        },
      ],
      jobs: [
        {
          name: 'tick',
          nextFire: '2027-03-10T12:10:00.000Z',
          paused: false,
          lastSuccessAt: ago(60_000).toISOString(),
        },
      ],
      warnings: [],
    });
  });
});

describe("the schedule's latest fire (explain's default fire)", () => {
  it('is the latest fire at or before the instant, by the same maths as the runners', () => {
    const tick = parseSchedule('*/10 * * * *', 'UTC');
    expect(lastFireAtOrBefore(tick, at('2027-03-10T12:07:31Z'))).toEqual(
      at('2027-03-10T12:00:00Z'),
    );
    expect(lastFireAtOrBefore(tick, at('2027-03-10T12:10:00Z'))).toEqual(
      at('2027-03-10T12:10:00Z'),
    );
    const yearly = parseSchedule('0 3 1 1 *', 'Europe/Berlin');
    expect(lastFireAtOrBefore(yearly, at('2027-03-10T12:00:00Z'))).toEqual(
      at('2027-01-01T02:00:00Z'),
    );
    // Leap days only: four years back.
    const leap = parseSchedule('0 0 29 2 *', 'UTC');
    expect(lastFireAtOrBefore(leap, at('2027-03-10T12:00:00Z'))).toEqual(
      at('2024-02-29T00:00:00Z'),
    );
    // The skipped hour of New York's spring change: 02:30 runs at 03:00 EDT (07:00 UTC).
    const dst = parseSchedule('30 2 * * *', 'America/New_York');
    expect(lastFireAtOrBefore(dst, at('2027-03-14T08:00:00Z'))).toEqual(
      dst.nextAfter(at('2027-03-13T12:00:00Z')),
    );
  });

  it('agrees with nextAfter on many instants and expressions', () => {
    const expressions: [string, string][] = [
      ['* * * * * *', 'UTC'],
      ['*/7 * * * *', 'Asia/Kolkata'],
      ['0 9 * * 1-5', 'Europe/Berlin'],
      ['15 1,2,3 * * *', 'America/New_York'],
      ['0 0 1 * *', 'UTC'],
    ];
    let t = at('2027-01-01T00:00:00Z').getTime();
    for (let i = 0; i < 200; i++) {
      t += 3_611_117 * (1 + (i % 29)); // irregular steps, across both 2027 DST changes
      const instant = new Date(t);
      for (const [expr, tz] of expressions) {
        const s = parseSchedule(expr, tz);
        const last = lastFireAtOrBefore(s, instant)!;
        expect(last.getTime(), `${expr} ${instant.toISOString()}`).toBeLessThanOrEqual(t);
        expect(s.nextAfter(last)!.getTime(), `${expr} ${instant.toISOString()}`).toBeGreaterThan(t);
        // and it is a fire: the next fire after just before it is itself
        expect(s.nextAfter(new Date(last.getTime() - 1))).toEqual(last);
      }
    }
  });
});

describe('notifications that fail', () => {
  const outbox = (o: { failed?: number; retrying?: number; oldest?: number }) => ({
    pending: new Map([['ops', o.retrying ?? 0]]),
    retrying: new Map([['ops', o.retrying ?? 0]]),
    oldestPendingSeconds: new Map(o.oldest != null ? [['ops', o.oldest]] : []),
    failedRecently: new Map([['ops', o.failed ?? 0]]),
  });
  const kinds = (o: Parameters<typeof outbox>[0]) =>
    status({
      runners: [runner('a', { lastSeenAt: ago(1_000) })],
      notifications: outbox(o),
    }).warnings.filter((w) => w.kind === 'notify-failing');

  it('warn when some were given up, or retried for over five minutes; not for a brief retry', () => {
    expect(kinds({ failed: 2 })).toHaveLength(1);
    expect(kinds({ failed: 2 })[0]!.message).toContain('2 given up in the last hour');
    expect(kinds({ retrying: 3, oldest: 301 })[0]!.message).toContain('3 retrying');
    expect(kinds({ retrying: 3, oldest: 30 })).toEqual([]);
    expect(
      status({
        runners: [runner('a', { lastSeenAt: ago(1_000) })],
        notifications: outbox({ failed: 1 }),
      }).state,
    ).toBe('WARNING');
  });
});
