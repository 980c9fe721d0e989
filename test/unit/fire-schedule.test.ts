import { Cron } from 'croner';
import { describe, expect, it, vi } from 'vitest';
import {
  FireSchedule,
  LATE_TOLERANCE_MS,
  MAX_SLEEP_MS,
  type StartDelay,
} from '../../src/schedule/fire-schedule.js';
import {
  assertTimeZone,
  calculatorFor,
  cronOptionsFor,
  parseSchedule,
} from '../../src/schedule/cron.js';

const at = (iso: string) => new Date(iso);

function schedule(jobs: Record<string, string>, now: Date) {
  return new FireSchedule(
    new Map(Object.entries(jobs).map(([name, expr]) => [name, parseSchedule(expr, 'UTC')])),
    now,
  );
}

describe('FireSchedule', () => {
  it('gives the cron instant itself, not the wake time', () => {
    const s = schedule({ tick: '* * * * * *' }, at('2026-01-01T00:00:00.400Z'));
    expect(s.take(at('2026-01-01T00:00:00.999Z')).due).toEqual([]);
    const { due } = s.take(at('2026-01-01T00:00:01.037Z'));
    expect(due).toEqual([{ job: 'tick', scheduledAt: at('2026-01-01T00:00:01.000Z'), lateMs: 37 }]);
  });

  it('runs every fire of a slightly late wake, oldest first, across jobs', () => {
    const s = schedule({ a: '* * * * * *', b: '*/2 * * * * *' }, at('2026-01-01T00:00:00.500Z'));
    const { due } = s.take(at('2026-01-01T00:00:02.100Z'));
    expect(due.map((d) => `${d.job}@${d.scheduledAt.getUTCSeconds()}`)).toEqual([
      'a@1',
      'a@2',
      'b@2',
    ]);
    expect(s.take(at('2026-01-01T00:00:02.200Z')).due).toEqual([]);
  });

  it('reports fires older than the tolerance as missed instead of running them', () => {
    const s = schedule({ m: '* * * * *' }, at('2026-01-01T00:00:30Z'));
    const { due, missed } = s.take(at('2026-01-01T01:00:30Z'));
    // Fires from 00:01 were too late; the first fire inside the tolerance (01:00) still runs.
    expect(missed).toEqual([
      { job: 'm', first: at('2026-01-01T00:01:00Z'), resumedAt: at('2026-01-01T01:00:00Z') },
    ]);
    expect(due).toEqual([{ job: 'm', scheduledAt: at('2026-01-01T01:00:00Z'), lateMs: 30_000 }]);
    expect(LATE_TOLERANCE_MS).toBe(60_000);
  });

  it('never sleeps longer than the cap, and not at all when a fire is due', () => {
    const s = schedule({ d: '0 3 * * *' }, at('2026-01-01T00:00:00Z'));
    expect(s.sleepMs(at('2026-01-01T00:00:00Z'))).toBe(MAX_SLEEP_MS);
    expect(s.sleepMs(at('2026-01-01T02:59:59.250Z'))).toBe(750);
    expect(s.sleepMs(at('2026-01-01T03:00:01Z'))).toBe(0);
    expect(s.nextFire('d')).toEqual(at('2026-01-01T03:00:00Z'));
  });

  describe('with a start delay (jitter)', () => {
    // Fire n starts n*100 ms after its instant (seconds of the minute), at most 900 ms.
    const delay: StartDelay = {
      delayMs: (job, at) => (job === 'j' ? (at.getUTCSeconds() % 10) * 100 : 0),
      maxMs: (job) => (job === 'j' ? 1_000 : 0),
    };
    const jittered = (now: Date) =>
      new FireSchedule(new Map([['j', parseSchedule('* * * * * *', 'UTC')]]), now, delay);

    it('is due at the planned start, keeps the instant, counts lateness from the start', () => {
      const s = jittered(at('2026-01-01T00:00:00.050Z'));
      expect(s.nextFire('j')).toEqual(at('2026-01-01T00:00:01Z'));
      expect(s.nextStart('j')).toEqual(at('2026-01-01T00:00:01.100Z'));
      expect(s.sleepMs(at('2026-01-01T00:00:01.000Z'))).toBe(100);
      expect(s.take(at('2026-01-01T00:00:01.099Z')).due).toEqual([]);
      expect(s.take(at('2026-01-01T00:00:01.130Z')).due).toEqual([
        { job: 'j', scheduledAt: at('2026-01-01T00:00:01Z'), lateMs: 30 },
      ]);
      // The next fire (instant 2 s) starts at 2.2 s.
      expect(s.sleepMs(at('2026-01-01T00:00:01.130Z'))).toBe(1_070);
    });

    it('keeps a fire whose instant has passed but whose start has not (a reload then)', () => {
      // Instant 5 s starts at 5.5 s: a schedule built at 5.2 s still has it to come.
      const s = jittered(at('2026-01-01T00:00:05.200Z'));
      expect(s.nextFire('j')).toEqual(at('2026-01-01T00:00:05Z'));
      // ...and one built after its start does not run it again.
      expect(jittered(at('2026-01-01T00:00:05.600Z')).nextFire('j')).toEqual(
        at('2026-01-01T00:00:06Z'),
      );
    });

    it('without a delay function, fires are due at their instants', () => {
      const s = schedule({ j: '* * * * * *' }, at('2026-01-01T00:00:00.050Z'));
      expect(s.nextStart('j')).toEqual(at('2026-01-01T00:00:01Z'));
    });
  });

  it('evaluates the expression in the job time zone', () => {
    const seoul = parseSchedule('0 3 * * *', 'Asia/Seoul');
    expect(seoul.nextAfter(at('2026-01-01T00:00:00Z'))).toEqual(at('2026-01-01T18:00:00Z'));
  });
});

