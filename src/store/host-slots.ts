/**
 * `baton_host_slots`: each runner host's slot in the fire key of `every: true` jobs
 * (docs/placement.md, coordination/fire-protocol.ts).
 *
 * A job that runs each fire once on every runner has one winner row per runner for each fire. The
 * fire key `(namespace, job, scheduled_at, rerun, winner)` already lets one fire have several
 * winners, one per `winner` slot (fan-out, `workers: N`); an `every` job's runner claims the
 * slot that is its host's for good. A fan-out runner takes the first free slot, because any
 * runner may have any slot; here the slot must not depend on the order the runners came in: a
 * restarted runner that took another slot could run a fire a second time. So the slot is written
 * down once per host and namespace, and read back on every later start.
 *
 * A host's slot is given on the first fire of an `every` job it contends for (or its first
 * `baton run` of one): the smallest slot not taken. Two hosts that pick the same slot at once meet
 * the UNIQUE (namespace, slot) key; the loser picks again. A slot is never given back by baton —
 * a host that comes back after months must find its own — so a namespace has at most
 * MAX_HOST_SLOTS hosts that ever ran `every` jobs; an operator frees the slot of a host gone for
 * good by deleting its row (docs/placement.md).
 */
import type { RowDataPacket } from 'mysql2/promise';
import { BatonError, isDuplicateKeyError, isLockConflictError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import type { Queryable } from './deadline.js';

/** `baton_runs.winner` is a TINYINT: slots 1..127 (0 is a `missed` row's). */
export const MAX_HOST_SLOTS = 127;

/** How often a host picks again after another host took the same slot at the same moment. */
const PICK_ATTEMPTS = 20;

/** Every slot of a namespace is some host's: no further host can run `every` jobs there. */
function slotsFull(namespace: string, host: string): BatonError {
  return new BatonError(
    'HOST_SLOTS_FULL',
    `${host} cannot run \`every\` jobs: all ${MAX_HOST_SLOTS} runner slots of namespace ` +
      `${namespace} are taken by other hosts (baton_host_slots); delete the rows of hosts ` +
      'gone for good (docs/placement.md)',
    ExitCode.Software,
  );
}

/**
 * The slots already read, by pool: a host's slot never changes while its row stays, so one read
 * per pool (a reconnect opens a new pool and reads again) keeps the look-up off every fire.
 */
const slotsByPool = new WeakMap<object, Map<string, number>>();

/** `host`'s slot in `namespace`, given now if it has none yet. */
export async function hostSlot(db: Queryable, namespace: string, host: string): Promise<number> {
  let cache = slotsByPool.get(db);
  if (!cache) slotsByPool.set(db, (cache = new Map()));
  const key = `${namespace}\0${host}`;
  const cached = cache.get(key);
  if (cached != null) return cached;
  const slot = await readOrGiveSlot(db, namespace, host);
  cache.set(key, slot);
  return slot;
}

async function readOrGiveSlot(db: Queryable, namespace: string, host: string): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    // Which row is this host's is the column's collation to say (case-insensitive, as the
    // registry's host): `EV-1` and `ev-1` are one host there, and must be one here too, or the
    // second would miss its own row and fail its insert at every fire.
    const [rows] = await db.query<RowDataPacket[]>(
      'SELECT slot, host = ? AS own FROM baton_host_slots WHERE namespace = ? ORDER BY slot',
      [host, namespace],
    );
    const own = rows.find((r) => Number(r.own) === 1);
    if (own) return Number(own.slot);
    const slot = firstFree(rows.map((r) => Number(r.slot)));
    if (slot == null) throw slotsFull(namespace, host);
    try {
      await db.query(
        'INSERT INTO baton_host_slots (namespace, host, slot, created_at) VALUES (?, ?, ?, NOW(3))',
        [namespace, host, slot],
      );
      return slot;
    } catch (err) {
      // Another host took this slot meanwhile (or another process of this host gave it its
      // slot): read again.
      if (attempt >= PICK_ATTEMPTS || !(isDuplicateKeyError(err) || isLockConflictError(err))) {
        throw err;
      }
    }
  }
}

/** The smallest slot of 1..MAX_HOST_SLOTS not in `taken` (sorted), or null. */
export function firstFree(taken: readonly number[]): number | null {
  let slot = 1;
  for (const t of taken) {
    if (t > slot) break;
    if (t === slot) slot++;
  }
  return slot <= MAX_HOST_SLOTS ? slot : null;
}
