/**
 * Where a job runs (issue 38, docs/placement.md), with real runner processes and jobs that
 * journal themselves (ground-truth.ts):
 *
 * - `runOn`: only the runners that match run the job — every fire — and the others write no row
 *   for it (their file is the same file: they register it as placed elsewhere, saying why).
 * - `prefer`: the preferred runner runs every fire while it lives and is on time; frozen
 *   (SIGSTOP), its fires are taken by the others after the lead — never before it, never twice —
 *   and it takes them back once it continues; killed (`kill -9`), the next fire runs elsewhere.
 */
import { describe, expect, it } from 'vitest';
import { runs, type RunRow } from '../helpers/db.js';
import { expectOneWinnerPerFire, fireWindow } from '../helpers/fires.js';
import { useFleet } from '../helpers/fleet.js';
import { writeJournaledSchedule, type JournalAttempt } from '../helpers/ground-truth.js';
import { jobLockName } from '../../src/lock-names.js';
import type { RunnerProcess } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('placement', { perTest: true });
/** The runners look at their companions this often (default 5 s): they see each other sooner. */
const TIMINGS = { fleetWatch: { companionsMs: 500 } };
/**
 * `prefer: [a]`'s lead: the default, half the period of an every-second job — long enough for a
 * preferred runner late on a loaded machine to still win.
 */
const LEAD_MS = 500;

const within = (t: number, w: { from: Date; until: Date }) =>
  t >= w.from.getTime() && t <= w.until.getTime();

/** Each fire of the window run exactly once by the journal; the attempts, by fire. */
function onePerFire(attempts: JournalAttempt[], w: { from: Date; until: Date }): JournalAttempt[] {
  const mine = attempts.filter((a) => within(a.fire, w));
  const fires = new Set(mine.map((a) => a.fire));
  expect(mine.length, 'runs of the window (one per fire)').toBe(fires.size);
  expect(fires.size, 'fires of the window that ran').toBe(
    (w.until.getTime() - w.from.getTime()) / 1000 + 1,
  );
  for (const a of mine) expect(a.overlapped, `run ${a.runId} overlapped another`).toBe(false);
  return mine;
}

