/**
 * The daylight-saving rule of docs/schedules.md, checked on the real 2027 transitions of
 * America/New_York and Europe/Berlin:
 *
 * - a fixed-time fire (none of second, minute and hour starts with `*`) whose wall-clock time falls in
 *   the skipped hour runs once, at the first instant after the gap (the moment the clocks jump);
 * - a fixed-time fire whose wall-clock time occurs twice runs once, at its first occurrence;
 * - any other expression fires at every instant whose wall clock matches: none in the skipped
 *   hour, each match twice in the repeated hour (they are distinct instants, an hour apart).
 *
 * Fires are listed the way the daemon walks them (nextAfter from the previous fire), and the same
 * computation in child processes with another TZ must give the same instants: the fire key
 * (namespace, job, scheduled_at) may not depend on the host.
 */
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatLocal } from '../../src/cli/times.js';
import { parseSchedule } from '../../src/schedule/cron.js';
import { ROOT } from '../helpers/cli.js';

const NY = 'America/New_York';
const BERLIN = 'Europe/Berlin';

/** Every fire in [from, to), walked like the daemon does: each from the one before. */
function fires(expression: string, timezone: string, from: string, to: string): Date[] {
  const schedule = parseSchedule(expression, timezone);
  const end = new Date(to).getTime();
  const out: Date[] = [];
  let at = schedule.nextAfter(new Date(new Date(from).getTime() - 1));
  while (at != null && at.getTime() < end) {
    out.push(at);
    at = schedule.nextAfter(at);
  }
  return out;
}

/** "UTC instant = local wall clock with offset", the form docs/schedules.md tabulates. */
function shown(expression: string, timezone: string, from: string, to: string): string[] {
  return fires(expression, timezone, from, to).map(
    (d) => `${d.toISOString()} = ${formatLocal(d, timezone)}`,
  );
}

/** Local calendar day → number of fires that day. */
function perLocalDay(dates: Date[], timezone: string): Record<string, number> {
  const days: Record<string, number> = {};
  for (const d of dates) {
    const day = formatLocal(d, timezone).slice(0, 10);
    days[day] = (days[day] ?? 0) + 1;
  }
  return days;
}

// Local days of the transitions, as UTC instants: [local midnight, next local midnight).
const NY_SPRING = ['2027-03-14T05:00:00Z', '2027-03-15T04:00:00Z'] as const; // 23 h
const NY_FALL = ['2027-11-07T04:00:00Z', '2027-11-08T05:00:00Z'] as const; // 25 h
const BERLIN_SPRING = ['2027-03-27T23:00:00Z', '2027-03-28T22:00:00Z'] as const; // 23 h
const BERLIN_FALL = ['2027-10-30T22:00:00Z', '2027-10-31T23:00:00Z'] as const; // 25 h

