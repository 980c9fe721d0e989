/**
 * The fixed-time rule as docs/schedules.md states it (Vixie cron, cron(8)): an expression is
 * fixed-time when none of its second, minute and hour fields *starts* with `*`. Steps over a range
 * and lists holding a step are fixed times too. The expected instants are derived by hand from
 * that rule and the zones' transitions, not from croner: croner's own `no-wildcard` rule counted
 * any field containing `*` or `/` as every-match and gave other answers for every case here.
 */
import { describe, expect, it } from 'vitest';
import { isFixedTime, parseSchedule } from '../../src/schedule/cron.js';

function fires(expression: string, zone: string, from: string, count: number): string[] {
  return parseSchedule(expression, zone)
    .nextN(count, new Date(new Date(from).getTime() - 1))
    .map((at) => at.toISOString().replace('.000Z', 'Z'));
}

describe('the fixed-time rule on DST nights', () => {
  it.each([
    // 00:00 −05, then 02:00 does not exist → 03:00 −04 (07:00Z), then 04:00 −04.
    [
      'a step over a range moves into the end of a skipped hour (New York, 2027-03-14)',
      '0 0-23/2 * * *',
      'America/New_York',
      '2027-03-14T04:00:00Z',
      ['2027-03-14T05:00:00Z', '2027-03-14T07:00:00Z', '2027-03-14T08:00:00Z'],
    ],
    // 02:23 +02 (00:23Z), not again at 02:23 +01 (01:23Z); next 04:23 +01 (03:23Z).
    [
      "crontab(5)'s `23 0-23/2 * * *` runs once in a repeated hour (Berlin, 2027-10-31)",
      '23 0-23/2 * * *',
      'Europe/Berlin',
      '2027-10-30T23:00:00Z',
      ['2027-10-31T00:23:00Z', '2027-10-31T03:23:00Z'],
    ],
    [
      'a minute series over a range runs once in the repeated hour (Berlin)',
      '5-50/10 2 * * *',
      'Europe/Berlin',
      '2027-10-30T23:00:00Z',
      [
        '2027-10-31T00:05:00Z',
        '2027-10-31T00:15:00Z',
        '2027-10-31T00:25:00Z',
        '2027-10-31T00:35:00Z',
        '2027-10-31T00:45:00Z',
        '2027-11-01T01:05:00Z',
      ],
    ],
    // Every 02:xx of 2027-03-14 is skipped in New York: all move to 03:00 −04, one fire.
    [
      'a minute series over a range runs once after a gap (New York)',
      '5-50/10 2 * * *',
      'America/New_York',
      '2027-03-14T05:00:00Z',
      ['2027-03-14T07:00:00Z', '2027-03-15T06:05:00Z'],
    ],
    [
      'a list holding a step (`2,*/12`) is fixed: it starts with 2',
      '0 2,*/12 * * *',
      'America/New_York',
      '2027-03-14T04:00:00Z',
      ['2027-03-14T05:00:00Z', '2027-03-14T07:00:00Z', '2027-03-14T16:00:00Z'],
    ],
    // 01:00 and 01:30 happen twice in New York on 2027-11-07: each occurrence fires.
    [
      'an expression starting with `*` fires at each occurrence of a repeated hour',
      '*/30 * * * *',
      'America/New_York',
      '2027-11-07T05:00:00Z',
      [
        '2027-11-07T05:00:00Z',
        '2027-11-07T05:30:00Z',
        '2027-11-07T06:00:00Z',
        '2027-11-07T06:30:00Z',
      ],
    ],
    [
      'an expression starting with `*` does not fire in a skipped hour',
      '*/15 2 * * *',
      'America/New_York',
      '2027-03-14T05:00:00Z',
      ['2027-03-15T06:00:00Z'],
    ],
  ])('%s', (_what, expression, zone, from, expected) => {
    expect(fires(expression, zone, from, expected.length)).toEqual(expected);
  });

  it('classifies by the first character of each time field', () => {
    expect(isFixedTime('0 0-23/2 * * *')).toBe(true);
    expect(isFixedTime('0 2,*/12 * * *')).toBe(true);
    expect(isFixedTime('15 30 4 1 * *')).toBe(true);
    expect(isFixedTime('@daily')).toBe(true);
    expect(isFixedTime('*/30 * * * *')).toBe(false);
    expect(isFixedTime('0 * * * *')).toBe(false);
    expect(isFixedTime('*/10 0 2 * * *')).toBe(false);
    expect(isFixedTime('@hourly')).toBe(false);
  });
});

describe('an invalid value is named as written', () => {
  it.each([
    ['0 0 32 * *', 'day-of-month: 32'],
    ['0 0 0 * *', 'day-of-month: 0'],
    ['0 0 * 13 *', 'month: 13'],
    ['0 0 * 0 *', 'month: 0'],
  ])('%s', (expression, named) => {
    expect(() => parseSchedule(expression, 'UTC')).toThrow(`invalid value for ${named}`);
  });
});
