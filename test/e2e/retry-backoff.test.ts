/**
 * Retries that back off (issue 39), with real runner processes on the shared MariaDB: a job that
 * always fails, `retries: 3`, `retryDelay: {initial: 1s, factor: 2}`. Its own journal
 * (helpers/ground-truth.ts: each attempt stamps its start and its end with the machine's clock)
 * says how long each wait really was; the row says how many attempts the fire had.
 *
 * Judged so that a loaded machine cannot break it: each wait is at least the one planned — the
 * pure function every runner computes (config/retry-delay.ts), itself 1 s, 2 s, 4 s within its
 * ±10 % jitter — and longer than the one before; the upper bound is loose (a spawn may be slow),
 * there only to catch a wait of the wrong order (a `max` or a unit mistaken).
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { retryWaitMs } from '../../src/config/retry-delay.js';
import { runs, type RunRow } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { writeJournaledSchedule } from '../helpers/ground-truth.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('retry-backoff');

/** A history row with the `attempts` column (migration 0002). */
type Row = RunRow & { attempts: number };
const rowsOf = async (job: string) => (await runs(fleet.db, job)) as Row[];

describe('retryDelay: {initial, factor}', () => {
  it('an always-failing job waits about 1 s, 2 s, 4 s before its retries; one row, attempts = 4', async () => {
    const { config, journal } = writeJournaledSchedule(
      (j) => `
namespace: backoff
jobs:
  doomed:
    schedule: "*/10 * * * * *"
    command: ${j.yaml({ work: 'exit 1' })}
    retries: 3
    retryDelay: {initial: 1s, factor: 2}
`,
    );
    await fleet.start(['b1', 'b2'], { config });
    const run = await waitFor(
      'a fire of doomed to end after its retries',
      async () => (await rowsOf('doomed')).find((r) => r.winner === 1 && r.status !== 'running'),
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    // The fire's one winner row counts its attempts; the verdict is the last attempt's.
    expect(run).toMatchObject({ status: 'failed', exit_code: 1, attempts: 4 });
    expect(run.error).toMatch(/\(attempt 4\)$/);
    const winners = (await rowsOf('doomed')).filter(
      (r) => r.winner === 1 && r.scheduled_at.getTime() === run.scheduled_at.getTime(),
    );
    expect(winners.map((r) => r.id)).toEqual([run.id]);

    // Its attempts, by the job's own account: four, one after another, on the winner.
    const attempts = journal.attempts('doomed').filter((a) => a.runId === run.id);
    expect(attempts.map((a) => [a.attempt, a.host])).toEqual([
      [1, run.host],
      [2, run.host],
      [3, run.host],
      [4, run.host],
    ]);
    const waited = attempts.slice(1).map((a, i) => a.start - attempts[i]!.end!);

    // What every runner plans for this fire: 1 s, 2 s, 4 s, each within ±10 %.
    const job = loadConfig(config).jobs.find((j) => j.name === 'doomed')!;
    const planned = [2, 3, 4].map((a) => retryWaitMs('backoff', job, run.scheduled_at, a));
    planned.forEach((ms, i) => {
      expect(ms, `wait ${i + 1}`).toBeGreaterThanOrEqual(900 * 2 ** i);
      expect(ms, `wait ${i + 1}`).toBeLessThanOrEqual(1_100 * 2 ** i);
    });
    const detail = `waited ${waited.join(', ')} ms; planned ${planned.join(', ')} ms`;
    waited.forEach((ms, i) => {
      // The timer's wait, then a spawn: never shorter than planned (5 ms for the stamps' rounding).
      expect(ms, detail).toBeGreaterThanOrEqual(planned[i]! - 5);
      expect(ms, detail).toBeLessThan(planned[i]! + 10_000);
    });
    // Growing: each wait longer than the one before.
    expect(waited[1]!, detail).toBeGreaterThan(waited[0]!);
    expect(waited[2]!, detail).toBeGreaterThan(waited[1]!);
  }, 90_000);
});
