/**
 * Calendars (src/schedule/calendar.ts, docs/schedules.md "Calendars") with real runners: three
 * runners of one file whose every-2-seconds job has a calendar that excludes a 10-second window,
 * and a job whose one instant (yesterday's) is on a skipped day and moves (`shift: next`) to the
 * same wall time today, a few seconds ahead. Judged by the jobs' own journal (ground-truth.ts): no
 * run inside the window; one `calendar` row per excluded instant and none twice; the moved
 * instant runs once (the instant it came from, yesterday, is before the runners: no row).
 */
import { describe, expect, it } from 'vitest';
import { dbNow, runs } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { writeJournaledSchedule } from '../helpers/ground-truth.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('calendars');

const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const DAY = 86_400_000;

describe('three runners, a calendar that excludes a window', () => {
  it('run nothing inside it, write one calendar row per excluded instant, and run a moved fire once', async () => {
    // Whole even seconds, far enough ahead for three runners to start and look once.
    const now = (await dbNow(fleet.db)).getTime();
    const t0 = Math.ceil((now + 8_000) / 2_000) * 2_000;
    const windowStart = t0 + 4_000;
    const windowEnd = windowStart + 10_000;
    const end = windowEnd + 4_000;
    // Yesterday's instant, on a skipped day: moved to the same wall time (UTC) today.
    const moved = t0 + 6_000;
    const origin = moved - DAY;
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: calendars
calendars:
  freeze:
    dates: [{from: ${iso(windowStart)}, until: ${iso(windowEnd)}}]
  yesterday:
    dates: [${iso(origin).slice(0, 10)}]
jobs:
  tick:
    schedule: "*/2 * * * * *"
    from: ${iso(t0)}
    until: ${iso(end)}
    skipOn: [freeze]
    command: ${j.yaml()}
  moved:
    schedule: {at: ${iso(origin)}}
    skipOn: [yesterday]
    shift: next
    command: ${j.yaml()}
`,
    );
    await fleet.start(['cal-1', 'cal-2', 'cal-3'], {
      config,
      runner: { timings: { calendar: { lookMs: 200, settleMs: 500 } } },
    });
    expect((await dbNow(fleet.db)).getTime(), 'the runners started before t0').toBeLessThan(t0);
    const every2s = (from: number, to: number) =>
      Array.from({ length: (to - from) / 2_000 + 1 }, (_, i) => from + i * 2_000);
    const inside = every2s(windowStart, windowEnd - 2_000);
    const outside = every2s(t0, end).filter((t) => t < windowStart || t >= windowEnd);
    const fires = (job: string) =>
      journal
        .attempts(job)
        .map((a) => a.fire)
        .sort((a, b) => a - b);
    const calendarRows = async () =>
      (await runs(fleet.db, 'tick')).filter((r) => r.reason_kind === 'calendar');
    await waitFor(
      'every fire outside the window run, the moved one too, and every excluded instant recorded',
      async () =>
        fires('tick').length >= outside.length &&
        fires('moved').length >= 1 &&
        (await calendarRows()).length >= inside.length,
      { timeoutMs: 40_000, intervalMs: 200 },
    );
    await waitFor(
      'the last runs recorded',
      async () =>
        (await runs(fleet.db)).filter((r) => r.winner && r.status !== 'running').length ===
        outside.length + 1,
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    // The job's own journal: every instant outside the window once, none inside.
    expect(fires('tick')).toEqual(outside);
    // The fires (the calendar rows are of instants that are none).
    const fireRows = (await runs(fleet.db, 'tick')).filter((r) => r.reason_kind !== 'calendar');
    expectOneWinnerPerFire(fireRows, 'tick');
    // One `calendar` row per excluded instant, none twice, naming the calendar; no winner there.
    const rows = await calendarRows();
    expect(rows.map((r) => r.scheduled_at.getTime()).sort((a, b) => a - b)).toEqual(inside);
    for (const r of rows) {
      expect(r).toMatchObject({ status: 'skipped', winner: 0 });
      expect(r.reason).toBe('calendar freeze: skipped');
    }
    const tickRows = await runs(fleet.db, 'tick');
    for (const t of inside) {
      expect(
        tickRows.filter((r) => r.scheduled_at.getTime() === t && r.winner),
        `a winner at ${iso(t)}`,
      ).toEqual([]);
    }
    // The moved fire: run once, at its new instant; the instant it came from is no fire.
    expect(fires('moved')).toEqual([moved]);
    expectOneWinnerPerFire(await runs(fleet.db, 'moved'), 'moved');
  });
});
