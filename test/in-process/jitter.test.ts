/**
 * Jitter (docs/schedules.md, "Jitter"): two runners, a job every 3 s with `jitter: 2s`. Each fire
 * starts at its instant plus the delay every runner derives from namespace, job and instant — so
 * still exactly one winner per fire — while `scheduled_at` and BATON_SCHEDULED_AT stay the cron
 * instant, `baton list --json` shows the same starts, and the wanted delay is not reported as a
 * late wake. Without the jitter in the loop the winners start at the instants (fails on
 * started_at), and without the same delay on both runners the fires would be won by whichever
 * drew the shorter one at a different time each (fails on one start per fire at the delay).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { jitterDelayMs } from '../../src/schedule/jitter.js';
import { writeSchedule } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { dbNow, runs } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { expectQuiet } from '../helpers/fleet.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { waitFor } from '../helpers/wait.js';

const NAMESPACE = 'jitter-test';
const JITTER_MS = 2_000;
const fleet = useInProcessFleet('jitter');

describe('jitter: 2s on a job every 3 s, two runners', () => {
  it('starts each fire at its instant plus the shared delay, with one winner', async () => {
    const config = writeSchedule(`
namespace: ${NAMESPACE}
jobs:
  tick:
    schedule: "*/3 * * * * *"
    jitter: 2s
    command: 'echo "$BATON_SCHEDULED_AT" >> seen.txt'
    shell: true
`);
    const seen = path.join(path.dirname(config), 'seen.txt');
    const delay = (at: Date) => jitterDelayMs(NAMESPACE, 'tick', at, JITTER_MS);

    const listed = await baton(['list', '--config', config, '--json', '--count', '3']);
    expect(listed.code, listed.stderr).toBe(0);
    const job = (
      JSON.parse(listed.stdout) as {
        jobs: { jitterMs: number; nextFires: string[]; nextStarts: string[] }[];
      }
    ).jobs[0]!;
    expect(job.jitterMs).toBe(JITTER_MS);
    expect(job.nextStarts).toEqual(
      job.nextFires.map((f) => new Date(Date.parse(f) + delay(new Date(f))).toISOString()),
    );

    const runners = await fleet.start(['srv-01', 'srv-02'], { config });
    const from = await dbNow(fleet.db);
    const winners = async () =>
      (await runs(fleet.db, 'tick')).filter(
        (r) => r.scheduled_at > from && (r.winner ?? 0) >= 1 && r.status === 'done',
      );
    // Four fires after both runners are up (each fire attempted by both: its second row comes
    // at the start, before the run is done), and one delayed by more than 300 ms (below): the
    // delays are those of whichever instants the test runs at, and four fires in a row all draw
    // 300 ms or less once in 2,000 runs.
    await waitFor(
      'four fires run after start-up, one of them delayed by more than 300 ms',
      async () => {
        const won = await winners();
        return won.length >= 4 && won.some((w) => delay(w.scheduled_at) > 300);
      },
      { timeoutMs: 30_000 },
    );
    await Promise.all(runners.map((r) => r.stop()));

    const rows = (await runs(fleet.db, 'tick')).filter((r) => r.scheduled_at > from);
    expectOneWinnerPerFire(rows, 'tick');
    const won = rows.filter((r) => (r.winner ?? 0) >= 1);
    expect(won.length).toBeGreaterThanOrEqual(4);
    for (const w of won) {
      const where = `fire ${w.scheduled_at.toISOString()} won by ${w.host}`;
      expect(w.scheduled_at.getTime() % 3_000, `${where}: the cron instant`).toBe(0);
      const lagMs = w.started_at.getTime() - (w.scheduled_at.getTime() + delay(w.scheduled_at));
      // started_at is the database's time of the claim, planned start by the database's clock.
      expect(lagMs, `${where}: started after its planned start`).toBeGreaterThanOrEqual(0);
      expect(lagMs, `${where}: started near its planned start`).toBeLessThan(1_000);
    }
    // The test can tell jitter from none: some delay is well above the lag of a fire on time.
    expect(Math.max(...won.map((w) => delay(w.scheduled_at)))).toBeGreaterThan(300);

    // The job saw the cron instant, not its start.
    const seenAt = readFileSync(seen, 'utf8').trim().split('\n');
    for (const w of won) expect(seenAt).toContain(w.scheduled_at.toISOString());

    // The wanted delay is not a late wake.
    for (const r of runners) {
      expect(
        r.lines.filter((l) => l.msg === 'late wake'),
        r.host,
      ).toEqual([]);
    }
    expectQuiet(runners);
  });
});
