/**
 * Seed 004, the counter race ("feed"), done right with `updateOptimistic`: 32 concurrent callers
 * × 250 requests each (the seed's 1,000 with BATON_TEST_FEED_REQUESTS=1000) on one hot row —
 * food.count down by one and pet.power up by one in the same transaction — end with the counts
 * matching EXACTLY (food 0, power and version 32 × the requests). Failure paths: the retry bound (OptimisticConflictError, nothing written), a missing
 * row, and a locked writer that bumps the version so an optimistic writer notices it.
 *
 * One process, a pool of 32 connections: the race is between database sessions, which the pool
 * gives; 32 processes would only add start-up time. 32,000 requests took 35–75 s on the
 * shared 2-core test machine (every request is a commit on one row, and many optimistic attempts
 * lose the race: the reason to prefer updateLocked for a row this hot). The locked variant and the
 * naive baseline are in sdk-feed-locked.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  OptimisticConflictError,
  RowNotFoundError,
  updateLocked,
  updateOptimistic,
} from '../../src/sdk/index.js';
import {
  CALLERS,
  callers,
  eat,
  FOOD,
  growPet,
  REQUESTS,
  state,
  useFeed,
  type Food,
} from '../fixtures/sdk-feed.js';

const feed = useFeed('sdk_feed_opt');
const food1 = { table: 'food', key: { pet_id: 1 } };

describe(`${CALLERS} callers × ${REQUESTS} requests on one counter row`, () => {
  it('optimistic: the counts match exactly', { timeout: 240_000 }, async () => {
    let retried = 0;
    await callers(REQUESTS, async () => {
      const r = await updateOptimistic<Food>(feed.pool, food1, eat, {
        maxRetries: 10_000,
        afterUpdate: growPet,
      });
      expect(r.updated).toBe(true);
      retried += r.attempts - 1;
    });
    expect(await state(feed.db)).toEqual({ food: 0, power: FOOD, version: FOOD });
    expect(retried, 'callers collided and retried').toBeGreaterThan(0);
    // Nothing left: the next request changes nothing.
    const none = await updateOptimistic<Food>(feed.pool, food1, eat, { afterUpdate: growPet });
    expect(none).toMatchObject({ updated: false, attempts: 1 });
    expect(await state(feed.db)).toEqual({ food: 0, power: FOOD, version: FOOD });
  });
});

describe('failure paths', () => {
  it('gives up after maxRetries with OptimisticConflictError, writing nothing', async () => {
    let attempts = 0;
    const lost = updateOptimistic<Food>(
      feed.pool,
      food1,
      async (food) => {
        attempts++;
        // Another writer gets in between the read and the write, every time.
        await feed.db.query('UPDATE food SET version = version + 1 WHERE pet_id = 1');
        return { count: food.count - 1 };
      },
      { maxRetries: 3, afterUpdate: growPet },
    );
    await expect(lost).rejects.toThrow(OptimisticConflictError);
    await expect(lost).rejects.toThrow(/food pet_id=1 gave up after 4 attempts/);
    expect(attempts).toBe(4);
    expect(await state(feed.db)).toEqual({ food: FOOD, power: 0, version: 4 });
  });

  it('throws RowNotFoundError for a missing row', async () => {
    await expect(
      updateOptimistic(feed.pool, { table: 'food', key: { pet_id: 404 } }, () => ({ count: 1 })),
    ).rejects.toThrow(RowNotFoundError);
  });

  it('retries when a locked writer (given the version column) got in between', async () => {
    let attempts = 0;
    const r = await updateOptimistic<Food>(feed.pool, food1, async (food) => {
      if (attempts++ === 0) {
        await updateLocked<Food>(feed.pool, food1, (f) => ({ count: f.count - 10 }), {
          versionColumn: 'version',
        });
      }
      return { count: food.count - 1 };
    });
    expect(r).toMatchObject({ updated: true, attempts: 2 });
    // Both writes count: 10 by the locked writer, 1 by the optimistic one after its retry.
    expect(await state(feed.db)).toEqual({ food: FOOD - 11, power: 0, version: 2 });
  });
});