/**
 * 1,000 jobs cost one croner Cron per distinct (expression, time zone), and each Cron no longer
 * carries its own 80 KiB table of years (issue 7, idle cost). Sharing must not change a single
 * instant: a shared calculator is compared with a Cron of its own over both 2027 DST changes.
 */
describe('shared calculators', () => {
  const NY = 'America/New_York';

  it('gives jobs with the same expression and time zone one calculator, and nothing else', () => {
    expect(calculatorFor('*/5 * * * *', NY)).toBe(calculatorFor('*/5 * * * *', NY));
    expect(calculatorFor('*/5 * * * *', NY)).not.toBe(calculatorFor('*/5 * * * *', 'UTC'));
    expect(calculatorFor('*/5 * * * *', NY)).not.toBe(calculatorFor('*/10 * * * *', NY));
  });

  it('keeps each job on its own next fire when they share a calculator', () => {
    const a = parseSchedule('*/15 * * * *', 'UTC');
    const b = parseSchedule('*/15 * * * *', 'UTC');
    // Interleaved from different instants: nothing one asks leaks into the other's answer.
    expect(a.nextAfter(at('2026-01-01T00:00:00Z'))).toEqual(at('2026-01-01T00:15:00Z'));
    expect(b.nextAfter(at('2026-05-05T10:20:00Z'))).toEqual(at('2026-05-05T10:30:00Z'));
    expect(a.nextAfter(at('2026-01-01T00:00:00Z'))).toEqual(at('2026-01-01T00:15:00Z'));
    expect(b.nextN(2, at('2026-01-01T00:50:00Z'))).toEqual([
      at('2026-01-01T01:00:00Z'),
      at('2026-01-01T01:15:00Z'),
    ]);

    const s = new FireSchedule(
      new Map([
        ['early', a],
        ['late', b],
      ]),
      at('2026-01-01T00:00:00Z'),
    );
    expect(s.take(at('2026-01-01T00:15:00.010Z')).due.map((d) => d.job)).toEqual(['early', 'late']);
    expect(s.nextFire('early')).toEqual(at('2026-01-01T00:30:00Z'));
    expect(s.nextFire('late')).toEqual(at('2026-01-01T00:30:00Z'));
  });

  it('asks croner once for jobs that fire together, and gives each its own Date', () => {
    const expression = '*/2 * * * * *';
    const jobs = new Map(
      Array.from({ length: 500 }, (_, i) => [`j${i}`, parseSchedule(expression, 'UTC')]),
    );
    const nextRun = vi.spyOn(calculatorFor(expression, 'UTC').cron, 'nextRun');
    try {
      const s = new FireSchedule(jobs, at('2026-01-01T00:00:00.500Z'));
      expect(nextRun).toHaveBeenCalledTimes(1);
      const { due } = s.take(at('2026-01-01T00:00:02.010Z'));
      expect(due).toHaveLength(500);
      expect(new Set(due.map((d) => d.scheduledAt.toISOString()))).toEqual(
        new Set(['2026-01-01T00:00:02.000Z']),
      );
      expect(nextRun).toHaveBeenCalledTimes(2);
      expect(s.nextFire('j0')).toEqual(at('2026-01-01T00:00:04Z'));
      expect(s.nextFire('j0')).not.toBe(s.nextFire('j499'));
    } finally {
      nextRun.mockRestore();
    }
  });

  it('computes exactly what a Cron of its own computes, across both DST changes', () => {
    const expressions = ['30 2 * * *', '30 1 * * *', '0 * * * *', '*/30 * * * *', '15 30 2 * * *'];
    for (const timezone of [NY, 'Europe/Berlin', 'Asia/Seoul']) {
      for (const expression of expressions) {
        const own = new Cron(expression, cronOptionsFor(expression, timezone));
        const shared = parseSchedule(expression, timezone);
        for (const from of ['2027-03-13T00:00:00Z', '2027-11-06T00:00:00Z']) {
          const mine = shared.nextN(80, at(from)).map((d) => d.toISOString());
          expect(mine, `${expression} in ${timezone} from ${from}`).toEqual(
            own.nextRuns(80, at(from)).map((d) => d.toISOString()),
          );
        }
      }
    }
  });

  it('gives every calculator one shared table of years instead of 80 KiB each', () => {
    // croner's internals (11.x): if they move, the memory saving in cron.ts is silently gone.
    const years = (cron: Cron) =>
      (cron as unknown as { _states: { pattern: { year: number[] } } })._states.pattern.year;
    const daily = years(calculatorFor('0 3 * * *', 'UTC').cron);
    expect(daily).toHaveLength(10_000);
    expect(Object.isFrozen(daily)).toBe(true);
    expect(years(calculatorFor('*/7 * * * * *', 'Asia/Seoul').cron)).toBe(daily);
  });

  it('still refuses an unknown time zone after known ones were accepted', () => {
    expect(() => assertTimeZone('Asia/Seoul')).not.toThrow();
    expect(() => parseSchedule('0 3 * * *', 'Mars/Olympus_Mons')).toThrow(
      'unknown time zone "Mars/Olympus_Mons"',
    );
    expect(() => assertTimeZone('Mars/Olympus_Mons')).toThrow('unknown time zone');
  });
});
