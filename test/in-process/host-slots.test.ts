/**
 * A host's slot for `every: true` (store/host-slots.ts) against the real table: given once, kept
 * for good, and found by the column's own comparison — host ids that differ only in case are one
 * host there (as in the registry), so the second is given the first one's slot instead of failing
 * its insert at every fire (the attacker's `ev-x` beside `EV-X`: one never ran).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostSlot } from '../../src/store/host-slots.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('host_slots', { migrated: true });
});
afterAll(async () => {
  await db?.drop();
});

/** A fresh queryable each time: the slots read are remembered per pool (or connection). */
const fresh = () => ({ query: db.conn.query.bind(db.conn) }) as Parameters<typeof hostSlot>[0];

describe('a host slot', () => {
  it('is the smallest free one, kept for good, and the same for an id differing only in case', async () => {
    expect(await hostSlot(fresh(), 'ns', 'EV-X')).toBe(1);
    expect(await hostSlot(fresh(), 'ns', 'other')).toBe(2);
    expect(await hostSlot(fresh(), 'ns', 'EV-X')).toBe(1);
    expect(await hostSlot(fresh(), 'ns', 'ev-x')).toBe(1);
    // Another namespace counts from 1 again.
    expect(await hostSlot(fresh(), 'ns2', 'ev-x')).toBe(1);
    const rows = await db.query<{ namespace: string; host: string; slot: number }>(
      'SELECT namespace, host, slot FROM baton_host_slots ORDER BY namespace, slot',
    );
    expect(rows).toEqual([
      { namespace: 'ns', host: 'EV-X', slot: 1 },
      { namespace: 'ns', host: 'other', slot: 2 },
      { namespace: 'ns2', host: 'ev-x', slot: 1 },
    ]);
  });
});