describe('runOn', () => {
  it('runs a job only on the runners that match, every fire; the others write no row for it', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: placement
jobs:
  upload:
    schedule: "* * * * * *"
    runOn: { tags: [sftp] }
    command: ${j.yaml()}
  eu-report:
    schedule: "* * * * * *"
    runOn: { tags: [region=eu] }
    command: ${j.yaml()}
  on-c:
    schedule: "* * * * * *"
    runOn: { hosts: [c] }
    command: ${j.yaml()}
`,
    );
    await fleet.start(['a', 'c'], { config, timings: TIMINGS });
    await fleet.start(['b'], {
      config,
      timings: TIMINGS,
      args: ['--tag', 'sftp', '--tag', 'region=eu'],
    });
    const w = await fireWindow(fleet.db, 4);

    for (const [job, host] of [
      ['upload', 'b'],
      ['eu-report', 'b'],
      ['on-c', 'c'],
    ] as const) {
      for (const a of onePerFire(journal.attempts(job), w)) expect(a.host, job).toBe(host);
      const rows = (await runs(fleet.db, job)).filter((r) => within(r.scheduled_at.getTime(), w));
      expectOneWinnerPerFire(rows, job);
      // Not a skip row from the others: they do not contend for it at all.
      expect(new Set(rows.map((r) => r.host)), `${job}: hosts with rows`).toEqual(new Set([host]));
    }

    // The registry: b's tags, and the others' view of a job placed elsewhere (no drift).
    const registry = await fleet.db.query<{ host: string; tags: string | null; schedule: string }>(
      'SELECT host, tags, schedule FROM baton_runners ORDER BY host',
    );
    const byHost = new Map(registry.map((r) => [r.host, r]));
    expect(JSON.parse(byHost.get('b')!.tags!)).toEqual(['sftp', 'region=eu']);
    expect(byHost.get('a')!.tags).toBeNull();
    const entry = (host: string, job: string) =>
      (JSON.parse(byHost.get(host)!.schedule) as Record<string, Record<string, unknown>>)[job]!;
    expect(entry('a', 'upload')).toMatchObject({ since: null, ineligible: 'needs tag sftp' });
    expect(entry('b', 'upload').since).not.toBeNull();
    expect(entry('a', 'upload').fp).toBe(entry('b', 'upload').fp);
    expect(entry('b', 'on-c')).toMatchObject({ since: null, ineligible: 'only on c' });
  });
});

describe('prefer', () => {
  it('runs on the preferred runner while it lives; frozen, after the lead elsewhere, and back; killed, elsewhere', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: placement
jobs:
  settle:
    schedule: "* * * * * *"
    prefer: [a]
    command: ${j.yaml()}
`,
    );
    const runners = await fleet.start(['a', 'b', 'c'], { config, timings: TIMINGS });
    const a = runners[0]!;
    // Every runner sees the others run the job: the preferred one is known alive.
    await Promise.all(
      runners.map((r) =>
        r.waitForLog(
          'fleet: companions',
          (l) => (l.companions as string[] | undefined)?.length === 2,
          20_000,
        ),
      ),
    );

    // While `a` lives and is on time, it runs every fire.
    const steady = await fireWindow(fleet.db, 4);
    for (const x of onePerFire(journal.attempts('settle'), steady)) expect(x.host).toBe('a');

    // Frozen: the others take its fires, after the lead and never before it. Frozen between two
    // of its runs: a runner frozen while it holds the job's lock (its run's release comes after
    // the verdict) keeps every other run out until its session ends — that is the lock's job.
    await freezeHoldingNothing(a);
    const frozen = await fireWindow(fleet.db, 4);
    a.child.kill('SIGCONT');
    for (const x of onePerFire(journal.attempts('settle'), frozen)) expect(x.host).not.toBe('a');
    const frozenRows = winners(await runs(fleet.db, 'settle'), frozen);
    const takeover = frozenRows.map((r) => r.started_at.getTime() - r.scheduled_at.getTime());
    console.log(`prefer: a frozen, fires taken ${takeover.join(', ')} ms after their instants`);
    // The database's clock and the runners' estimate of it agree within a few ms on one host.
    for (const ms of takeover) expect(ms).toBeGreaterThanOrEqual(LEAD_MS - 50);

    // Continued: `a` takes the job back (its first fires may come while it catches up).
    await waitFor(
      'a to run the job again',
      async () => {
        const w = await fireWindow(fleet.db, 3);
        const hosts = onePerFire(journal.attempts('settle'), w).map((x) => x.host);
        return hosts.every((h) => h === 'a');
      },
      { timeoutMs: 40_000, intervalMs: 0 },
    );

    // Killed: the next fires run elsewhere (after the lead, while the others still count it).
    await a.stop('SIGKILL');
    const killed = await fireWindow(fleet.db, 3);
    for (const x of onePerFire(journal.attempts('settle'), killed)) expect(x.host).not.toBe('a');

    // None twice, over the whole test, by the history too.
    expectOneWinnerPerFire(await runs(fleet.db, 'settle'), 'settle', {
      noWinner: ['overlap', 'lock-being-released'],
    });
  });
});

/** SIGSTOPs `runner` at a moment it holds no lock of the job (tried again after a SIGCONT). */
async function freezeHoldingNothing(runner: RunnerProcess): Promise<void> {
  const lock = jobLockName(fleet.db.name, 'placement', 'settle');
  await waitFor(
    'a moment the preferred runner holds nothing',
    async () => {
      runner.child.kill('SIGSTOP');
      const [row] = await fleet.db.query<{ holder: number | null }>(
        'SELECT IS_USED_LOCK(?) AS holder',
        [lock],
      );
      if (row!.holder == null) return true;
      runner.child.kill('SIGCONT');
      return false;
    },
    { timeoutMs: 20_000, intervalMs: 137 },
  );
}

function winners(rows: RunRow[], w: { from: Date; until: Date }): RunRow[] {
  return rows.filter((r) => r.winner === 1 && within(r.scheduled_at.getTime(), w));
}
