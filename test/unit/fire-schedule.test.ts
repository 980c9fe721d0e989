import { describe, expect, it } from 'vitest';
import { FireSchedule, LATE_TOLERANCE_MS, MAX_SLEEP_MS } from '../../src/daemon/fire-schedule.js';
import { parseSchedule } from '../../src/schedule/cron.js';

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

  it('evaluates the expression in the job time zone', () => {
    const seoul = parseSchedule('0 3 * * *', 'Asia/Seoul');
    expect(seoul.nextAfter(at('2026-01-01T00:00:00Z'))).toEqual(at('2026-01-01T18:00:00Z'));
  });
});
