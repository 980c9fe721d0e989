/**
 * A run's slot in its job's pool (docs/pools.md), the step the fire protocol takes between the
 * job's lock and the claim (fire-protocol.ts, `claim`).
 *
 * A pool of N slots is N named locks (lock-names.ts `poolSlotLockName`); a run holds one, on its
 * runner's lock session beside the job's lock, until its verdict is written and the lock given
 * back. So "at most N at once" is the server's to keep, as "no overlap" is: a slot is either held
 * by one session or free, and it dies with the session of a runner that dies — no slot leaks, no
 * timeout to wait for. A pool of `scope: host` has N slots per host: its lock names carry the host.
 *
 * The slot is asked for after the job's lock, so that of the runners that see a fire only the one
 * that may run it takes a slot (the others would hold slots for nothing while they lose the fire,
 * and keep the pool's other jobs out). Who holds the slots is read only when none could be had,
 * to name them in the skip.
 *
 * A `poolFull: skip` fire that finds the pool full is decided, for the fleet: the runners that
 * contend it after the first asker's lead, or meet its lock on the way back, find that skip where
 * they look for the fire's winner (fire-batches.ts `poolSkipOf`) and skip it too, rather than take
 * its lock again and run it in a slot freed a moment later. So a full pool costs the fleet what a
 * fire with a winner costs, and the fire's outcome does not depend on who asked when. (A runner
 * that asks at the very moment the first one gives the lock back may still find a slot and run
 * it: once, late, within the pool's N.)
 */
import type { JobPool, PoolDefinition } from '../config/pools.js';
import { poolSlotLockName } from '../lock-names.js';
import type { PoolUse } from '../store/pool-reads.js';
import type { FireContext, PoolClaim } from './contention.js';
import type { PoolWaitEnd } from './skip-reasons.js';
import { FireBatches } from './fire-batches.js';

/** Where slots are looked for: the database and namespace, and the host (a host pool's). */
export interface PoolPlace {
  database: string;
  namespace: string;
  host: string;
}

/** The slots of `pool` a runner of `place` may take, by lock name (slot 1 first). */
export function poolSlotNames(place: PoolPlace, pool: PoolDefinition): string[] {
  const host = pool.scope === 'host' ? place.host : null;
  return Array.from({ length: pool.slots }, (_, i) =>
    poolSlotLockName(place.database, place.namespace, pool.name, i + 1, host),
  );
}

export type PoolSlot =
  /** `waited`: the slot came after a wait (what was read before it may be stale). */
  | { lockName: string; waited: boolean }
  /** Every slot was taken (and stayed so until the wait ended, for a fire that waits). */
  | { full: PoolUse; gaveUp?: PoolWaitEnd };

/**
 * Takes a free slot of the pool; a queued fire asks again every `pollMs` until `until`. Each ask
 * is one statement on the lock session (`LockSession.tryAcquireFirst`).
 */
export async function takePoolSlot(
  c: FireContext,
  claim: PoolClaim,
  pollMs: number,
): Promise<PoolSlot> {
  const ask = { pool: claim.pool.name, slotNames: claim.slotNames };
  // Who holds the slots, to name them in the skip. Only words: a read that fails leaves them out
  // rather than turn a full pool into an error (every slot was just refused to this runner).
  const full = (): Promise<PoolUse> =>
    FireBatches.of(c.pool, c.namespace)
      .poolUse.load(ask)
      .catch(() => ({
        used: ask.slotNames.length,
        slots: ask.slotNames.length,
        runs: [],
        claiming: [],
      }));
  for (let waited = false; ; waited = true) {
    // A reload during the wait may have changed the pool (or taken the job out of it, or the job
    // away): its slots are not these any more.
    const current = !waited ? claim.pool : claim.current ? claim.current() : claim.pool;
    if (!current || !samePool(current, claim.pool)) {
      return { full: await full(), gaveUp: 'changed' };
    }
    // A runner that began to stop during the wait asks for nothing more.
    const stopping = claim.signal?.aborted === true;
    if (waited && stopping) return { full: await full(), gaveUp: 'stopping' };
    const lockName = await c.lock.tryAcquireFirst(claim.slotNames);
    if (lockName) return { lockName, waited };
    const until = claim.until?.getTime();
    const now = c.now?.().getTime() ?? Date.now();
    if (until == null) {
      const use = await full();
      // A holder ended between the refusal and the read of who holds the slots (a loaded
      // machine, a run that ended at the instant): the pool is not full now, and skipping the
      // fire would lose it for nothing — said "0 of 2 taken". Its slots are asked for again, once.
      if (use.used < use.slots) {
        const freed = await c.lock.tryAcquireFirst(claim.slotNames);
        if (freed) return { lockName: freed, waited };
      }
      return { full: use };
    }
    if (stopping || until - now <= 0) {
      const end: PoolWaitEnd = stopping
        ? 'stopping'
        : claim.waitFor === 'operator'
          ? { waitedUntil: claim.until! }
          : { nextFire: claim.until! };
      return { full: await full(), gaveUp: end };
    }
    await waitFor(Math.min(pollMs, until - now), claim);
  }
}

/** The same pool, of the same size and scope (and what a fire does when it is full). */
function samePool(a: JobPool, b: JobPool): boolean {
  return a.name === b.name && a.slots === b.slots && a.scope === b.scope && a.full === b.full;
}

/** Sleeps `ms`, or less if the runner begins to stop meanwhile. */
function waitFor(ms: number, claim: PoolClaim): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    claim.signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      claim.signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}
