/**
 * Schedules beyond one cron expression (src/schedule/compound.ts, docs/schedules.md): lists,
 * anchored intervals, one-shot instants and bounds, against the independent evaluator
 * (test/helpers/cron-oracle.ts `oracleTimingFires`: the union of the cron oracle's fires, an
 * interval found by walking the seconds, the bounds as filters) around every DST transition of
 * 2027 in zones of every kind; and the text's refusals, each naming what is wrong.
 */
import { describe, expect, it } from 'vitest';
import { parseSchedule } from '../../src/schedule/cron.js';
import {
  FIVE_FIELD_EXPRESSIONS,
  firesWithin,
  oracleCalendarFires,
  oracleTimingFires,
  transitions2027,
} from '../helpers/cron-oracle.js';

const HOUR = 3_600_000;

const ZONES = [
  'UTC',
  'Asia/Seoul',
  'America/New_York',
  'Europe/Berlin',
  'Australia/Lord_Howe',
  'Asia/Kathmandu',
  'Pacific/Chatham',
  'America/Santiago',
];

/** Lists (each instant once where two expressions meet), intervals, instants, bounds. */
function timings(around: number): string[] {
  const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
  return [
    '0 2 * * * | 30 2 * * *',
    '30 2 * * * | 0 */2 * * *',
    '*/15 * * * * | 0 0-23/2 * * *',
    '0 3 * * SUN | 45 1 * * * | @daily',
    '@every 90m',
    '@every 45m anchor 2027-01-01T00:10:00Z',
    '@every 7m | 0 * * * *',
    '@every 1h | 30 2 * * *',
    `@at ${iso(around - 2 * HOUR)}, ${iso(around + HOUR)}, ${iso(around - 2 * HOUR)}`,
    `0 * * * * | @at ${iso(around + 30 * 60_000)}`,
    `*/30 * * * *; from ${iso(around - 3 * HOUR)}; until ${iso(around + 2 * HOUR)}`,
    `@every 20m; from ${iso(around - 5 * HOUR)}; max 9`,
    `0 2 * * * | @every 5h; from ${iso(around - 8 * HOUR)}; until ${iso(around + 6 * HOUR)}; max 4`,
  ];
}

/** More forms: weekdays, month days, twice a day, intervals with anchors off the hour. */
const MORE = [
  '0 9 * * 1-5',
  '0 18 * * MON-FRI',
  '0 4 1 * *',
  '0 0 1,15 * *',
  '*/5 * * * *',
  '10 * * * *',
  '0 6,18 * * *',
  '45 23 * * *',
  '0 2 * * 6,0',
  '@weekly',
  '@every 6h',
  '@every 2h anchor 2027-01-01T00:30:00Z',
  '0 1 * * * | 0 13 * * *',
  '@every 1d anchor 2027-01-01T02:30:00Z',
  '0 3 * * 2,4',
  '20 4,16 * * *',
  '0 */4 * * SAT',
];

/**
 * 50 timings: the cron oracle's five-field expressions, this file's compound ones (but those
 * counted with `max`, whose count the calendars change: judged by hand below), and MORE.
 */
function fiftyTimings(around: number): string[] {
  const compound = timings(around).filter((t) => !/;\s*max\b/.test(t));
  return [...FIVE_FIELD_EXPRESSIONS, ...compound, ...MORE].slice(0, 50);
}

/**
 * The calendars each timing is judged with around an instant `t`: its day skipped; the day
 * before and it, shifted to the next allowed day; it shifted to the previous one; a span of
 * instants over the transition skipped; only the day before and a span over the transition.
 */
function calendarsAround(t: number, zone: string): string[] {
  const day = (ms: number) =>
    new Intl.DateTimeFormat('en-CA', { timeZone: zone }).format(new Date(ms));
  const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
  const [before, today] = [day(t - 86_400_000), day(t)];
  return [
    `skip hol ${today}`,
    `skip hol ${before}..${today}; shift next`,
    `skip hol ${today}; shift previous`,
    // Onto the transition's own day: a wall time its clocks skip is the moment they jump.
    `skip hol ${before}; shift next`,
    `skip freeze ${iso(t - 2 * HOUR)}/${iso(t + HOUR)}`,
    `only open ${before} ${iso(t - 2 * HOUR)}/${iso(t + 3 * HOUR)}`,
  ];
}

describe('calendars agree with the independent evaluator', () => {
  it.each(ZONES)(
    '50 timings around every DST transition of 2027 in %s, with and without calendars',
    (zone) => {
      const wrong: string[] = [];
      let judged = 0;
      for (const t of transitions2027(zone)) {
        const [from, to] = [new Date(t - 10 * HOUR), new Date(t + 10 * HOUR)];
        const all = fiftyTimings(t);
        expect(all).toHaveLength(50);
        for (const text of all) {
          for (const calendar of ['', ...calendarsAround(t, zone)]) {
            const line = calendar ? `${text}; ${calendar}` : text;
            const baton = firesWithin(parseSchedule(line, zone), from, to).map((d) =>
              d.toISOString(),
            );
            const oracle = (
              calendar
                ? oracleCalendarFires(line, zone, from, to)
                : oracleTimingFires(line, zone, from, to)
            ).map((d) => d.toISOString());
            judged++;
            if (baton.join() !== oracle.join()) {
              wrong.push(
                `${line} (${zone}):\n  baton  ${baton.join(' ')}\n  oracle ${oracle.join(' ')}`,
              );
            }
          }
        }
      }
      expect(wrong.slice(0, 5)).toEqual([]);
      expect(judged).toBeGreaterThanOrEqual(50 * 7);
    },
  );
});