describe('America/New_York, 2027-03-14: 02:00 EST jumps to 03:00 EDT', () => {
  it('runs a daily 02:30 job once, at 03:00 EDT, the first instant after the gap', () => {
    expect(shown('30 2 * * *', NY, '2027-03-13T00:00:00Z', '2027-03-16T00:00:00Z')).toEqual([
      '2027-03-13T07:30:00.000Z = 2027-03-13T02:30:00-05:00',
      '2027-03-14T07:00:00.000Z = 2027-03-14T03:00:00-04:00',
      '2027-03-15T06:30:00.000Z = 2027-03-15T02:30:00-04:00',
    ]);
  });

  it('runs jobs at the edges of the gap at their own times', () => {
    expect(shown('0 2 * * *', NY, ...NY_SPRING)).toEqual([
      '2027-03-14T07:00:00.000Z = 2027-03-14T03:00:00-04:00',
    ]);
    expect(shown('59 1 * * *', NY, ...NY_SPRING)).toEqual([
      '2027-03-14T06:59:00.000Z = 2027-03-14T01:59:00-05:00',
    ]);
    // 02:30 and 03:00 jobs then share an instant: two jobs, two fire keys, one run each.
    expect(shown('0 3 * * *', NY, ...NY_SPRING)).toEqual([
      '2027-03-14T07:00:00.000Z = 2027-03-14T03:00:00-04:00',
    ]);
  });

  it('fires hourly and */30 jobs at every wall-clock match that exists (none in the gap)', () => {
    const hourly = shown('0 * * * *', NY, ...NY_SPRING);
    expect(hourly).toHaveLength(23);
    expect(hourly.slice(1, 3)).toEqual([
      '2027-03-14T06:00:00.000Z = 2027-03-14T01:00:00-05:00',
      '2027-03-14T07:00:00.000Z = 2027-03-14T03:00:00-04:00',
    ]);
    const halfHourly = shown('*/30 * * * *', NY, ...NY_SPRING);
    expect(halfHourly).toHaveLength(46);
    expect(halfHourly.slice(2, 5)).toEqual([
      '2027-03-14T06:00:00.000Z = 2027-03-14T01:00:00-05:00',
      '2027-03-14T06:30:00.000Z = 2027-03-14T01:30:00-05:00',
      '2027-03-14T07:00:00.000Z = 2027-03-14T03:00:00-04:00',
    ]);
  });
});

describe('America/New_York, 2027-11-07: 02:00 EDT falls back to 01:00 EST', () => {
  it('runs a daily 01:30 job once, at its first occurrence (01:30 EDT)', () => {
    expect(shown('30 1 * * *', NY, '2027-11-06T00:00:00Z', '2027-11-09T00:00:00Z')).toEqual([
      '2027-11-06T05:30:00.000Z = 2027-11-06T01:30:00-04:00',
      '2027-11-07T05:30:00.000Z = 2027-11-07T01:30:00-04:00',
      '2027-11-08T06:30:00.000Z = 2027-11-08T01:30:00-05:00',
    ]);
  });

  it('runs jobs at the edges of the repeated hour once', () => {
    expect(shown('0 1 * * *', NY, ...NY_FALL)).toEqual([
      '2027-11-07T05:00:00.000Z = 2027-11-07T01:00:00-04:00',
    ]);
    expect(shown('59 1 * * *', NY, ...NY_FALL)).toEqual([
      '2027-11-07T05:59:00.000Z = 2027-11-07T01:59:00-04:00',
    ]);
    expect(shown('0 2 * * *', NY, ...NY_FALL)).toEqual([
      '2027-11-07T07:00:00.000Z = 2027-11-07T02:00:00-05:00',
    ]);
  });

  it('fires hourly and */30 jobs at both occurrences of the repeated hour', () => {
    const hourly = shown('0 * * * *', NY, ...NY_FALL);
    expect(hourly).toHaveLength(25);
    expect(hourly.slice(1, 3)).toEqual([
      '2027-11-07T05:00:00.000Z = 2027-11-07T01:00:00-04:00',
      '2027-11-07T06:00:00.000Z = 2027-11-07T01:00:00-05:00',
    ]);
    const halfHourly = shown('*/30 * * * *', NY, ...NY_FALL);
    expect(halfHourly).toHaveLength(50);
    expect(halfHourly.slice(2, 7)).toEqual([
      '2027-11-07T05:00:00.000Z = 2027-11-07T01:00:00-04:00',
      '2027-11-07T05:30:00.000Z = 2027-11-07T01:30:00-04:00',
      '2027-11-07T06:00:00.000Z = 2027-11-07T01:00:00-05:00',
      '2027-11-07T06:30:00.000Z = 2027-11-07T01:30:00-05:00',
      '2027-11-07T07:00:00.000Z = 2027-11-07T02:00:00-05:00',
    ]);
  });

  it('does not run a fixed-time job again when a runner starts inside the repeated hour', () => {
    // 01:15 EST, after 01:30 EDT has fired: the next 01:30 is the next day's.
    const schedule = parseSchedule('30 1 * * *', NY);
    expect(schedule.nextAfter(new Date('2027-11-07T06:15:00Z'))).toEqual(
      new Date('2027-11-08T06:30:00Z'),
    );
    // A */30 job started at 01:45 EDT still gets both halves of the EST hour.
    expect(
      parseSchedule('*/30 * * * *', NY)
        .nextN(2, new Date('2027-11-07T05:45:00Z'))
        .map((d) => d.toISOString()),
    ).toEqual(['2027-11-07T06:00:00.000Z', '2027-11-07T06:30:00.000Z']);
  });
});

