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
 *
 * The runners are built in the test process (in-process-fleet.ts): the test waits for their fire
 * events — every runner's verdict on every fire of the window, and after the closing pause every
 * runner past tick's last fire — rather than for the clock. `baton pause`, `resume`, `history`,
 * `explain` and `prune` are the CLI under test, real processes judged by their exit codes and
 * output.
 */
import { describe, expect, it } from 'vitest';
import type { SkipKind } from '../../src/run-status.js';
import { writeSchedule } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { byFire, dbNow, runs, type RunRow } from '../helpers/db.js';
import { expectCompleteFires, expectOneWinnerPerFire } from '../helpers/fires.js';
import { expectQuiet } from '../helpers/fleet.js';
import { useInProcessFleet, type InProcessRunner } from '../helpers/in-process-fleet.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['srv-01', 'srv-02', 'srv-03'];
const JOBS = ['tick', 'plain', 'slow'];
const fleet = useInProcessFleet('skip_tallies');

interface TallyRow {
  job: string;
  host: string;
  reason_kind: string;
  skips: number;
  first_fire: Date;
  last_fire: Date;
  period_start: Date;
}

/** What a runner said of one fire: its verdict (won, skipped, not attempted) or its run's end. */
interface FireSaid {
  host: string;
  job: string;
  at: number;
  event: 'won' | 'skipped' | 'notAttempted' | 'finished';
  /** A skip's kind; `tallied`: counted, no row (runId null). */
  kind?: SkipKind;
  tallied?: boolean;
}

/**
 * Every fire event of the runners from now on. A skip is told once its row or tally is written,
 * a win once its row is, a run's end once its verdict is (fire/run-fire.ts).
 */