describe('lists, intervals, instants and bounds agree with the independent evaluator', () => {
  it.each(ZONES)('around every DST transition of 2027 in %s', (zone) => {
    const wrong: string[] = [];
    for (const t of transitions2027(zone)) {
      const [from, to] = [new Date(t - 10 * HOUR), new Date(t + 10 * HOUR)];
      for (const text of timings(t)) {
        const baton = firesWithin(parseSchedule(text, zone), from, to).map((d) => d.toISOString());
        const oracle = oracleTimingFires(text, zone, from, to).map((d) => d.toISOString());
        if (baton.join() !== oracle.join()) {
          wrong.push(
            `${text} (${zone}):\n  baton  ${baton.join(' ')}\n  oracle ${oracle.join(' ')}`,
          );
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('gives the hand-derived answers', () => {
    const fires = (text: string, zone: string, from: string, count: number) =>
      parseSchedule(text, zone)
        .nextN(count, new Date(from))
        .map((d) => d.toISOString());
    // An interval is UTC arithmetic from its anchor: no DST effect, 25 fires on New York's
    // 25-hour night by the wall clock, every one an hour apart.
    expect(fires('@every 1h', 'America/New_York', '2027-11-07T04:30:00Z', 3)).toEqual([
      '2027-11-07T05:00:00.000Z',
      '2027-11-07T06:00:00.000Z',
      '2027-11-07T07:00:00.000Z',
    ]);
    expect(fires('@every 90m anchor 2027-01-01T00:00Z', 'UTC', '2027-01-01T00:00:00Z', 3)).toEqual([
      '2027-01-01T01:30:00.000Z',
      '2027-01-01T03:00:00.000Z',
      '2027-01-01T04:30:00.000Z',
    ]);
    // The same instant from two expressions is one fire.
    expect(fires('0 3 * * * | 0 */3 * * *', 'UTC', '2027-01-01T02:00:00Z', 2)).toEqual([
      '2027-01-01T03:00:00.000Z',
      '2027-01-01T06:00:00.000Z',
    ]);
    // A one-shot job: its instant, then nothing.
    const once = parseSchedule('@at 2027-01-01T03:00:00+09:00', 'Asia/Seoul');
    expect(once.nextAfter(new Date('2026-12-31T00:00:00Z'))?.toISOString()).toBe(
      '2026-12-31T18:00:00.000Z',
    );
    expect(once.nextAfter(new Date('2026-12-31T18:00:00Z'))).toBeNull();
    // max counts from `from`, whatever instant it is asked after; until is inclusive.
    expect(fires('0 * * * *; from 2027-01-01; max 3', 'UTC', '2027-01-01T01:30:00Z', 5)).toEqual([
      '2027-01-01T02:00:00.000Z',
    ]);
    expect(fires('0 * * * *; until 2027-01-01T02:00Z', 'UTC', '2027-01-01T00:30:00Z', 5)).toEqual([
      '2027-01-01T01:00:00.000Z',
      '2027-01-01T02:00:00.000Z',
    ]);
  });

  it('refuses what it cannot read, naming it', () => {
    const refusal = (text: string) => {
      try {
        parseSchedule(text, 'UTC');
      } catch (err) {
        return (err as Error).message;
      }
      return 'accepted';
    };
    expect(refusal('@every 90')).toMatch(/period must be whole seconds/);
    expect(refusal('@every 1500ms')).toMatch(/period must be whole seconds/);
    expect(refusal('@every')).toMatch(/write @every <period>/);
    expect(refusal('@every 1h anchor tomorrow')).toMatch(/anchor "tomorrow" is not an instant/);
    expect(refusal('@at 2027-01-01T03:00')).toMatch(/@at "2027-01-01T03:00" is not an instant/);
    expect(refusal('@at 2027-01-01T03:00:00.500Z')).toMatch(/whole seconds/);
    expect(refusal('0 3 * * * |')).toMatch(/empty schedule/);
    expect(refusal('0 3 * * *; max 3')).toMatch(/max needs from/);
    expect(refusal('0 3 * * *; from 2027-01-01; from 2027-02-01')).toMatch(/says from twice/);
    expect(refusal('0 3 * * *; until 2027-01-01; from 2027-02-01')).toMatch(/until is before from/);
    expect(refusal('0 3 * * *; every day')).toMatch(/is not a bound/);
    expect(refusal('0 3 * * *; max 0; from 2027-01-01')).toMatch(/whole number from 1/);
    // A part that never fires is refused as alone.
    expect(refusal('0 3 * * * | 0 0 31 2 *')).toMatch(/"0 0 31 2 \*" never fires/);
    expect(refusal('0 3 * * * | --help')).toMatch(/invalid cron expression "--help"/);
  });
});