describe('Europe/Berlin, 2027-03-28: 02:00 CET jumps to 03:00 CEST', () => {
  it('runs a daily 02:30 job once, at 03:00 CEST', () => {
    expect(shown('30 2 * * *', BERLIN, '2027-03-27T00:00:00Z', '2027-03-30T00:00:00Z')).toEqual([
      '2027-03-27T01:30:00.000Z = 2027-03-27T02:30:00+01:00',
      '2027-03-28T01:00:00.000Z = 2027-03-28T03:00:00+02:00',
      '2027-03-29T00:30:00.000Z = 2027-03-29T02:30:00+02:00',
    ]);
  });

  it('runs jobs at the edges of the gap at their own times', () => {
    expect(shown('59 1 * * *', BERLIN, ...BERLIN_SPRING)).toEqual([
      '2027-03-28T00:59:00.000Z = 2027-03-28T01:59:00+01:00',
    ]);
    expect(shown('0 3 * * *', BERLIN, ...BERLIN_SPRING)).toEqual([
      '2027-03-28T01:00:00.000Z = 2027-03-28T03:00:00+02:00',
    ]);
  });

  it('fires hourly and */30 jobs at every wall-clock match that exists', () => {
    const hourly = shown('0 * * * *', BERLIN, ...BERLIN_SPRING);
    expect(hourly).toHaveLength(23);
    expect(hourly.slice(1, 3)).toEqual([
      '2027-03-28T00:00:00.000Z = 2027-03-28T01:00:00+01:00',
      '2027-03-28T01:00:00.000Z = 2027-03-28T03:00:00+02:00',
    ]);
    const halfHourly = shown('*/30 * * * *', BERLIN, ...BERLIN_SPRING);
    expect(halfHourly).toHaveLength(46);
    expect(halfHourly.slice(3, 5)).toEqual([
      '2027-03-28T00:30:00.000Z = 2027-03-28T01:30:00+01:00',
      '2027-03-28T01:00:00.000Z = 2027-03-28T03:00:00+02:00',
    ]);
  });
});

describe('Europe/Berlin, 2027-10-31: 03:00 CEST falls back to 02:00 CET', () => {
  it('runs a daily 02:30 job once, at its first occurrence (02:30 CEST)', () => {
    expect(shown('30 2 * * *', BERLIN, '2027-10-30T00:00:00Z', '2027-11-02T00:00:00Z')).toEqual([
      '2027-10-30T00:30:00.000Z = 2027-10-30T02:30:00+02:00',
      '2027-10-31T00:30:00.000Z = 2027-10-31T02:30:00+02:00',
      '2027-11-01T01:30:00.000Z = 2027-11-01T02:30:00+01:00',
    ]);
  });

  it('runs jobs at the edges of the repeated hour once', () => {
    expect(shown('0 2 * * *', BERLIN, ...BERLIN_FALL)).toEqual([
      '2027-10-31T00:00:00.000Z = 2027-10-31T02:00:00+02:00',
    ]);
    expect(shown('59 1 * * *', BERLIN, ...BERLIN_FALL)).toEqual([
      '2027-10-30T23:59:00.000Z = 2027-10-31T01:59:00+02:00',
    ]);
    expect(shown('0 3 * * *', BERLIN, ...BERLIN_FALL)).toEqual([
      '2027-10-31T02:00:00.000Z = 2027-10-31T03:00:00+01:00',
    ]);
  });

  it('fires hourly and */30 jobs at both occurrences of the repeated hour', () => {
    const hourly = shown('0 * * * *', BERLIN, ...BERLIN_FALL);
    expect(hourly).toHaveLength(25);
    expect(hourly.slice(2, 4)).toEqual([
      '2027-10-31T00:00:00.000Z = 2027-10-31T02:00:00+02:00',
      '2027-10-31T01:00:00.000Z = 2027-10-31T02:00:00+01:00',
    ]);
    const halfHourly = shown('*/30 * * * *', BERLIN, ...BERLIN_FALL);
    expect(halfHourly).toHaveLength(50);
    expect(halfHourly.slice(4, 8)).toEqual([
      '2027-10-31T00:00:00.000Z = 2027-10-31T02:00:00+02:00',
      '2027-10-31T00:30:00.000Z = 2027-10-31T02:30:00+02:00',
      '2027-10-31T01:00:00.000Z = 2027-10-31T02:00:00+01:00',
      '2027-10-31T01:30:00.000Z = 2027-10-31T02:30:00+01:00',
    ]);
  });
});

