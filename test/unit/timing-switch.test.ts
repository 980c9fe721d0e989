/**
 * A job's fires across its timing versions (schedule/timing-switch.ts): the stretches a runner
 * fires by, the instant a change takes over by default, and how a switch falls on its day. The
 * fires of a switch are checked against the rule as written — the old timing's instants before
 * the switch, the new one's from it — each list counted by croner alone.
 */
import { describe, expect, it } from 'vitest';
import { parseSchedule } from '../../src/schedule/cron.js';
import {
  dayAround,
  defaultSwitchInstant,
  switchAnomaly,
  switchedSchedule,
  timingSegments,
  type TimingVersion,
} from '../../src/schedule/timing-switch.js';

const at = (iso: string) => new Date(iso);
const iso = (dates: Date[]) => dates.map((d) => d.toISOString());
const daily = (hour: number, tz = 'UTC') => parseSchedule(`0 0 ${hour} * * *`, tz);

/** The rule, by brute force: `old`'s instants before `switchAt`, `next`'s from it. */
function byTheRule(old: string, next: string, switchAt: Date, from: Date, count: number): string[] {
  const a = parseSchedule(old, 'UTC')
    .nextN(count, from)
    .filter((d) => d < switchAt);
  const b = parseSchedule(next, 'UTC')
    .nextN(count * 2, new Date(Math.max(from.getTime(), switchAt.getTime() - 1)))
    .filter((d) => d >= switchAt);
  return iso([...a, ...b].filter((d) => d > from).slice(0, count));
}

