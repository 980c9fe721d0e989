/**
 * Each pool's slots and who holds them (docs/pools.md), as `baton status`, the dashboard and
 * `/metrics` show them. The server says which slots are taken (the slots are named locks); the
 * history says by which runs (store/pool-reads.ts). A pool of `scope: host` is shown per host:
 * the hosts asked about (the live runners for a view of the fleet, its own for a runner's metric).
 */
import type { PoolDefinition, PoolScope } from '../config/pools.js';
import { poolSlotNames } from '../coordination/pool-slots.js';
import type { Queryable } from '../store/deadline.js';
import { poolUses, type PoolHolderRun, type PoolUse } from '../store/pool-reads.js';

/** The slots of one scope: the fleet's (`host` null), or one host's. */
export interface PoolPlaceUse {
  host: string | null;
  used: number;
  slots: number;
}

export interface PoolStatus {
  name: string;
  /** Slots per place (the fleet's, or each host's). */
  slots: number;
  scope: PoolScope;
  /** The fleet's slots, or each host's asked about. */
  places: PoolPlaceUse[];
  /** The runs holding slots, oldest first. */
  runs: PoolHolderRun[];
  /** Holders between taking their slot and writing their claim. */
  claiming: PoolUse['claiming'];
}

export async function readPoolStatus(
  db: Queryable,
  where: { database: string; namespace: string },
  pools: readonly PoolDefinition[],
  hosts: readonly string[],
): Promise<PoolStatus[]> {
  const asks = pools.flatMap((pool) =>
    (pool.scope === 'host' ? hosts : [null]).map((host) => ({
      pool,
      host,
      ask: { pool: pool.name, slotNames: poolSlotNames({ ...where, host: host ?? '' }, pool) },
    })),
  );
  const uses = await poolUses(
    db,
    where.namespace,
    asks.map((a) => a.ask),
  );
  return pools.map((pool) => {
    const mine = asks.flatMap((a, i) => (a.pool === pool ? [{ host: a.host, use: uses[i]! }] : []));
    const runs = new Map(mine.flatMap(({ use }) => use.runs.map((r) => [r.id, r] as const)));
    return {
      name: pool.name,
      slots: pool.slots,
      scope: pool.scope,
      places: mine.map(({ host, use }) => ({ host, used: use.used, slots: use.slots })),
      runs: [...runs.values()].sort((x, y) => x.startedAt.getTime() - y.startedAt.getTime()),
      claiming: mine.flatMap(({ use }) => use.claiming),
    };
  });
}

/** How many of the pool's slots are taken, over the places shown. */
export function slotsInUse(pool: PoolStatus): number {
  return pool.places.reduce((n, p) => n + p.used, 0);
}
