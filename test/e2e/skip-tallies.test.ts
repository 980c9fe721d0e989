/**
 * `skips: tally` (docs/history.md, "Skip tallies"): three runners, three every-second jobs.
 *
 * - `tick` (`skips: tally`, 30 ms): every fire has exactly one winner row, and every other runner
 *   accounted for it — by a count in `baton_skip_tallies` or, where it never saw the winner's row
 *   (a holder still claiming), a full skip row. No skip row of a fire whose winner was seen.
 *   Bracketed by a pause, so that all three runners contended every fire that has a winner: the
 *   tallies then add up exactly, (runners − 1) × winners − the full skip rows.
 * - `plain` (default `rows`): unchanged, one skip row per loser per fire.
 * - `slow` (`skips: tally`, 2.5 s every second): its overlap skips still write full rows, so the
 *   fires without a winner are in the history as attempted — none is `missed`.
 * Then `baton history` and `baton explain` show the tallies, and `baton prune` drops an old one.
 */
import { describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';
import { byFire, dbNow, runs, type RunRow } from '../helpers/db.js';
import { expectCompleteFires, expectOneWinnerPerFire } from '../helpers/fires.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['srv-01', 'srv-02', 'srv-03'];
const fleet = useFleet('skip_tallies');

interface TallyRow {
  job: string;
  host: string;
  reason_kind: string;
  skips: number;
  first_fire: Date;
  last_fire: Date;
  period_start: Date;
}

/** A skip a runner writes in full under `tally`: not of a fire whose winner row it saw. */
const UNSEEN_WINNER =
  /^(this fire is being claimed by |another run held the lock at this instant|this fire already ran on another runner$)/;

describe('skips: tally', () => {
  it('counts the skips of fires with a winner, keeps every other skip as a row', async () => {
    const config = writeSchedule(`
namespace: tally-test
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["sleep", "0.03"]
    skips: tally
  plain:
    schedule: "* * * * * *"
    command: ["sleep", "0.03"]
  slow:
    schedule: "* * * * * *"
    command: ["sleep", "2.5"]
    skips: tally
`);
    const db = fleet.db;
    const cli = (...args: string[]) =>
      baton([...args, '--config', config, '--database-url', db.url]);
    expect((await cli('migrate')).code).toBe(0);
    // Paused until every runner is up, and again before they stop (see the header).
    expect((await cli('pause', 'tick', '--reason', 'bracket')).code).toBe(0);
    const runners = await fleet.start(HOSTS, { config });
    const from = await dbNow(db);
    expect((await cli('resume', 'tick')).code).toBe(0);
    const until = new Date(from.getTime() + 8_000);
    await waitFor(
      'eight seconds of fires',
      async () => (await dbNow(db)).getTime() > until.getTime() + 1_500,
      { timeoutMs: 30_000 },
    );
    expect((await cli('pause', 'tick', '--reason', 'bracket')).code).toBe(0);
    await new Promise((r) => setTimeout(r, 2_000));

    // tick: one winner per fire, and its losers accounted for.
    const tick = await runs(db, 'tick');
    const winners = tick.filter((r) => r.winner === 1);
    expect(winners.length).toBeGreaterThanOrEqual(7);
    expectOneWinnerPerFire(tick, 'tick', { noWinner: ['paused'] });
    expect(winners.every((w) => w.status === 'done')).toBe(true);
    const wonAt = new Set(winners.map((w) => w.scheduled_at.getTime()));
    const skipRows = tick.filter(
      (r) => r.status === 'skipped' && wonAt.has(r.scheduled_at.getTime()),
    );
    for (const r of skipRows) {
      // A paused skip at a bracket's edge, or a skip whose winner this runner did not see.
      if (r.reason_kind !== 'paused') expect(r.reason, r.host).toMatch(UNSEEN_WINNER);
    }
    const tallies = await db.query<TallyRow>(
      "SELECT * FROM baton_skip_tallies WHERE namespace = 'tally-test'",
    );
    const tickTallies = tallies.filter((t) => t.job === 'tick');
    const counted = tickTallies.reduce((n, t) => n + Number(t.skips), 0);
    expect(counted).toBe((HOSTS.length - 1) * winners.length - skipRows.length);
    expect(counted).toBeGreaterThan(0);
    expect(new Set(tickTallies.map((t) => t.reason_kind))).toSatisfy((kinds: Set<string>) =>
      [...kinds].every((k) => k === 'taken' || k === 'already-ran'),
    );
    for (const t of tickTallies) {
      // No runner counts a fire it won.
      const own = winners.filter(
        (w) => w.host === t.host && w.scheduled_at >= t.first_fire && w.scheduled_at <= t.last_fire,
      );
      expect(Number(t.skips), t.host).toBeLessThanOrEqual(
        [...wonAt].filter((at) => at >= +t.first_fire && at <= +t.last_fire).length - own.length,
      );
    }

    // plain (rows): as without the option — every fire of the window, a row from every runner.
    const window = (rows: RunRow[]) =>
      rows.filter((r) => r.scheduled_at > from && r.scheduled_at <= until);
    const plain = window(await runs(db, 'plain'));
    expectCompleteFires(plain, 'plain', {
      from: new Date(from.getTime() + 1),
      until,
      everyMs: 1_000,
      hosts: HOSTS,
    });
    expectOneWinnerPerFire(plain, 'plain');
    expect(tallies.filter((t) => t.job === 'plain')).toEqual([]);

    // slow (tally): its overlap skips are rows, every runner's, and no fire is without a row.
    const allSlow = await runs(db, 'slow');
    const slow = window(allSlow);
    const slowFires = byFire(slow);
    expect(slowFires.size, 'every fire of the window has a row').toBe(8);
    for (const [t, fire] of slowFires) {
      // Without a winner: every runner's own row says why (they are never tallied).
      if (!fire.some((r) => r.winner === 1)) {
        expect(fire.map((r) => r.host).sort(), new Date(t).toISOString()).toEqual(HOSTS);
      }
    }
    // Every row of the job: an overlap skip names the run before it, which may be before the window.
    expectOneWinnerPerFire(allSlow, 'slow', { noWinner: ['overlap'] });
    const overlaps = slow.filter((r) => r.reason_kind === 'overlap');
    expect(new Set(overlaps.map((r) => r.host)).size).toBe(HOSTS.length);
    expect(overlaps.length).toBeGreaterThanOrEqual(HOSTS.length * 3);
    expect((await runs(db)).filter((r) => r.status === 'missed')).toEqual([]);

    // baton history: the fire view ends with the tallies; --tallies --json is their rows.
    const history = await cli('history', 'tick', '--limit', '5');
    expect(history.code).toBe(0);
    expect(history.stdout).toContain('skip tallies (skips: tally');
    expect(history.stdout).toMatch(/ UTC {2}tick {2}srv-0\d: [\d,]+ skips? \((taken|already-ran) /);
    const json = await cli('history', 'tick', '--tallies', '--json');
    expect(json.code).toBe(0);
    const listed = JSON.parse(json.stdout) as { skips: number; host: string; job: string }[];
    expect(listed.reduce((n, t) => n + t.skips, 0)).toBe(counted);
    expect(listed.every((t) => t.job === 'tick')).toBe(true);
    // Without a job: every job's (slow's still grows: tick's, paused, is the sum above).
    const everyJob = JSON.parse((await cli('history', '--tallies', '--json')).stdout) as {
      skips: number;
      job: string;
    }[];
    expect(new Set(everyJob.map((t) => t.job))).toEqual(new Set(['tick', 'slow']));
    const tickSum = everyJob.filter((t) => t.job === 'tick').reduce((n, t) => n + t.skips, 0);
    expect(tickSum).toBe(counted);

    // baton explain: a fire in the middle, its losers counted as tallied, none missing.
    const fire = [...wonAt].sort((a, b) => a - b)[Math.floor(wonAt.size / 2)]!;
    const at = new Date(fire).toISOString();
    const explained = await cli('explain', 'tick', at, '--json');
    expect(explained.code).toBe(0);
    const e = JSON.parse(explained.stdout) as {
      missing: string[];
      tallied: string[];
      attempts: { host: string }[];
      notes: string[];
    };
    expect(e.missing).toEqual([]);
    expect(new Set([...e.tallied, ...e.attempts.map((a) => a.host)])).toEqual(new Set(HOSTS));
    expect(e.notes.join('\n')).toMatch(/skips: tally — skips of this job counted in /);
    const text = await cli('explain', 'tick', at);
    expect(text.stdout).toContain('a tally does not say which fires it counted');

    await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expectQuiet(runners);

    // Retention: a tally whose hour is past the skips' bound goes, the current ones stay.
    await db.query(
      `INSERT INTO baton_skip_tallies (namespace, job, period_start, host, reason_kind, skips,
         first_fire, last_fire, last_reason, updated_at)
       VALUES ('tally-test', 'tick', NOW() - INTERVAL 10 DAY, 'srv-old', 'taken', 5,
         NOW() - INTERVAL 10 DAY, NOW() - INTERVAL 10 DAY, 'old', NOW())`,
    );
    const pruned = await cli('prune', '--older-than', '7d', '--json');
    expect(pruned.code).toBe(0);
    expect(JSON.parse(pruned.stdout)).toMatchObject({ skipTallies: 1 });
    const left = await db.query<TallyRow>('SELECT host FROM baton_skip_tallies');
    expect(left.map((t) => t.host)).not.toContain('srv-old');
    expect(left.length).toBe(tallies.length);
  });
});
