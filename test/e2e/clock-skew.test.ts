/**
 * One clock for the fleet (issue 4): runners fire on the database's clock, whatever their own.
 *
 * 1. Three runners whose clocks are really off — −2 s, 0 and +1.5 s, through libfaketime around
 *    the runner process, not a switch inside baton — run an every-second 30 ms job. Once all have
 *    started: every fire has exactly one winner; every scheduled winner starts at or after its
 *    instant and within 50 ms of it by the database's clock (`started_at` is NOW(3)), so the fast
 *    host never starts early and the slow one never late; every host attempts every fire; and
 *    `baton status --json` reports each runner's offset within 100 ms of the truth (how far its
 *    clock is ahead of the database's: −2000, 0, +1500) with a clock-offset warning for the two
 *    skewed runners (threshold 1 s), exit 1.
 * 2. The fire key, which the session lock alone does not give: a runner frozen (SIGSTOP) across
 *    fires and thawed 1.5 s later reaches them after their 30 ms winners finished and released the
 *    lock. It must record `this fire already ran on <host> (done)` for them, and every fire still
 *    has one winner.
 */
import { describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';
import { byFire, runs, type RunRow, type TestDatabase } from '../helpers/db.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('skew', { perTest: true });

const TICK = `
namespace: skew
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["sleep", "0.03"]
`;

async function dbNow(db: TestDatabase): Promise<Date> {
  const [row] = await db.query<{ now: Date }>('SELECT NOW(3) AS now');
  return row!.now;
}

interface StatusJson {
  runners: { host: string; clockOffsetMs: number | null; alive: boolean }[];
  warnings: { kind: string; message: string; hosts?: string[] }[];
}

async function status(db: TestDatabase, config: string) {
  const res = await baton(['status', '--json', '--config', config, '--database-url', db.url]);
  if (res.code !== 0 && res.code !== 1) throw new Error(`status exited ${res.code}: ${res.stderr}`);
  return { code: res.code, json: JSON.parse(res.stdout) as StatusJson };
}

/** Fires in the window: one winner each, and no two rows of one host for one fire. */
function expectOneWinnerPerFire(rows: RunRow[]): void {
  for (const [at, fire] of byFire(rows)) {
    // A fire that came while every runner was still connecting has only the `missed` row the
    // first runner to look back wrote for it.
    if (fire.some((r) => r.status === 'missed')) {
      expect(fire, new Date(at).toISOString()).toHaveLength(1);
      expect(fire[0]).toMatchObject({ winner: 0, status: 'missed' });
      continue;
    }
    const winners = fire.filter((r) => r.winner === 1);
    expect(winners, new Date(at).toISOString()).toHaveLength(1);
    expect(new Set(fire.map((r) => r.host)).size, 'one row per host and fire').toBe(fire.length);
  }
}

describe('runners whose clocks are off by -2 s, 0 and +1.5 s', () => {
  it('fire on database time: on the instant, never early, one winner; status shows the offsets', async () => {
    const config = writeSchedule(TICK);
    const db = fleet.db;
    const runners = await fleet.start(['h1', 'h2', 'h3'], { config }, { h1: '-2', h3: '+1.5' });
    // Start-up fires (a runner fires by its own clock until its first offset measurement) are
    // left out: the window opens a couple of seconds after every runner started.
    const from = new Date((await dbNow(db)).getTime() + 2_000);

    // The registry gets each offset at the runner's next registry heartbeat (every 5 s).
    const truth: Record<string, number> = { h1: -2_000, h2: 0, h3: 1_500 };
    const measured = await waitFor(
      'status with every runner offset measured',
      async () => {
        const s = await status(db, config);
        return s.json.runners.length === 3 && s.json.runners.every((r) => r.clockOffsetMs != null)
          ? s
          : null;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    const until = new Date(Math.max(from.getTime() + 8_000, (await dbNow(db)).getTime()));
    await waitFor(
      'eight seconds of fires after start-up',
      async () =>
        (await db.query('SELECT id FROM baton_runs WHERE winner = 1 AND scheduled_at > ?', [until]))
          .length > 0,
      { timeoutMs: 30_000 },
    );
    // A second look, after several more heartbeats: the offsets stay right.
    const later = await status(db, config);
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));

    for (const s of [measured, later]) {
      expect(s.code).toBe(1);
      for (const r of s.json.runners) {
        expect(r.alive, r.host).toBe(true);
        expect(
          Math.abs(r.clockOffsetMs! - truth[r.host]!),
          `${r.host}: ${r.clockOffsetMs}`,
        ).toBeLessThanOrEqual(100);
      }
      expect(s.json.warnings.map((w) => [w.kind, w.hosts])).toEqual([
        ['clock-offset', ['h1']],
        ['clock-offset', ['h3']],
      ]);
      expect(s.json.warnings[0]!.message).toMatch(/^runner h1's clock is 2s behind the database's/);
      expect(s.json.warnings[1]!.message).toMatch(/^runner h3's clock is 1\.5s ahead of/);
    }

    const rows = (await runs(db, 'tick')).filter(
      (r) => r.scheduled_at >= from && r.scheduled_at <= until,
    );
    const fires = byFire(rows);
    // No second of the window is missing, and every host attempted every fire.
    expect(fires.size).toBe(
      Math.floor(until.getTime() / 1000) - Math.ceil(from.getTime() / 1000) + 1,
    );
    for (const [at, fire] of fires) {
      expect(fire.map((r) => r.host).sort(), new Date(at).toISOString()).toEqual([
        'h1',
        'h2',
        'h3',
      ]);
    }
    expectOneWinnerPerFire(rows);
    const late = rows
      .filter((r) => r.winner === 1 && r.triggered_by === 'schedule')
      .map((r) => ({
        at: r.scheduled_at.toISOString(),
        host: r.host,
        lateMs: r.started_at.getTime() - r.scheduled_at.getTime(),
      }));
    expect(late.length).toBeGreaterThanOrEqual(8);
    // Never before its instant by the database's clock, and not late either: every host woke on it.
    expect(late.filter((w) => w.lateMs < 0 || w.lateMs > 50)).toEqual([]);
    expectQuiet(runners);
  });
});

describe('a runner frozen across fires (SIGSTOP, then SIGCONT 1.5 s later)', () => {
  it('meets the fire key for fires whose winner finished: "this fire already ran", one winner', async () => {
    const config = writeSchedule(TICK);
    const db = fleet.db;
    const runners = await fleet.start(['a', 'b', 'late'], { config });
    const late = runners[2]!;
    const pid = late.child.pid!;
    const from = new Date((await dbNow(db)).getTime() + 1_000);

    try {
      for (let cycle = 0; cycle < 4; cycle++) {
        // Freeze 150 ms before a fire (by the database's clock), thaw 1.5 s later: the runner
        // then finds two fires due whose 30 ms winners have finished.
        const now = (await dbNow(db)).getTime();
        const freezeAt = Math.ceil(now / 1000) * 1000 + 850;
        await sleep(freezeAt - now);
        process.kill(pid, 'SIGSTOP');
        await sleep(1_500);
        process.kill(pid, 'SIGCONT');
        await sleep(1_200);
      }
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const until = await dbNow(db);
    await waitFor(
      'the last fire attempted by all three',
      async () =>
        (
          await db.query('SELECT id FROM baton_runs WHERE scheduled_at = ?', [
            new Date(Math.floor(until.getTime() / 1000) * 1000),
          ])
        ).length === 3,
    );
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));

    const rows = (await runs(db, 'tick')).filter(
      (r) => r.scheduled_at >= from && r.scheduled_at <= until,
    );
    expectOneWinnerPerFire(rows);
    const keyed = rows.filter(
      (r) =>
        r.host === 'late' &&
        r.winner === null &&
        /^this fire already ran on (a|b) \(done\)$/.test(r.reason ?? ''),
    );
    // Two fires per freeze; some may have met a lock still held instead.
    expect(keyed.length, JSON.stringify(rows.filter((r) => r.host === 'late'))).toBeGreaterThan(3);
    // Those were really reached late, after the winner had finished.
    for (const skip of keyed) {
      const winner = rows.find(
        (r) => r.winner === 1 && r.scheduled_at.getTime() === skip.scheduled_at.getTime(),
      )!;
      expect(winner.status).toBe('done');
      expect(skip.started_at.getTime()).toBeGreaterThanOrEqual(winner.finished_at!.getTime());
    }
    expectQuiet(runners);
  });
});
