/**
 * Who holds a job's lock that a fire could not get, as the skip reason that fire records — and
 * whether the lock is only *passing*: its holder runs nothing (it is claiming this very fire, or
 * giving the lock back after a run that just ended or a fire the fire key refused it), so that
 * looking again may well find the fire's winner or the lock free (fire-protocol.ts,
 * `contendWhileLockPasses`).
 *
 * It does not wait for the holder's row itself: a holder without one is between its GET_LOCK and
 * its INSERT, and the registry names its host.
 */
import type { Queryable } from '../store/deadline.js';
import type { Attempt } from '../store/runs.js';
import { FireBatches } from './fire-batches.js';
import * as skips from './skip-reasons.js';
import type { SkipReason } from './skip-reasons.js';

export interface LockHolder {
  skip: SkipReason;
  /** `free`: released meanwhile, no winner yet; `held`: by a runner claiming; null: for good. */
  passing: 'free' | 'held' | null;
}

/**
 * The holder of `lockName`, seen from `attempt`. `slot`: the fire's winner is looked for in that
 * slot only (an `every` job's runner, in its host's); else any slot's winner is the fire's.
 * `fullPoolSettles`: a skip of the fire for its full fleet-wide pool decided it too.
 */
export async function describeHolder(
  pool: Queryable,
  namespace: string,
  lockName: string,
  attempt: Attempt,
  slot?: number,
  fullPoolSettles = false,
): Promise<LockHolder> {
  // On the pool: IS_USED_LOCK answers the same on any connection, and the lock session, which
  // every GET_LOCK and RELEASE_LOCK of this runner goes through, is the runner's narrowest path
  // when many jobs fire at once. One batched read for all the fires lost in the same turn.
  const facts = await FireBatches.of(pool, namespace).holder.load({
    lockName,
    job: attempt.job,
    scheduledAt: attempt.scheduledAt,
    rerun: attempt.rerun ?? 0,
    ...(slot != null ? { slot } : {}),
    ...(fullPoolSettles ? { fullPoolSettles } : {}),
  });
  const final = (skip: SkipReason): LockHolder => ({ skip, passing: null });
  if (facts.holder == null) {
    // Released in the meantime: usually by the winner of this very fire, already done — or by a
    // runner that found the job's pool full and skipped the fire for the fleet.
    if (facts.winner) return final(skips.fireHasWinner(facts.winner));
    if (facts.poolSkip) return final(skips.poolDecided(facts.poolSkip));
    return { skip: skips.lockFreedMeanwhile(), passing: 'free' };
  }
  if (facts.run) return final(skips.heldByRun(facts.run, attempt.scheduledAt, attempt.trigger));
  // No running row: the holder may have just finished this very fire (its verdict is written
  // before its lock is released)…
  if (facts.winner) return final(skips.fireHasWinner(facts.winner));
  // …or have skipped it, its pool full…
  if (facts.poolSkip) return final(skips.poolDecided(facts.poolSkip));
  // …or be writing its claim right now.
  if (facts.host) return { skip: skips.beingClaimed(facts.host), passing: 'held' };
  return final(skips.heldByUnknown(facts.holder));
}
