/**
 * feed — seed 004, the counter race, done right.
 *
 * Feeding a pet takes one food (food.count - 1) and makes the pet stronger (pet.power + 1). Done
 * as read, compute, write, two requests that read the same count both write count - 1: a food
 * eaten twice, counted once (a lost update). The seed hammered one pet with 32 threads × 1,000
 * requests and required the final counts to match EXACTLY. This job is that load test, run as a
 * batch: FEED_CALLERS concurrent callers, each making FEED_REQUESTS feed requests one after the
 * other on `ctx.db`, with one of the seed's two remedies:
 *
 * - FEED_MODE=optimistic (default) — `updateOptimistic`: read food with its `version`, then
 *   `UPDATE … SET count = ?, version = version + 1 WHERE pet_id = ? AND version = <read>`; 0 rows
 *   means another request got in between, so read again and retry (jittered backoff, at most
 *   FEED_MAX_RETRIES times). No lock is held while computing.
 * - FEED_MODE=locked — `updateLocked`: `SELECT … FOR UPDATE`, compute, UPDATE, COMMIT; requests
 *   queue on the row and every one succeeds. The better choice for a row this hot. It bumps the
 *   same `version`, so both modes may run against the same pet at once.
 *
 * Either way pet.power + 1 is written in the same transaction as the food (`afterUpdate`), only
 * when a food was taken, so at every moment power + count = the food the pet was given. A request
 * that finds no food left changes nothing. The summary line ('fed') says how many requests fed
 * the pet, found the bowl empty, retried, or gave up (optimistic only; counted, not thrown).
 *
 * ctx.db is a pool of 8 connections (module-host.ts), so at most 8 of the callers talk to the
 * database at the same moment — like the seed's 32 threads over a HikariCP pool of 10.
 *
 * Tables: jobs/sql/feed.sql (jobs/sql/feed.demo.sql gives pets 1 and 2 some food).
 *
 * Environment (job `env:`):
 *   FEED_MODE         optimistic | locked (default optimistic)
 *   FEED_PET          the pet's id (default 1)
 *   FEED_CALLERS      concurrent callers (default 32)
 *   FEED_REQUESTS     requests per caller (default 100; the seed: 1,000 in all)
 *   FEED_MAX_RETRIES  optimistic retries per request before giving up (default 1000)
 */
import type { Connection, RowDataPacket } from 'mysql2/promise';
import {
  OptimisticConflictError,
  updateLocked,
  updateOptimistic,
  type JobContext,
  type UpdateResult,
} from 'baton-cron';

interface Food extends RowDataPacket {
  pet_id: number;
  count: number;
  version: number;
}

function count(name: string, fallback: number, min: number): number {
  const text = process.env[name];
  const n = text == null || text === '' ? fallback : Number(text);
  if (!Number.isInteger(n) || n < min) throw new RangeError(`${name} must be an integer >= ${min}`);
  return n;
}

export default async function feed(ctx: JobContext): Promise<void> {
  const mode = process.env.FEED_MODE || 'optimistic';
  if (mode !== 'optimistic' && mode !== 'locked') {
    throw new RangeError(`FEED_MODE must be optimistic or locked, not ${mode}`);
  }
  const pet = count('FEED_PET', 1, 0);
  const callers = count('FEED_CALLERS', 32, 1);
  const requests = count('FEED_REQUESTS', 100, 1);
  const maxRetries = count('FEED_MAX_RETRIES', 1000, 0);

  const target = { table: 'food', key: { pet_id: pet } };
  /** One food, if there is one; null leaves the row alone. */
  const eat = (food: Food) => (Number(food.count) > 0 ? { count: Number(food.count) - 1 } : null);
  /** The other half of a feeding, in the same transaction. */
  const growPet = async (conn: Connection) => {
    await conn.query('UPDATE pet SET power = power + 1 WHERE id = ?', [pet]);
  };

  const tally = { fed: 0, empty: 0, retries: 0, gaveUp: 0 };
  const request = async (): Promise<void> => {
    let r: UpdateResult<Food>;
    try {
      r =
        mode === 'optimistic'
          ? await updateOptimistic<Food>(ctx.db, target, eat, { maxRetries, afterUpdate: growPet })
          : await updateLocked<Food>(ctx.db, target, eat, {
              versionColumn: 'version',
              afterUpdate: growPet,
            });
    } catch (err) {
      // Losing every race is an answer for an optimistic writer ("someone else is feeding").
      if (!(err instanceof OptimisticConflictError)) throw err;
      tally.gaveUp++;
      tally.retries += maxRetries;
      return;
    }
    tally.retries += r.attempts - 1;
    if (r.updated) tally.fed++;
    else tally.empty++;
  };

  ctx.log.info({ mode, pet, callers, requests }, 'feeding');
  await Promise.all(
    Array.from({ length: callers }, async () => {
      for (let i = 0; i < requests; i++) {
        ctx.signal.throwIfAborted();
        await request();
      }
    }),
  );
  const [[state]] = await ctx.db.query<RowDataPacket[]>(
    'SELECT f.count AS food, p.power AS power, f.version AS version FROM food f JOIN pet p ON p.id = f.pet_id WHERE f.pet_id = ?',
    [pet],
  );
  ctx.log.info(
    {
      mode,
      pet,
      requests: callers * requests,
      ...tally,
      food: Number(state?.food),
      power: Number(state?.power),
      version: Number(state?.version),
    },
    'fed',
  );
}
