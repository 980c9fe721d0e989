/**
 * Pools (docs/pools.md): at most N runs of a group of jobs at once, across the fleet or on each
 * server. Plain values and words, no schema (the daemon imports this, never zod: see defaults.ts).
 *
 * - `pools: {warehouse: {slots: 2}}` at the top of the file: a fleet-wide pool of two slots;
 *   `{slots: 1, scope: host}`: one slot on each server (each host its own slots).
 * - A job's `pool: warehouse`: each of its runs (each fan-out worker, each `every` runner's run)
 *   holds one of the pool's slots from before it starts until its verdict is written and its
 *   processes are gone — a named lock on the runner's lock session, like the job's own, so a slot
 *   dies with the session of a runner that dies (coordination/pool-slots.ts).
 * - `poolFull: skip` (the default): a fire that finds every slot taken is skipped, a `skipped`
 *   row of kind `pool` naming the holders; `queue`: it waits for a slot, at most until the job's
 *   next fire (docs/pools.md says who waits and what the other runners record meanwhile).
 */

export const POOL_SCOPES = ['fleet', 'host'] as const;
export type PoolScope = (typeof POOL_SCOPES)[number];

export const POOL_FULL_POLICIES = ['skip', 'queue'] as const;
export type PoolFullPolicy = (typeof POOL_FULL_POLICIES)[number];

/**
 * The most slots a pool may have: a slot is a named lock, and a fire asks for every free one in
 * one statement (a CASE over the names); a hundred is far past "how many may hit the warehouse".
 */
export const MAX_POOL_SLOTS = 100;

/** A pool as the file declares it (`pools:`). */
export interface PoolDefinition {
  name: string;
  slots: number;
  scope: PoolScope;
}

/** A job's pool as loaded: the pool itself, and what the job does when it is full. */
export interface JobPool extends PoolDefinition {
  full: PoolFullPolicy;
}

/** `warehouse (2 slots)`, `sftp (1 slot per host)`: how a pool is named to an operator. */
export function describePool(pool: PoolDefinition): string {
  const slots = `${pool.slots} slot${pool.slots === 1 ? '' : 's'}`;
  return `${pool.name} (${slots}${pool.scope === 'host' ? ' per host' : ''})`;
}