describe('daily jobs across both transitions', () => {
  const windows: [string, string, string][] = [
    [NY, '2027-03-11T05:00:00Z', '2027-03-18T04:00:00Z'],
    [NY, '2027-11-04T04:00:00Z', '2027-11-11T05:00:00Z'],
    [BERLIN, '2027-03-24T23:00:00Z', '2027-03-31T22:00:00Z'],
    [BERLIN, '2027-10-27T22:00:00Z', '2027-11-03T23:00:00Z'],
  ];
  const daily = ['0 0 * * *', '59 1 * * *', '0 2 * * *', '30 2 * * *', '59 2 * * *', '0 3 * * *'];

  it.each(windows)('fire exactly once per local day in %s (%s to %s)', (tz, from, to) => {
    for (const expression of daily) {
      const days = perLocalDay(fires(expression, tz, from, to), tz);
      expect({ expression, days: Object.keys(days).length }).toEqual({ expression, days: 7 });
      expect(new Set(Object.values(days))).toEqual(new Set([1]));
    }
  });
});

describe('less common forms on a transition day', () => {
  it('moves a fire with seconds in the gap to the transition instant itself (03:00:00)', () => {
    expect(shown('30 30 2 * * *', NY, ...NY_SPRING)).toEqual([
      '2027-03-14T07:00:00.000Z = 2027-03-14T03:00:00-04:00',
    ]);
    expect(shown('30 30 1 * * *', NY, ...NY_FALL)).toEqual([
      '2027-11-07T05:30:30.000Z = 2027-11-07T01:30:30-04:00',
    ]);
  });

  it('treats a weekly or a dated job like a daily one on the transition day', () => {
    expect(shown('30 2 * * 0', BERLIN, '2027-03-20T00:00:00Z', '2027-04-01T00:00:00Z')).toEqual([
      '2027-03-21T01:30:00.000Z = 2027-03-21T02:30:00+01:00',
      '2027-03-28T01:00:00.000Z = 2027-03-28T03:00:00+02:00',
    ]);
    expect(shown('30 1 7 11 *', NY, '2027-11-01T00:00:00Z', '2027-11-10T00:00:00Z')).toEqual([
      '2027-11-07T05:30:00.000Z = 2027-11-07T01:30:00-04:00',
    ]);
  });

  it('reads @daily as 0 0 * * * (midnight exists on these days)', () => {
    expect(shown('@daily', NY, ...NY_SPRING)).toEqual([
      '2027-03-14T05:00:00.000Z = 2027-03-14T00:00:00-05:00',
    ]);
  });

  // Lists and ranges are fixed times too (Vixie cron: only a field starting with `*` is not;
  // baton's isFixedTime, see docs/schedules.md). Steps from `*` are every-match.
  it('runs a list of minutes in the gap once, and skips a stepped minute there', () => {
    expect(shown('0,30 2 * * *', NY, ...NY_SPRING)).toEqual([
      '2027-03-14T07:00:00.000Z = 2027-03-14T03:00:00-04:00',
    ]);
    expect(shown('*/15 2 * * *', NY, ...NY_SPRING)).toEqual([]);
  });

  it('runs a list or a range of hours once in the repeated hour, on its first occurrence', () => {
    expect(shown('30 1,13 * * *', NY, ...NY_FALL)).toEqual([
      '2027-11-07T05:30:00.000Z = 2027-11-07T01:30:00-04:00',
      '2027-11-07T18:30:00.000Z = 2027-11-07T13:30:00-05:00',
    ]);
    expect(shown('0 1-2 * * *', BERLIN, ...BERLIN_FALL)).toEqual([
      '2027-10-30T23:00:00.000Z = 2027-10-31T01:00:00+02:00',
      '2027-10-31T00:00:00.000Z = 2027-10-31T02:00:00+02:00',
    ]);
  });
});

