/**
 * Seed 004, the counter race ("feed"), done right with `updateLocked` (SELECT … FOR UPDATE): 32
 * concurrent callers × 250 requests each (the seed's 1,000: BATON_TEST_FEED_REQUESTS=1000) on one
 * hot row — food.count down by one and pet.power up by one in the same transaction — end with the
 * counts matching EXACTLY (food 0, power 32 × the requests). The naive read-modify-write, in the same harness, loses updates: the harness can see
 * the race. One process, a pool of 32 connections (see sdk-feed-optimistic.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { RowNotFoundError, updateLocked } from '../../src/sdk/index.js';
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

const feed = useFeed('sdk_feed_locked');
const food1 = { table: 'food', key: { pet_id: 1 } };

describe(`${CALLERS} callers × ${REQUESTS} requests on one counter row`, () => {
  it('the naive read-modify-write loses updates (the harness can see the race)', async () => {
    await callers(50, async () => {
      const conn = await feed.pool.getConnection();
      try {
        const [[food]] = await conn.query<Food[]>('SELECT * FROM food WHERE pet_id = 1');
        await conn.query('UPDATE food SET count = ? WHERE pet_id = 1', [food!.count - 1]);
      } finally {
        conn.release();
      }
    });
    expect((await state(feed.db)).food).toBeGreaterThan(FOOD - CALLERS * 50);
  });

  it('pessimistic: the counts match exactly', { timeout: 240_000 }, async () => {
    await callers(REQUESTS, async () => {
      const r = await updateLocked<Food>(feed.pool, food1, eat, { afterUpdate: growPet });
      expect(r).toMatchObject({ updated: true, attempts: 1 });
    });
    expect(await state(feed.db)).toEqual({ food: 0, power: FOOD, version: 0 });
    const none = await updateLocked<Food>(feed.pool, food1, eat, { afterUpdate: growPet });
    expect(none).toMatchObject({ updated: false });
    expect(await state(feed.db)).toEqual({ food: 0, power: FOOD, version: 0 });
  });
});

describe('failure paths', () => {
  it('throws RowNotFoundError for a missing row, and rolls back what compute wrote', async () => {
    await expect(
      updateLocked(feed.pool, { table: 'food', key: { pet_id: 404 } }, () => ({ count: 1 })),
    ).rejects.toThrow(/no row in food with pet_id=404/);
    await expect(
      updateLocked<Food>(feed.pool, food1, async (_food, conn) => {
        await growPet(conn);
        throw new Error('the pet ran away');
      }),
    ).rejects.toThrow('the pet ran away');
    expect(await state(feed.db)).toEqual({ food: FOOD, power: 0, version: 0 });
    await expect(
      updateLocked(feed.pool, { table: 'food', key: { pet_id: 404 } }, () => null),
    ).rejects.toBeInstanceOf(RowNotFoundError);
  });
});
