/**
 * population — seed 002, the refresh that deadlocked.
 *
 * Four scheduler instances each took "the next place not refreshed yet" with a plain SELECT in a
 * transaction: they picked the same places, refreshed some twice, deadlocked, and needed ~45 s
 * for 120 places of 300 ms each. With `FOR UPDATE SKIP LOCKED` each one locks the next place
 * nobody holds and skips the ones others hold: each place once, no deadlock, under 20 s (ideal:
 * 120 × 0.3 s / 4 = 9 s). Here the four instances are four runners sharing one fire
 * (`workers: 4` in schedules.yaml), and `forEachSkipLocked` is the loop.
 *
 * The refresh is periodic (the seed's was every 5 minutes), which the seed found awkward with a
 * nullable processedDate: who resets it, and when? Here each place records the FIRE it was
 * refreshed for (`refreshed_for`): a place is due when `refreshed_for < ctx.scheduledAt`. The fire
 * instant is the same on every runner, so all four agree on what is due without any reset, and a
 * worker of the next fire never mistakes a place refreshed by the last one for done.
 *
 * Per place, in the place's own transaction (the row stays locked until it commits):
 *   the population is "fetched" (POPULATION_WORK_MS, 300 ms as in the seed's test; the real job
 *   called the city's live-population API), upserted into `population` (one row per place),
 *   logged in `population_log` (the seed's JobLog: which worker refreshed which place), and the
 *   place marked refreshed for this fire. A failure rolls all of it back and the place stays due.
 *
 * Tables: jobs/sql/population.sql (jobs/sql/population.demo.sql adds the 120 places).
 *
 * Environment (job `env:`):
 *   POPULATION_WORK_MS  the simulated API call per place, ms (default 300)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { forEachSkipLocked, upsertRows, type JobContext } from 'baton-cron';

interface Place extends RowDataPacket {
  id: number;
  name: string;
}

/** The seed's congestion levels (the city API's 여유 / 보통 / 약간 붐빔 / 붐빔). */
const LEVELS = ['relaxed', 'normal', 'slightly crowded', 'crowded'] as const;

/** Stands in for the live-population API: a pause, then numbers that vary by place and fire. */
async function fetchPopulation(place: Place, at: Date, workMs: number, signal: AbortSignal) {
  if (workMs > 0) await sleep(workMs, undefined, { signal });
  const people = (place.id * 7919 + Math.floor(at.getTime() / 60_000) * 104_729) % 50_000;
  return { people, congestion: LEVELS[Math.floor(people / 12_500)]! };
}

export default async function population(ctx: JobContext): Promise<void> {
  const text = process.env.POPULATION_WORK_MS;
  const workMs = text == null || text === '' ? 300 : Number(text);
  if (!Number.isInteger(workMs) || workMs < 0) {
    throw new RangeError(`POPULATION_WORK_MS must be an integer >= 0: ${text}`);
  }
  const fireAt = ctx.scheduledAt;
  const { slot, count } = ctx.fire.worker;

  const refreshed = await forEachSkipLocked<Place>(
    ctx.db,
    {
      // Served by KEY refresh_order (refreshed_for, id): a locking read locks every row it
      // examines, so without the index one worker would lock them all and the others find none.
      select: 'SELECT id, name FROM place WHERE refreshed_for < ? ORDER BY refreshed_for, id',
      params: [fireAt],
      signal: ctx.signal,
    },
    async (place, conn: Connection) => {
      const [[started]] = await conn.query<RowDataPacket[]>('SELECT UTC_TIMESTAMP(3) AS now');
      const data = await fetchPopulation(place, fireAt, workMs, ctx.signal);
      await upsertRows(conn, {
        table: 'population',
        key: ['place_id'],
        rows: [{ place_id: place.id, ...data, fire_at: fireAt }],
      });
      await conn.query(
        `INSERT INTO population_log (place_id, fire_at, run_id, host, worker, started_at, finished_at)
         VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(3))`,
        [place.id, fireAt, ctx.runId, ctx.fire.host, slot, started?.now],
      );
      await conn.query('UPDATE place SET refreshed_for = ? WHERE id = ?', [fireAt, place.id]);
    },
  );
  ctx.log.info(
    { refreshed, worker: slot, workers: count, fire: fireAt.toISOString() },
    'places refreshed',
  );
}
