/**
 * What `baton definitions` shows of a switch and what `definitions apply` plans, judged without a
 * database (fleet/timing-preview.ts, actions/definitions.ts `planApply`, the shared default
 * instant of store/timing-proposal.ts): the fires around a switch under the old and the new
 * timing with which the fleet runs, the day that runs a job twice or skips it, the instant
 * `--at midnight` and `--at <date>` pick in a job's zone, and every refusal before a write.
 * The instants are exact; the CLI over a real database is test/in-process/definitions.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { planApply, type PlanInput, type SwitchAt } from '../../src/actions/definitions.js';
import { timingPrint } from '../../src/config/fingerprint.js';
import { transitionPreview, jobTimingView } from '../../src/fleet/timing-preview.js';
import { parseSchedule } from '../../src/schedule/cron.js';
import { dayStarting } from '../../src/schedule/timing-switch.js';
import type { RunnerRecord } from '../../src/store/runners.js';
import { defaultEffective } from '../../src/store/timing-proposal.js';
import { FIRST_VERSION_AT, type TimingRecord } from '../../src/store/timings.js';

const at = (iso: string) => new Date(iso);
const v = (version: number, schedule: string, timezone = 'UTC') => ({
  version,
  schedule,
  timezone,
});
/** `instant timing runs|-` per fire, for exact comparison. */
const fires = (p: ReturnType<typeof transitionPreview>) =>
  p.fires.map((f) => `${f.at.toISOString()} ${f.timing} ${f.runs ? 'runs' : '-'}`);

function record(
  version: number,
  schedule: string,
  effectiveAt: Date,
  timezone = 'UTC',
): TimingRecord {
  return {
    job: 'settle',
    version,
    print: timingPrint({ schedule, timezone })!,
    schedule,
    timezone,
    effectiveAt,
    chosenBy: version === 1 ? 'first' : 'settle',
    recordedAt: at('2027-01-01T00:00:00Z'),
    recordedBy: 'srv-01',
  };
}

