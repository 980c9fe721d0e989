/**
 * baton's fire times against an independent evaluator (test/helpers/cron-oracle.ts: brute force
 * over real instants, the documented rules, no croner): around every DST transition of 2027 in
 * zones of every kind, and over months for the day fields. On the code before issue 16's fix
 * (croner's own fixed-time rule and its OR of the day fields) the DST nights of New York,
 * Berlin, Lord Howe, Chatham, Sydney and Santiago and the `*\/2 … MON` case disagree.
 */
import { describe, expect, it } from 'vitest';
import { parseSchedule } from '../../src/schedule/cron.js';
import {
  FIVE_FIELD_EXPRESSIONS,
  firesWithin,
  oracleFires,
  transitions2027,
} from '../helpers/cron-oracle.js';

const HOUR = 3_600_000;

/** Five-field expressions: every field form, fixed-time and every-match. */
const EXPRESSIONS = FIVE_FIELD_EXPRESSIONS;
/** Six-field ones (seconds first), walked second by second over a shorter window. */
const WITH_SECONDS = [
  '30 30 2 * * *',
  '*/20 30 2 * * *',
  '0 */30 * * * *',
  '15,45 0-59/30 1 * * *',
];

/** One zone of each kind. */
const ZONES = [
  'UTC',
  'Asia/Seoul', // no DST
  'America/New_York', // one hour, both ways
  'Europe/Berlin',
  'Australia/Lord_Howe', // 30 minutes
  'Asia/Kolkata', // +05:30, no DST
  'Asia/Kathmandu', // +05:45, no DST
  'Pacific/Chatham', // +12:45 / +13:45
  'Australia/Sydney', // southern hemisphere
  'America/Santiago', // southern, transitions at midnight
];

/** The fires of both, as "expression: baton […] oracle […]" where they differ. */
function disagreements(expressions: string[], zone: string, windows: [Date, Date][]): string[] {
  const local = new Intl.DateTimeFormat('sv-SE', {
    timeZone: zone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    timeZoneName: 'shortOffset',
  });
  const show = (dates: Date[]) => dates.map((d) => local.format(d)).join(', ');
  const out: string[] = [];
  for (const expression of expressions) {
    for (const [from, to] of windows) {
      const baton = firesWithin(parseSchedule(expression, zone), from, to);
      const oracle = oracleFires(expression, zone, from, to);
      if (baton.map(Number).join() !== oracle.map(Number).join()) {
        out.push(`${expression} (${zone}): baton [${show(baton)}] oracle [${show(oracle)}]`);
      }
    }
  }
  return out;
}

describe('fire times agree with an independent cron(8) evaluator', () => {
  it.each(ZONES)('around every DST transition of 2027 in %s', (zone) => {
    const around = transitions2027(zone);
    const wide = around.map((t): [Date, Date] => [
      new Date(t - 14 * HOUR),
      new Date(t + 14 * HOUR),
    ]);
    const narrow = around.map((t): [Date, Date] => [
      new Date(t - 3 * HOUR),
      new Date(t + 3 * HOUR),
    ]);
    expect(disagreements(EXPRESSIONS, zone, wide)).toEqual([]);
    expect(disagreements(WITH_SECONDS, zone, narrow)).toEqual([]);
  });

  it.each(['UTC', 'America/New_York'])('over four months of day fields in %s', (zone) => {
    const months: [Date, Date][] = [
      [new Date('2027-01-01T00:00:00Z'), new Date('2027-05-01T00:00:00Z')],
    ];
    const dayFields = [
      '0 12 */2 * MON',
      '0 12 1,15 * MON',
      '0 12 1-7 * MON',
      '0 12 ? * MON',
      '0 12 1 * ?',
      '0 3 L * *',
      '0 3 LW * *',
      '0 3 15W * *',
      '0 3 1W * *',
      '0 3 * * 5L',
      '0 3 * * FRI#L',
      '0 3 * * MON#2',
      '0 3 * JAN-MAR/2 *',
      '0 3 * * 7',
      '@weekly',
      '@monthly',
    ];
    expect(disagreements(dayFields, zone, months)).toEqual([]);
  });

  it('finds the transitions it tests, and the oracle gives the hand-derived answers', () => {
    expect(transitions2027('America/New_York').map((t) => new Date(t).toISOString())).toEqual([
      '2027-03-14T07:00:00.000Z',
      '2027-11-07T06:00:00.000Z',
    ]);
    const fires = (e: string, z: string, from: string, to: string) =>
      oracleFires(e, z, new Date(from), new Date(to)).map((d) => d.toISOString());
    // 02:30 does not exist in New York on 2027-03-14: once at 03:00 −04:00.
    expect(
      fires('30 2 * * *', 'America/New_York', '2027-03-14T00:00Z', '2027-03-15T00:00Z'),
    ).toEqual(['2027-03-14T07:00:00.000Z']);
    // 02:30 happens twice in Berlin on 2027-10-31: once, at the first (+02:00).
    expect(fires('30 2 * * *', 'Europe/Berlin', '2027-10-30T22:00Z', '2027-10-31T12:00Z')).toEqual([
      '2027-10-31T00:30:00.000Z',
    ]);
    // Every-match: twice in the repeated hour, never in the skipped one.
    expect(fires('30 * * * *', 'Europe/Berlin', '2027-10-30T23:45Z', '2027-10-31T01:45Z')).toEqual([
      '2027-10-31T00:30:00.000Z',
      '2027-10-31T01:30:00.000Z',
    ]);
    expect(
      fires('*/15 2 * * *', 'America/New_York', '2027-03-14T00:00Z', '2027-03-15T00:00Z'),
    ).toEqual([]);
  });
});
