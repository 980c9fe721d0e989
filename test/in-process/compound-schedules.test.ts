/**
 * Schedules beyond one cron expression (src/schedule/compound.ts, docs/schedules.md) with real
 * runners: three runners of one file whose jobs fire by a list of instants (a one-shot job), an
 * anchored interval bounded by `from` and `until`, and a list of two expressions that meet.
 * Judged by the jobs' own journal (ground-truth.ts): each instant the text names runs exactly once
 * fleet-wide, no other instant runs, and each runner's loop has nothing left of the bounded jobs.
 */
import { describe, expect, it } from 'vitest';
import { dbNow, runs } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { writeJournaledSchedule } from '../helpers/ground-truth.js';
import { useInProcessFleet } from '../helpers/in-process-fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useInProcessFleet('compound');

const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

describe('three runners, one file of richer schedules', () => {
  it('run each instant the text names once, and no other', async () => {
    // Far enough ahead for three runners to start (a runner does not catch up an instant that
    // came before it started); whole seconds, as fires are.
    const t0 = Math.ceil((await dbNow(fleet.db)).getTime() / 1_000) * 1_000 + 10_000;
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: compound
jobs:
  once:
    schedule: {at: [${iso(t0)}, "${iso(t0 + 3_000)}"]}
    command: ${j.yaml()}
  interval:
    schedule: {every: 2s, anchor: ${iso(t0 + 1_000)}}
    from: ${iso(t0)}
    until: ${iso(t0 + 7_000)}
    command: ${j.yaml()}
  union:
    schedule: ["*/2 * * * * *", "*/3 * * * * *"]
    from: ${iso(t0)}
    until: ${iso(t0 + 6_000)}
    command: ${j.yaml()}
`,
    );
    const runners = await fleet.start(['cs-1', 'cs-2', 'cs-3'], { config });
    expect(
      (await dbNow(fleet.db)).getTime(),
      'the runners started before the first instant',
    ).toBeLessThan(t0);
    const expected = {
      once: [t0, t0 + 3_000],
      interval: [t0 + 1_000, t0 + 3_000, t0 + 5_000, t0 + 7_000],
      // Seconds divisible by 2 or by 3, each once, within [t0, t0 + 6 s].
      union: [0, 1, 2, 3, 4, 5, 6]
        .map((s) => t0 + s * 1_000)
        .filter((t) => (t / 1_000) % 2 === 0 || (t / 1_000) % 3 === 0),
    };
    const fires = (job: string) =>
      journal
        .attempts(job)
        .map((a) => a.fire)
        .sort((a, b) => a - b);
    await waitFor(
      'every named instant run',
      () => Object.entries(expected).every(([job, at]) => fires(job).length >= at.length),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // The last instant of every job is past: each runner's loop has no fire left of them.
    await waitFor(
      'the last runs recorded',
      async () =>
        (await runs(fleet.db)).filter((r) => r.winner && r.status !== 'running').length ===
        Object.values(expected).flat().length,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    for (const [job, at] of Object.entries(expected)) {
      expect(fires(job), job).toEqual(at);
      expectOneWinnerPerFire(await runs(fleet.db, job), job);
      for (const r of runners) expect(r.runner.nextFire(job), `${job} on ${r.host}`).toBeNull();
    }
  });
});