describe('the transition preview', () => {
  it('03:00 → 04:00 switched at 03:30 runs the job twice that day', () => {
    const p = transitionPreview(v(1, '0 3 * * *'), v(2, '0 4 * * *'), at('2027-01-05T03:30:00Z'));
    expect(fires(p)).toEqual([
      '2027-01-04T03:00:00.000Z old runs',
      '2027-01-04T04:00:00.000Z new -',
      '2027-01-05T03:00:00.000Z old runs',
      '2027-01-05T04:00:00.000Z new runs',
      '2027-01-06T03:00:00.000Z old -',
      '2027-01-06T04:00:00.000Z new runs',
    ]);
    expect(p.day).toBe('2027-01-05');
    expect(p.anomaly).toEqual({
      kind: 'twice',
      day: '2027-01-05',
      fires: [at('2027-01-05T03:00:00Z'), at('2027-01-05T04:00:00Z')],
      oldCount: 1,
      newCount: 1,
    });
  });

  it('03:00 → 04:00 at the default instant (recorded at noon) runs it once each day', () => {
    const latest = record(1, '0 3 * * *', FIRST_VERSION_AT);
    const next = parseSchedule('0 4 * * *', 'UTC');
    const chosen = defaultEffective(latest, next, at('2027-01-04T12:00:00Z'), 600_000);
    expect(chosen).toEqual({ at: at('2027-01-05T03:00:00Z'), chosenBy: 'settle' });
    const p = transitionPreview(v(1, '0 3 * * *'), v(2, '0 4 * * *'), chosen.at);
    expect(fires(p)).toEqual([
      '2027-01-04T03:00:00.000Z old runs',
      '2027-01-04T04:00:00.000Z new -',
      // The old timing's fire at the switch itself is the new timing's to decide: not run.
      '2027-01-05T03:00:00.000Z old -',
      '2027-01-05T04:00:00.000Z new runs',
      '2027-01-06T03:00:00.000Z old -',
      '2027-01-06T04:00:00.000Z new runs',
    ]);
    expect(p.anomaly).toBeNull();
  });

  it('the default skips a candidate whose day would run twice (recorded at 03:55 with 10 minutes to settle)', () => {
    const latest = record(1, '0 3 * * *', FIRST_VERSION_AT);
    const next = parseSchedule('0 4 * * *', 'UTC');
    // 04:05 on: the new 04:00 of the 5th is gone, the old 03:00 of the 6th is the first candidate.
    expect(defaultEffective(latest, next, at('2027-01-05T03:55:00Z'), 600_000).at).toEqual(
      at('2027-01-06T03:00:00Z'),
    );
    // 03:30 on: the new 04:00 of the 5th would run the day twice; the 6th's 03:00 it is.
    expect(defaultEffective(latest, next, at('2027-01-05T03:20:00Z'), 600_000).at).toEqual(
      at('2027-01-06T03:00:00Z'),
    );
  });

  it('03:00 → 02:00 switched at 02:30 skips the day', () => {
    const p = transitionPreview(v(1, '0 3 * * *'), v(2, '0 2 * * *'), at('2027-01-05T02:30:00Z'));
    expect(fires(p)).toEqual([
      '2027-01-04T02:00:00.000Z new -',
      '2027-01-04T03:00:00.000Z old runs',
      '2027-01-05T02:00:00.000Z new -',
      '2027-01-05T03:00:00.000Z old -',
      '2027-01-06T02:00:00.000Z new runs',
      '2027-01-06T03:00:00.000Z old -',
    ]);
    expect(p.anomaly).toMatchObject({ kind: 'skipped', day: '2027-01-05', fires: [] });
  });

  it('judges the day in the new timing’s zone, across a daylight-saving night', () => {
    // Paris, 2027-03-28, a 23-hour day (02:00 does not exist): 01:00 → 03:00 local switched at
    // 01:30 local (00:30 UTC, CET) runs both, 01:00 +01 and 03:00 +02.
    const p = transitionPreview(
      v(1, '0 1 * * *', 'Europe/Paris'),
      v(2, '0 3 * * *', 'Europe/Paris'),
      at('2027-03-28T00:30:00Z'),
    );
    expect(p.day).toBe('2027-03-28');
    expect(p.anomaly).toMatchObject({
      kind: 'twice',
      fires: [at('2027-03-28T00:00:00Z'), at('2027-03-28T01:00:00Z')],
    });
  });

  it('shows a few fires either side for a frequent job, and does not judge its day', () => {
    const p = transitionPreview(v(1, '* * * * *'), v(2, '*/2 * * * *'), at('2027-01-05T03:30:30Z'));
    expect(fires(p)).toEqual([
      '2027-01-05T03:24:00.000Z new -',
      '2027-01-05T03:26:00.000Z new -',
      '2027-01-05T03:27:00.000Z old runs',
      '2027-01-05T03:28:00.000Z old runs',
      '2027-01-05T03:28:00.000Z new -',
      '2027-01-05T03:29:00.000Z old runs',
      '2027-01-05T03:30:00.000Z old runs',
      '2027-01-05T03:30:00.000Z new -',
      '2027-01-05T03:31:00.000Z old -',
      '2027-01-05T03:32:00.000Z old -',
      '2027-01-05T03:32:00.000Z new runs',
      '2027-01-05T03:33:00.000Z old -',
      '2027-01-05T03:34:00.000Z old -',
      '2027-01-05T03:34:00.000Z new runs',
      '2027-01-05T03:36:00.000Z new runs',
      '2027-01-05T03:38:00.000Z new runs',
    ]);
    expect(p.anomaly).toBeNull();
  });

  it('shows a weekly job’s next fire past the three days', () => {
    const p = transitionPreview(v(1, '0 3 * * 1'), v(2, '0 4 * * 1'), at('2027-01-05T03:30:00Z'));
    expect(fires(p)).toEqual([
      '2027-01-04T03:00:00.000Z old runs',
      '2027-01-04T04:00:00.000Z new -',
      '2027-01-11T03:00:00.000Z old -',
      '2027-01-11T04:00:00.000Z new runs',
    ]);
  });

  it('lists one timing once when a rollback goes back to the timing in force', () => {
    const p = transitionPreview(v(1, '0 3 * * *'), v(3, '0 3 * * *'), at('2027-01-05T12:00:00Z'));
    expect(p.same).toBe(true);
    expect(fires(p)).toEqual([
      '2027-01-04T03:00:00.000Z old runs',
      '2027-01-05T03:00:00.000Z old runs',
      '2027-01-06T03:00:00.000Z new runs',
    ]);
    expect(p.anomaly).toBeNull();
  });
});