function recordFires(runners: readonly InProcessRunner[]) {
  const said: FireSaid[] = [];
  const offs = runners.flatMap(({ host, runner: { events } }) => {
    const at = (fire: { job: string; scheduledAt: Date }) => ({
      host,
      job: fire.job,
      at: fire.scheduledAt.getTime(),
    });
    return [
      events.on('fire:won', (e) => said.push({ ...at(e.fire), event: 'won' })),
      events.on('fire:skipped', (e) =>
        said.push({ ...at(e.fire), event: 'skipped', kind: e.kind, tallied: e.runId === null }),
      ),
      events.on('fire:notAttempted', (e) => said.push({ ...at(e.fire), event: 'notAttempted' })),
      events.on('run:finished', (e) => said.push({ ...at(e.fire), event: 'finished' })),
    ];
  });
  const decided = (host: string, job: string, at: number) =>
    said.some((s) => s.host === host && s.job === job && s.at === at && s.event !== 'finished');
  return { said, decided, stop: () => offs.forEach((off) => off()) };
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
    // Paused until every runner is up, and again before they stop (see the header). The file's
    // database is migrated already (a copy of the template): `migrate` has nothing to do.
    const [migrated, paused] = await Promise.all([
      cli('migrate'),
      cli('pause', 'tick', '--reason', 'bracket'),
    ]);
    expect(migrated.code).toBe(0);
    expect(paused.code).toBe(0);
    const runners = await fleet.start(HOSTS, { config });
    // From before `from`: a fire is contended at its instant or after (first-asker.ts), never
    // before, so every fire of the window is heard.
    const fires = recordFires(runners);
    const from = await dbNow(db);
    expect((await cli('resume', 'tick')).code).toBe(0);
    const until = new Date(from.getTime() + 8_000);
    const windowFires = Array.from(
      { length: 8 },
      (_, i) => Math.floor(from.getTime() / 1_000) * 1_000 + (i + 1) * 1_000,
    );
    expect(windowFires.at(-1)).toBeLessThanOrEqual(until.getTime());
    // Then tick paused again, once it has run seven fires since the resume (its eight fires of
    // the window less the resume's own lag, which a loaded machine makes a second or two).
    const tickWon = () =>
      new Set(fires.said.filter((s) => s.job === 'tick' && s.event === 'won').map((s) => s.at));
    await waitFor(
      "every runner's verdict on every fire of the window, of every job, and seven of tick won",
      () =>
        tickWon().size >= 7 &&
        JOBS.every((job) =>
          HOSTS.every((h) => windowFires.every((at) => fires.decided(h, job, at))),
        ),
      { timeoutMs: 30_000 },
    );
    expect((await cli('pause', 'tick', '--reason', 'bracket')).code).toBe(0);
    // Settled: tick was paused before the runners started, so every fire it was not paused for
    // was heard. Every runner has a verdict on each of them, each won one has ended, and every
    // runner has skipped a later fire as paused (a fire is contended at its instant: none after
    // it can find the job resumed).
    await waitFor(
      "every runner past tick's last fire",
      () => {
        const tick = fires.said.filter((s) => s.job === 'tick');
        const ran = tick.filter((s) => s.event !== 'finished' && s.kind !== 'paused');
        const last = Math.max(...ran.map((s) => s.at));
        return (
          ran.every((s) => HOSTS.every((h) => fires.decided(h, 'tick', s.at))) &&
          ran
            .filter((s) => s.event === 'won')
            .every((w) =>
              tick.some((s) => s.event === 'finished' && s.host === w.host && s.at === w.at),
            ) &&
          HOSTS.every((h) => tick.some((s) => s.host === h && s.kind === 'paused' && s.at > last))
        );
      },
      { timeoutMs: 20_000 },
    );

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
    // And the runners said so: a tallied skip event (no row) for each skip counted.
    const talliedSaid = fires.said.filter((s) => s.job === 'tick' && s.tallied);
    expect(talliedSaid.length).toBe(counted);
    expect(fires.said.filter((s) => s.event === 'notAttempted')).toEqual([]);
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

    // The read-only commands of this one situation, asked at once: history and explain of a
    // fire in the middle. Meanwhile the runners stop gracefully (SIGTERM's): what they read is
    // over — tick paused, its fires judged above, every runner registered long before them —
    // and the stop waits for slow's last run (2.5 s) as a graceful stop does.
    fires.stop();
    const fire = [...wonAt].sort((a, b) => a - b)[Math.floor(wonAt.size / 2)]!;
    const at = new Date(fire).toISOString();
    const [[history, json, all, explained, text]] = await Promise.all([
      Promise.all([
        cli('history', 'tick', '--limit', '5'),
        cli('history', 'tick', '--tallies', '--json'),
        cli('history', '--tallies', '--json'),
        cli('explain', 'tick', at, '--json'),
        cli('explain', 'tick', at),
      ]),
      Promise.all(runners.map((r) => r.stop())),
    ]);

    // baton history: the fire view ends with the tallies; --tallies --json is their rows.
    expect(history.code).toBe(0);
    expect(history.stdout).toContain('skip tallies (skips: tally');
    expect(history.stdout).toMatch(/ UTC {2}tick {2}srv-0\d: [\d,]+ skips? \((taken|already-ran) /);
    expect(json.code).toBe(0);
    const listed = JSON.parse(json.stdout) as { skips: number; host: string; job: string }[];
    expect(listed.reduce((n, t) => n + t.skips, 0)).toBe(counted);
    expect(listed.every((t) => t.job === 'tick')).toBe(true);
    // Without a job: every job's (slow's may still grow: tick's, paused, is the sum above).
    const everyJob = JSON.parse(all.stdout) as {
      skips: number;
      job: string;
    }[];
    expect(new Set(everyJob.map((t) => t.job))).toEqual(new Set(['tick', 'slow']));
    const tickSum = everyJob.filter((t) => t.job === 'tick').reduce((n, t) => n + t.skips, 0);
    expect(tickSum).toBe(counted);

    // baton explain: a fire in the middle, its losers counted as tallied, none missing.
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
    expect(text.stdout).toContain('a tally does not say which fires it counted');

    // Each stopped gracefully, and nothing logged as an error.
    for (const r of runners) {
      expect(
        r.lines.filter((l) => l.msg === 'runner stopped'),
        r.host,
      ).toHaveLength(1);
    }
    expectQuiet(runners);

    // Retention: a tally whose hour is past the skips' bound goes, the current ones stay — all
    // of them, as they are once the runners stopped (slow's grew until then, by a row when a
    // runner first tallied a kind of it), which include every one read above.
    const tallyKey = (t: TallyRow) =>
      [t.job, t.host, t.reason_kind, new Date(t.period_start).toISOString()].join(' ');
    const current = (
      await db.query<TallyRow>("SELECT * FROM baton_skip_tallies WHERE namespace = 'tally-test'")
    )
      .map(tallyKey)
      .sort();
    expect(current).toEqual(expect.arrayContaining(tallies.map(tallyKey)));
    await db.query(
      `INSERT INTO baton_skip_tallies (namespace, job, period_start, host, reason_kind, skips,
         first_fire, last_fire, last_reason, updated_at)
       VALUES ('tally-test', 'tick', NOW() - INTERVAL 10 DAY, 'srv-old', 'taken', 5,
         NOW() - INTERVAL 10 DAY, NOW() - INTERVAL 10 DAY, 'old', NOW())`,
    );
    const pruned = await cli('prune', '--older-than', '7d', '--json');
    expect(pruned.code).toBe(0);
    expect(JSON.parse(pruned.stdout)).toMatchObject({ skipTallies: 1 });
    const left = await db.query<TallyRow>('SELECT * FROM baton_skip_tallies');
    expect(left.map((t) => t.host)).not.toContain('srv-old');
    expect(left.length).toBe(current.length);
    expect(left.map(tallyKey).sort()).toEqual(current);
  });
});
