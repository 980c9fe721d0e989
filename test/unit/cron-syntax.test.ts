/**
 * What baton accepts in an expression and what it means, as docs/schedules.md lists it: the day
 * fields combined by cron's rule, croner's extensions that baton documents (`L`, `W`, `#`, the
 * nicknames) and the ones it refuses (`?` outside the day fields, `+` before day-of-week). The
 * answers are derived by hand from the 2027 calendar (1 January 2027 is a Friday), not from
 * croner.
 */
import { describe, expect, it } from 'vitest';
import { daysMatchBoth, parseSchedule } from '../../src/schedule/cron.js';

/** The first `count` fires at or after `from`, in UTC, to the minute. */
function fires(expression: string, count: number, from = '2027-01-01T00:00:00Z'): string[] {
  return parseSchedule(expression, 'UTC')
    .nextN(count, new Date(new Date(from).getTime() - 1))
    .map((at) => at.toISOString().slice(0, 16));
}

describe('day-of-month with day-of-week (Vixie cron, crontab(5))', () => {
  it.each([
    // Both restricted (neither starts with `*`): either matches — the 1st, the 15th, Mondays.
    [
      '0 12 1,15 * MON',
      ['2027-01-01T12:00', '2027-01-04T12:00', '2027-01-11T12:00', '2027-01-15T12:00'],
    ],
    // Also for a range: "1-7 and Monday" is not "the first Monday" (that is `MON#1`).
    [
      '0 12 1-7 * MON',
      [
        '2027-01-01T12:00',
        '2027-01-02T12:00',
        '2027-01-03T12:00',
        '2027-01-04T12:00',
        '2027-01-05T12:00',
        '2027-01-06T12:00',
        '2027-01-07T12:00',
        '2027-01-11T12:00',
      ],
    ],
    // `*/2` starts with `*`: both must match — Mondays that are odd days (4 and 18 are even).
    [
      '0 12 */2 * MON',
      ['2027-01-11T12:00', '2027-01-25T12:00', '2027-02-01T12:00', '2027-02-15T12:00'],
    ],
    // `?` means `*` in the day fields: Mondays only, and the 1st only.
    ['0 12 ? * MON', ['2027-01-04T12:00', '2027-01-11T12:00']],
    ['0 12 1 * ?', ['2027-01-01T12:00', '2027-02-01T12:00']],
    // Names in ranges and a step over month names, with a day-of-month of `*`: weekdays of
    // January and March.
    ['0 3 * JAN-MAR/2 MON-FRI', ['2027-01-29T03:00', '2027-03-01T03:00'], '2027-01-29T00:00:00Z'],
    // 7 is Sunday, as 0 is.
    ['0 3 * * 7', ['2027-01-03T03:00', '2027-01-10T03:00']],
  ] as [string, string[], string?][])('%s', (expression, expected, from) => {
    expect(fires(expression, expected.length, from)).toEqual(expected);
  });

  it('decides AND or OR from the first character of each day field', () => {
    expect(daysMatchBoth('0 12 1,15 * MON')).toBe(false);
    expect(daysMatchBoth('0 12 */2 * MON')).toBe(true);
    expect(daysMatchBoth('0 12 1 * *')).toBe(true);
    expect(daysMatchBoth('0 0 12 1-7 * MON')).toBe(false);
    expect(daysMatchBoth('@weekly')).toBe(true);
  });
});

describe('the extensions baton documents', () => {
  it.each([
    // L: the last day of the month.
    ['0 3 L * *', ['2027-01-31T03:00', '2027-02-28T03:00', '2027-03-31T03:00']],
    // LW: the last weekday of the month (31 January and 28 February 2027 are Sundays).
    ['0 3 LW * *', ['2027-01-29T03:00', '2027-02-26T03:00', '2027-03-31T03:00']],
    // 15W: the weekday nearest the 15th (15 May is a Saturday, 15 August a Sunday).
    [
      '0 3 15W * *',
      ['2027-05-14T03:00', '2027-06-15T03:00', '2027-07-15T03:00', '2027-08-16T03:00'],
      '2027-05-01T00:00:00Z',
    ],
    // 1W never leaves the month: 1 May 2027 is a Saturday, so Monday the 3rd.
    ['0 3 1W * *', ['2027-05-03T03:00', '2027-06-01T03:00'], '2027-05-01T00:00:00Z'],
    // 5L and FRI#L: the last Friday; MON#1: the first Monday.
    ['0 3 * * 5L', ['2027-01-29T03:00', '2027-02-26T03:00', '2027-03-26T03:00']],
    ['0 3 * * FRI#L', ['2027-01-29T03:00', '2027-02-26T03:00', '2027-03-26T03:00']],
    [
      '0 12 * * MON#1',
      ['2027-01-04T12:00', '2027-02-01T12:00', '2027-03-01T12:00', '2027-04-05T12:00'],
    ],
    // The nicknames of cron(8).
    ['@yearly', ['2027-01-01T00:00', '2028-01-01T00:00']],
    ['@annually', ['2027-01-01T00:00', '2028-01-01T00:00']],
    ['@monthly', ['2027-01-01T00:00', '2027-02-01T00:00']],
    ['@weekly', ['2027-01-03T00:00', '2027-01-10T00:00']],
    ['@daily', ['2027-01-01T00:00', '2027-01-02T00:00']],
    ['@midnight', ['2027-01-01T00:00', '2027-01-02T00:00']],
    ['@hourly', ['2027-01-01T00:00', '2027-01-01T01:00']],
  ] as [string, string[], string?][])('%s', (expression, expected, from) => {
    expect(fires(expression, expected.length, from)).toEqual(expected);
  });
});

describe('the syntax baton refuses, naming what to write instead', () => {
  it.each([
    ['? 3 * * *', '`?` is only for day-of-month and day-of-week; write `*` in the minute field'],
    ['0 ? * * *', 'write `*` in the hour field'],
    ['0 3 * ? *', 'write `*` in the month field'],
    ['? 0 3 * * *', 'write `*` in the second field'],
    ['0 3 1 * +MON', '`+` in day-of-week is not cron syntax'],
    ['0 3 * * MON#6', 'nth weekday out of range'],
    ['@reboot', '@reboot is not supported'],
  ])('%s', (expression, message) => {
    expect(() => parseSchedule(expression, 'UTC')).toThrow(
      `invalid cron expression "${expression}": `,
    );
    expect(() => parseSchedule(expression, 'UTC')).toThrow(message);
  });
});