describe('a job’s versions as the view shows them', () => {
  const runner = (host: string, tv?: number, lastSeen = '2027-01-05T11:59:59Z'): RunnerRecord => ({
    namespace: 'n',
    host,
    pid: 1,
    version: '0.1.0',
    startedAt: at('2027-01-01T00:00:00Z'),
    lastSeenAt: at(lastSeen),
    stoppedAt: null,
    clockOffsetMs: 0,
    lockConnectionId: 1,
    jobs: new Map([
      [
        'settle',
        {
          fingerprint: 'f',
          since: at('2027-01-01T00:00:00Z'),
          ...(tv ? { timingVersion: tv } : {}),
        },
      ],
    ]),
  });

  it('says which version is in force, which is pending, who has which, and who will hold', () => {
    const records = [
      record(1, '0 3 * * *', FIRST_VERSION_AT),
      record(2, '0 4 * * *', at('2027-01-06T03:00:00Z')),
    ];
    const now = at('2027-01-05T12:00:00Z');
    const view = jobTimingView(
      'settle',
      records,
      now,
      [runner('srv-01', 2), runner('srv-02', 1), runner('srv-03')],
      { schedule: '0 4 * * *', timezone: 'UTC' },
    );
    expect(view.inForce).toBe(1);
    expect(view.versions.map((x) => [x.record.version, x.state, x.hosts])).toEqual([
      [1, 'in-force', ['srv-02']],
      [2, 'pending', ['srv-01']],
    ]);
    expect(view.runners).toEqual([
      { host: 'srv-01', version: 2, held: false, holdsFrom: null },
      { host: 'srv-02', version: 1, held: false, holdsFrom: at('2027-01-06T03:00:00Z') },
      { host: 'srv-03', version: null, held: false, holdsFrom: null },
    ]);
    expect(view.file).toEqual({ schedule: '0 4 * * *', timezone: 'UTC', version: 2 });
    expect(view.switches.map((s) => [s.from?.version, s.to.version, s.at])).toEqual([
      [1, 2, at('2027-01-06T03:00:00Z')],
    ]);
  });

  it('calls a version that never takes effect superseded, and a runner below the one in force held', () => {
    const records = [
      record(1, '0 3 * * *', FIRST_VERSION_AT),
      record(2, '0 4 * * *', at('2027-01-06T03:00:00Z')),
      record(3, '0 5 * * *', at('2027-01-05T06:00:00Z')),
    ];
    const view = jobTimingView(
      'settle',
      records,
      at('2027-01-05T12:00:00Z'),
      [runner('srv-02', 1)],
      null,
    );
    expect(view.versions.map((x) => x.state)).toEqual(['past', 'superseded', 'in-force']);
    expect(view.runners[0]).toMatchObject({ host: 'srv-02', held: true });
    expect(view.switches).toEqual([]);
  });
});

describe('--at in a job’s zone', () => {
  it('a date is its first instant there, also where midnight is skipped', () => {
    expect(dayStarting('Europe/Paris', '2027-03-28')).toEqual(at('2027-03-27T23:00:00Z'));
    expect(dayStarting('Pacific/Kiritimati', '2027-01-05')).toEqual(at('2027-01-04T10:00:00Z'));
    expect(dayStarting('Etc/GMT+12', '2027-01-05')).toEqual(at('2027-01-05T12:00:00Z'));
    // Havana springs forward at midnight: the day starts at 01:00 CDT.
    expect(dayStarting('America/Havana', '2027-03-14')).toEqual(at('2027-03-14T05:00:00Z'));
    expect(dayStarting('UTC', '2027-02-30')).toBeNull();
  });
});