describe('independence from the host time zone', () => {
  // Each case: the fires of one expression over a week around a transition.
  const cases: [string, string, string, string][] = [
    ['30 2 * * *', NY, '2027-03-11T00:00:00Z', '2027-03-18T00:00:00Z'],
    ['30 1 * * *', NY, '2027-11-04T00:00:00Z', '2027-11-11T00:00:00Z'],
    ['*/30 * * * *', NY, ...NY_FALL],
    ['0 * * * *', NY, ...NY_SPRING],
    ['30 2 * * *', BERLIN, '2027-03-25T00:00:00Z', '2027-04-01T00:00:00Z'],
    ['30 2 * * *', BERLIN, '2027-10-28T00:00:00Z', '2027-11-04T00:00:00Z'],
    ['*/30 * * * *', BERLIN, ...BERLIN_FALL],
  ];

  /** The same walk as fires(), in a child process whose TZ is `hostTz`. */
  function inChild(hostTz: string): { offset: number; fires: string[][] } {
    const cron = pathToFileURL(`${ROOT}src/schedule/cron.ts`).href;
    const script = `
      const { parseSchedule } = await import(${JSON.stringify(cron)});
      const cases = JSON.parse(process.env.DST_CASES);
      const fires = cases.map(([expression, timezone, from, to]) => {
        const s = parseSchedule(expression, timezone);
        const out = [];
        let at = s.nextAfter(new Date(new Date(from).getTime() - 1));
        while (at != null && at.getTime() < new Date(to).getTime()) {
          out.push(at.toISOString());
          at = s.nextAfter(at);
        }
        return out;
      });
      // The host offset proves TZ took effect in the child.
      const offset = new Date('2027-01-01').getTimezoneOffset();
      process.stdout.write(JSON.stringify({ offset, fires }));
    `;
    const child = spawnSync(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: ROOT, env: { ...process.env, TZ: hostTz, DST_CASES: JSON.stringify(cases) } },
    );
    expect(child.stderr.toString()).toBe('');
    expect(child.status).toBe(0);
    return JSON.parse(child.stdout.toString()) as { offset: number; fires: string[][] };
  }

  it('computes the same instants under TZ=Asia/Seoul and TZ=America/Los_Angeles', () => {
    const here = cases.map(([e, tz, from, to]) =>
      fires(e, tz, from, to).map((d) => d.toISOString()),
    );
    const seoul = inChild('Asia/Seoul');
    const losAngeles = inChild('America/Los_Angeles');
    expect(seoul.offset).toBe(-540);
    expect(losAngeles.offset).toBe(480);
    expect(seoul.fires).toEqual(here);
    expect(losAngeles.fires).toEqual(here);
    // Not vacuous: a daily job has 7 fires in its week, the */30 ones 50.
    expect(here.map((f) => f.length)).toEqual([7, 7, 50, 23, 7, 7, 50]);
  });
});
