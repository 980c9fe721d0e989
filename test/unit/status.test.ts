/**
 * `baton status` as a pure function (src/fleet/status.ts) and the dead-man's switch
 * (src/fleet/dead-man.ts): from registry rows, running rows, pauses, per-job history facts and a
 * database instant, the report and exactly the warnings it must carry — runner states and their
 * edges (alive / stopped / gone / stale), clock offsets and their sign, schedule drift, the
 * dead-man's rules (own `expect:`, two fires plus a grace, never-ran jobs, paused or disabled
 * jobs), next fires, and the JSON shape.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { defaultGraceMs, expectation, MIN_GRACE_MS } from '../../src/fleet/dead-man.js';
import {
  buildStatus,
  driftWarnings,
  STALE_RUNNER_MS,
  statusToJson,
  type StatusInput,
} from '../../src/fleet/status.js';
import { parseSchedule } from '../../src/schedule/cron.js';
import type { JobHistoryFacts, RunningRun } from '../../src/store/fleet-reads.js';
import type { Pause } from '../../src/store/pauses.js';
import type { RunnerRecord } from '../../src/store/runners.js';

const NOW = new Date('2027-03-10T12:00:00.000Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const at = (iso: string) => new Date(iso);

function runner(host: string, o: Partial<RunnerRecord> = {}): RunnerRecord {
  return {
    namespace: 'ns',
    host,
    pid: 100,
    version: '0.1.0',
    startedAt: ago(3_600_000),
    lastSeenAt: ago(1_000),
    stoppedAt: null,
    clockOffsetMs: 3,
    lockConnectionId: 7,
    schedule: { tick: 'aaaaaaaaaaaaaaaa' },
    ...o,
  };
}

const config = (yaml: string) => parseConfig('/etc/baton/schedules.yaml', yaml);

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

  it('takes --gone-after as given', () => {
    const runners = [runner('a', { lastSeenAt: ago(4_000) })];
    expect(status({ runners, goneAfterMs: 3_000, history: fresh('tick') }).warnings).toHaveLength(
      1,
    );
    expect(status({ runners, goneAfterMs: 5_000, history: fresh('tick') }).warnings).toEqual([]);
  });

  it('a stopped runner is not gone, however long ago it stopped', () => {
    const report = status({
      runners: [runner('a', { lastSeenAt: ago(86_400_000), stoppedAt: ago(86_400_000) })],
    });
    expect(report.runners[0]!.state).toBe('stopped');
    expect(report.warnings).toEqual([]);
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

describe("the dead-man's switch", () => {
  const FAILING = config(`
namespace: ns
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ["true"]
    expect: 26h
`);

  it('with its own expect: warns once the last success is older than that', () => {
    const within = status({
      config: FAILING,
      history: new Map([['settle', { lastSuccessAt: ago(26 * 3_600_000), firstSeenAt: null }]]),
    });
    expect(within.warnings).toEqual([]);
    expect(within.jobs[0]).toMatchObject({ expectMs: 26 * 3_600_000, overdueAt: NOW });
    const over = status({
      config: FAILING,
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
      runner(host, { startedAt, schedule: { yearly: 'y' } });
    const young = status({ config: yearly, runners: [loaded('a', ago(1_500))] });
    expect(young.warnings).toEqual([]);
    const old = status({
      config: yearly,
      runners: [loaded('a', ago(1_500)), loaded('b', ago(2_500))],
    });
    expect(old.warnings.map((w) => [w.kind, w.job])).toEqual([['no-success', 'yearly']]);
    // Not loaded by any live runner and no history: nothing says since when it should have run.
    const unknown = status({ config: yearly, runners: [runner('a', { startedAt: ago(9e6) })] });
    expect(unknown.warnings.filter((w) => w.kind === 'no-success')).toEqual([]);
  });

  it('by default allows two fires plus a grace of max(1 min, 10% of the period)', () => {
    // Every 10 minutes; last success at 11:40:05 → fires 11:50, 12:00 → overdue after 12:01.
    const history = (lastSuccessAt: Date) =>
      new Map([['tick', { lastSuccessAt, firstSeenAt: null }]]);
    const ok = status({ config: TICK, history: history(at('2027-03-10T11:40:05Z')) });
    expect(ok.jobs[0]!.overdueAt).toEqual(at('2027-03-10T12:01:00Z'));
    expect(ok.warnings).toEqual([]);
    const late = status({
      config: TICK,
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
      runners: [runner('a', { schedule: { held: 'h', off: 'o', elsewhere: 'e' } })],
      history: new Map([
        ['held', old],
        ['off', old],
        ['elsewhere', old],
      ]),
    });
    expect(report.warnings).toEqual([
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
      status({ config: TICK, running: [run], runners: [runner('srv-02')], history: fresh('tick') }),
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
      },
    ]);
    expect(json).toMatchObject({
      namespace: 'ns',
      now: NOW.toISOString(),
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