describe('the fires across versions', () => {
  const v = (version: number, effectiveAt: string, schedule: string): TimingVersion => ({
    version,
    effectiveAt: at(effectiveAt),
    schedule,
    timezone: 'UTC',
  });
  const versions = [
    v(1, '1970-01-01T00:00:00Z', '0 */10 * * * *'),
    v(2, '2027-01-01T00:02:00Z', '0 5-59/10 * * * *'),
  ];

  it('are the old timing before the switch and the new one from it, for a runner with the new file', () => {
    const s = switchedSchedule(
      parseSchedule('0 5-59/10 * * * *', 'UTC'),
      timingSegments(versions, 2),
    );
    const from = at('2026-12-31T23:35:00Z');
    expect(iso(s.nextN(6, from))).toEqual(
      byTheRule('0 */10 * * * *', '0 5-59/10 * * * *', at('2027-01-01T00:02:00Z'), from, 6),
    );
    expect(iso(s.nextN(3, from))).toEqual([
      '2026-12-31T23:40:00.000Z',
      '2026-12-31T23:50:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ]);
    expect(s.nextAfter(at('2027-01-01T00:00:00Z'))?.toISOString()).toBe('2027-01-01T00:05:00.000Z');
    expect(s.versionAt(at('2027-01-01T00:00:00Z'))).toBe(1);
    expect(s.versionAt(at('2027-01-01T00:05:00Z'))).toBe(2);
  });

  it('stop at the switch for a runner that still has the old definition: it holds', () => {
    const segments = timingSegments(versions, 1);
    expect(segments.map((s) => [s.version, s.schedule != null])).toEqual([
      [1, true],
      [2, false],
    ]);
    const s = switchedSchedule(parseSchedule('0 */10 * * * *', 'UTC'), segments);
    expect(iso(s.nextN(5, at('2026-12-31T23:45:00Z')))).toEqual([
      '2026-12-31T23:50:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ]);
  });

  it('follow a version recorded later with an earlier instant, which supersedes a pending one', () => {
    const later = [...versions, v(3, '2027-01-01T00:01:00Z', '0 7-59/10 * * * *')];
    expect(timingSegments(later, 3).map((s) => [s.version, s.from.toISOString()])).toEqual([
      [1, '1970-01-01T00:00:00.000Z'],
      [3, '2027-01-01T00:01:00.000Z'],
    ]);
    // A runner that has version 2's file holds from version 3's instant: 3 is beyond it.
    expect(timingSegments(later, 2).map((s) => s.schedule != null)).toEqual([true, false]);
  });
});

describe('a recorded timing this runtime cannot read', () => {
  it('is held, not guessed: a newer syntax or an unknown zone fires nothing', () => {
    const versions: TimingVersion[] = [
      {
        version: 1,
        effectiveAt: at('1970-01-01T00:00:00Z'),
        schedule: '0 3 * * *',
        timezone: 'UTC',
      },
      {
        version: 2,
        effectiveAt: at('2027-01-01T00:00:00Z'),
        schedule: '0 4 * * *',
        timezone: 'Mars/Olympus',
      },
    ];
    expect(timingSegments(versions, 2).map((s) => s.schedule != null)).toEqual([true, false]);
  });
});

describe('the default switch instant', () => {
  it('daily 03:00 → 04:00: the old timing’s next fire, so that day runs once, at 04:00', () => {
    const e = defaultSwitchInstant(daily(3), daily(4), at('2027-03-01T12:10:00Z'));
    expect(e.toISOString()).toBe('2027-03-02T03:00:00.000Z');
    expect(switchAnomaly(daily(3), daily(4), e)).toBeNull();
  });

  it('daily 03:00 → 02:00: the new timing’s first fire, so that day runs once, at 02:00', () => {
    const e = defaultSwitchInstant(daily(3), daily(2), at('2027-03-01T12:10:00Z'));
    expect(e.toISOString()).toBe('2027-03-02T02:00:00.000Z');
    expect(switchAnomaly(daily(3), daily(2), e)).toBeNull();
  });

  it('every 10 s, second 0 → 5: the first instant of either at or after the settle', () => {
    const old = parseSchedule('*/10 * * * * *', 'UTC');
    const next = parseSchedule('5-59/10 * * * * *', 'UTC');
    expect(defaultSwitchInstant(old, next, at('2027-03-01T12:00:01Z')).toISOString()).toBe(
      '2027-03-01T12:00:05.000Z',
    );
    expect(defaultSwitchInstant(old, next, at('2027-03-01T12:00:00Z')).toISOString()).toBe(
      '2027-03-01T12:00:00.000Z',
    );
  });

  it('a first version: the new timing’s first fire', () => {
    expect(defaultSwitchInstant(null, daily(4), at('2027-03-01T12:10:00Z')).toISOString()).toBe(
      '2027-03-02T04:00:00.000Z',
    );
  });
});

describe('how a switch falls on its day', () => {
  it('03:00 → 04:00 at 03:30 runs twice that day; 03:00 → 02:00 at 02:30 skips it', () => {
    expect(switchAnomaly(daily(3), daily(4), at('2027-03-02T03:30:00Z'))).toMatchObject({
      kind: 'twice',
      day: '2027-03-02',
      oldCount: 1,
      newCount: 1,
    });
    const twice = switchAnomaly(daily(3), daily(4), at('2027-03-02T03:30:00Z'))!;
    expect(iso(twice.fires)).toEqual(['2027-03-02T03:00:00.000Z', '2027-03-02T04:00:00.000Z']);
    expect(switchAnomaly(daily(3), daily(2), at('2027-03-02T02:30:00Z'))).toMatchObject({
      kind: 'skipped',
      fires: [],
    });
    // At midnight the day is wholly the new timing's.
    expect(switchAnomaly(daily(3), daily(4), at('2027-03-02T00:00:00Z'))).toBeNull();
  });

  it('is judged in the new timing’s zone, across a DST change', () => {
    // 2027-03-14 is 23 hours long in New York (clocks go from 02:00 to 03:00).
    const day = dayAround('America/New_York', at('2027-03-14T12:00:00Z'));
    expect(day.day).toBe('2027-03-14');
    expect(day.end.getTime() - day.start.getTime()).toBe(23 * 3_600_000);
    const ny = (h: number) => daily(h, 'America/New_York');
    // 01:00 → 05:00 local switched at 03:30 local (07:30 UTC): 01:00 ran, 05:00 runs: twice.
    expect(switchAnomaly(ny(1), ny(5), at('2027-03-14T07:30:00Z'))?.kind).toBe('twice');
  });

  it('is not judged for a job that fires more than 48 times a day', () => {
    const old = parseSchedule('0 */10 * * * *', 'UTC');
    const next = parseSchedule('0 5-59/10 * * * *', 'UTC');
    expect(switchAnomaly(old, next, at('2027-03-02T03:01:00Z'))).toBeNull();
  });
});