describe('planning apply', () => {
  const now = at('2027-01-04T22:55:00Z');
  const job = (schedule: string, timezone = 'UTC', name = 'settle') => ({
    name,
    schedule,
    timezone,
  });
  const input = (over: Partial<PlanInput>): PlanInput => ({
    namespace: 'n',
    now,
    settleMs: 600_000,
    jobs: [job('0 4 * * *')],
    named: true,
    timings: new Map([['settle', [record(1, '0 3 * * *', FIRST_VERSION_AT)]]]),
    at: null,
    ...over,
  });
  const midnight: SwitchAt = { kind: 'midnight', given: 'midnight' };

  it('records a change at the default instant, or at the first midnight of the job’s zone past the settle window', () => {
    expect(planApply(input({})).steps[0]).toMatchObject({
      kind: 'change',
      version: 2,
      at: at('2027-01-05T03:00:00Z'),
      chosenBy: 'settle',
    });
    // 23:05 UTC is 00:05 in Paris on the 5th: its next midnight is the 6th's, 23:00 UTC the 5th.
    const paris = planApply(
      input({
        jobs: [job('0 4 * * *', 'Europe/Paris')],
        timings: new Map([['settle', [record(1, '0 3 * * *', FIRST_VERSION_AT, 'Europe/Paris')]]]),
        at: midnight,
      }),
    ).steps[0]!;
    expect(paris).toMatchObject({
      kind: 'change',
      at: at('2027-01-05T23:00:00Z'),
      chosenBy: 'operator',
    });
    expect(paris.preview?.anomaly).toBeNull();
    // In UTC the 5th's midnight is 65 minutes away, past the 10 minutes.
    expect(planApply(input({ at: midnight })).steps[0]!.at).toEqual(at('2027-01-05T00:00:00Z'));
  });

  it('re-proposes an earlier timing as a new version: a rollback', () => {
    const timings = new Map([
      [
        'settle',
        [
          record(1, '0 3 * * *', FIRST_VERSION_AT),
          record(2, '0 4 * * *', at('2027-01-03T03:00:00Z')),
        ],
      ],
    ]);
    expect(planApply(input({ jobs: [job('0 3 * * *')], timings })).steps[0]).toMatchObject({
      kind: 'rollback',
      version: 3,
      rollbackOf: 1,
    });
  });

  it('moves a pending version’s instant, and says which pending version an earlier one supersedes', () => {
    const timings = new Map([
      [
        'settle',
        [
          record(1, '0 3 * * *', FIRST_VERSION_AT),
          record(2, '0 4 * * *', at('2027-01-06T03:00:00Z')),
        ],
      ],
    ]);
    const step = planApply(input({ timings, at: midnight })).steps[0]!;
    expect(step).toMatchObject({
      kind: 'retime',
      version: 2,
      at: at('2027-01-05T00:00:00Z'),
      previousAt: at('2027-01-06T03:00:00Z'),
    });
    const other = planApply(
      input({
        jobs: [job('0 5 * * *')],
        timings,
        at: { kind: 'instant', at: at('2027-01-05T12:00:00Z'), given: 'x' },
      }),
    ).steps[0]!;
    expect(other).toMatchObject({ kind: 'change', version: 3, supersedes: [2] });
    expect(other.preview?.from?.version).toBe(1);
    // Without --at it is pending, shown as it is.
    expect(planApply(input({ timings })).steps[0]).toMatchObject({ kind: 'pending', version: 2 });
  });

  it('refuses, naming every job, a past --at, one within 60 s, a move too late or of a version in force', () => {
    const timings = new Map([
      [
        'settle',
        [
          record(1, '0 3 * * *', FIRST_VERSION_AT),
          record(2, '0 4 * * *', at('2027-01-04T22:55:30Z')),
        ],
      ],
      ['report', [record(1, '0 2 * * *', FIRST_VERSION_AT)]],
    ]);
    const jobs = [job('0 4 * * *'), job('0 2 * * *', 'UTC', 'report')];
    const instant = (iso: string): SwitchAt => ({ kind: 'instant', at: at(iso), given: iso });
    expect(() => planApply(input({ jobs, timings, at: instant('2027-01-04T22:00:00Z') }))).toThrow(
      /^- settle: version 2 takes effect at 2027-01-04T22:55:30.000Z, less than 60 s from now .*\n- report: version 1, this file's timing, is in force from the start: an instant in force does not move .*\nnothing was written$/,
    );
    expect(() =>
      planApply(input({ jobs: [job('0 5 * * *')], timings, at: instant('2027-01-04T22:00:00Z') })),
    ).toThrow(
      /settle: --at "2027-01-04T22:00:00Z" is 2027-01-04T22:00:00.000Z, in the past by the database's clock \(now 2027-01-04T22:55:00.000Z\)/,
    );
    expect(() =>
      planApply(input({ jobs: [job('0 5 * * *')], timings, at: instant('2027-01-04T22:55:59Z') })),
    ).toThrow(/less than 60 s from now/);
    // Not named: an unchanged job in force is left alone by --at.
    expect(
      planApply(
        input({ jobs: [job('0 2 * * *', 'UTC', 'report')], timings, named: false, at: midnight }),
      ).steps[0],
    ).toMatchObject({ kind: 'unchanged' });
  });

  it('records a new job as version 1 from the start, whatever --at says', () => {
    const step = planApply(input({ timings: new Map(), at: midnight })).steps[0]!;
    expect(step).toMatchObject({ kind: 'first', version: 1, at: FIRST_VERSION_AT, preview: null });
    expect(step.notes).toEqual([
      "--at does not apply: a job's first version is in force from the start",
    ]);
  });
});
