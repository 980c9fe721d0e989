/**
 * Step 2 of the fire protocol (fire-protocol.ts): the claim of a fire whose lock this runner
 * holds — the winner row under the fire key, inserted once the database's clock has reached the
 * fire — and the short wait of a runner that met the job's lock *passing* (its holder runs
 * nothing), which asks again until the fire has a winner or the lock is its own.
 */
import { errorMessage } from '../errors.js';
import { StatementTimeoutError } from '../store/deadline.js';
import { abandonClaim, claimFires } from '../store/fire-writes.js';
import { findAttemptWinner } from '../store/fire-reads.js';
import type { Attempt } from '../store/runs.js';
import type { ContendOptions, FireContext, NotWon, Prefetch, Won } from './contention.js';
import { FireBatches } from './fire-batches.js';
import { describeHolder } from './lock-holder.js';
import { declareLost, reapOrphanRuns } from './reaper.js';
import * as skips from './skip-reasons.js';
import type { SkipReason } from './skip-reasons.js';

/**
 * Step 2: the fire key, for the attempt's worker slot. With `lockName` null (overlap `allow`)
 * there is no lock to give back. A slot of this fire that already has a winner is not an error
 * but an answer: `{ won: false, skip }`, with the lock released.
 */
export async function claim(
  c: FireContext,
  attempt: Attempt,
  lockName: string | null,
  prefetch: Prefetch,
): Promise<Won | NotWon> {
  let claimed: number | 'taken';
  try {
    if (lockName) {
      // The lock is ours, so any earlier run of the job that still says `running` is dead.
      const scope = {
        namespace: c.namespace,
        job: attempt.job,
        serverStartedBefore: new Date(0),
        noticedBy: c.host,
        occasion: "when it took the job's lock",
        targetsOf: () => prefetch.targets,
      };
      if (prefetch.orphans) await declareLost(c.pool, await prefetch.orphans, scope);
      else await reapOrphanRuns(c.pool, scope);
    }
    claimed = await claimWhenDue(c, attempt, lockName != null);
  } catch (err) {
    // The insert may have committed although its answer was lost (a timeout): leave no row
    // `running` behind a lock that is about to be released.
    const abandoned = await abandonClaim(c.pool, attempt, c.lock.connectionId, errorMessage(err))
      .then(() => true)
      .catch(() => false);
    if (lockName) await c.lock.release(lockName);
    throw new ClaimNotRecordedError(
      { attempt, lockConnectionId: c.lock.connectionId, abandoned, locked: lockName != null },
      err,
    );
  }
  if (claimed !== 'taken') return { won: true, runId: claimed, lockName, slot: attempt.slot ?? 1 };
  if (lockName) await c.lock.release(lockName);
  const winner = await findAttemptWinner(c.pool, c.namespace, attempt, attempt.slot);
  return { won: false, skip: skips.claimedElsewhere(winner) };
}

/** A claim that failed: enough to record the fire later, and to close a claim that committed. */
export interface UnrecordedClaim {
  /** The fire, with the worker slot that was claimed. */
  attempt: Attempt;
  lockConnectionId: number;
  /** Whether `abandonClaim` got through (else it is to be done again before the row). */
  abandoned: boolean;
  /** Whether the runner held the job's lock for it (every overlap policy but `allow`). */
  locked: boolean;
}

/**
 * A claim that could not be written (the database did not answer within the deadline, it
 * refused the insert, or its clock had not reached the fire after EARLY_CLAIM_LIMIT_MS): the fire was
 * contended, the lock held and given back, and the job not run. Nothing else records such a
 * fire — the lock session stayed up, so no look-back marks it `missed` — so the runner keeps
 * `claim` to write a `missed` row of kind `not-claimed` once the database answers
 * (fire/verdict-backlog.ts). The message is the cause's; fire/run-fire.ts passes the cause on.
 */
export class ClaimNotRecordedError extends Error {
  constructor(
    readonly claim: UnrecordedClaim,
    cause: unknown,
  ) {
    super(errorMessage(cause), { cause });
    this.name = 'ClaimNotRecordedError';
  }

  /** The `missed` row's reason: why the claim was not written, first (explain cuts it). */
  reason(host: string): string {
    const cause = this.cause;
    const why =
      cause instanceof StatementTimeoutError
        ? `the database did not answer within ${cause.ms / 1000} s`
        : this.message;
    const held = this.claim.locked ? "held the job's lock" : 'contended it';
    return `claim not recorded: ${why} (${host} ${held}; the job did not run)`;
  }
}

/** How often a claim that came early (by the database's clock) asks again. */
export const EARLY_CLAIM_RETRY_MS = 5;
/** Beyond this, "early" is not a clock error of milliseconds but a wrong fire: give up. */
export const EARLY_CLAIM_LIMIT_MS = 5_000;

/**
 * Inserts the winner row as soon as the database's clock has reached the fire. Runners fire by
 * the database's clock already, so this waits at most the error of the offset estimate (a
 * millisecond or so); it turns "never before its instant" from an estimate into a guarantee.
 */
async function claimWhenDue(
  c: FireContext,
  attempt: Attempt,
  locked: boolean,
): Promise<number | 'taken'> {
  // Claims under their job's lock are batched. Lock-free ones (`allow`) race the other runners
  // for the same fire keys: alone, each gets its answer without holding up a batch.
  const claim = { attempt, lockConnectionId: c.lock.connectionId };
  const batched = FireBatches.of(c.pool, c.namespace).claim;
  const limitMs = c.timings?.earlyClaimLimitMs ?? EARLY_CLAIM_LIMIT_MS;
  const retryMs = c.timings?.earlyClaimRetryMs ?? EARLY_CLAIM_RETRY_MS;
  const giveUpAt = Date.now() + limitMs;
  for (;;) {
    const result = locked ? await batched.load(claim) : (await claimFires(c.pool, [claim]))[0]!;
    if (result === 'taken') return result;
    if (result !== 'early') return result.runId;
    if (Date.now() > giveUpAt) {
      throw new Error(
        `the fire ${iso(attempt.scheduledAt)} is still in the future by the database's clock ` +
          `after ${limitMs / 1000} s`,
      );
    }
    await new Promise((r) => setTimeout(r, retryMs));
  }
}

/**
 * How long a fire whose job's lock is *passing* — its holder runs nothing: it is writing its claim
 * of this very fire, or giving the lock back after a run that just ended or after a fire the
 * fire key refused it — asks for the lock again before it gives up. Without it, a short job that
 * ends at the next fire's instant, or a runner on a slow link holding the lock while the fire key
 * refuses it a fire already run, leaves the next fire without any winner: every runner met the
 * lock.
 */
export const LOCK_PASSING_WAIT_MS = 1_000;
/**
 * The first wait before asking again; each next one is twice as long. Few looks per fire (five
 * in the second), each batched with the other fires' of the same turn (`FireBatches.holder`):
 * in a storm of fires, where most losers meet a winner still claiming, the looks must not
 * become a storm of their own.
 */
export const LOCK_PASSING_FIRST_POLL_MS = 50;

/**
 * Asks for the lock again while it passes (see LOCK_PASSING_WAIT_MS): a winner of this fire
 * showing up ends the wait (the fire is taken), the lock coming free means this runner claims
 * the fire as usual, and a holder that turns out to run the job is an overlap.
 */
export async function contendWhileLockPasses(
  c: FireContext,
  lockName: string,
  attempt: Attempt,
  options: ContendOptions,
  prefetch: Prefetch,
): Promise<Won | NotWon> {
  const deadline = performance.now() + (c.timings?.lockPassingWaitMs ?? LOCK_PASSING_WAIT_MS);
  let last: SkipReason | null = null;
  for (let wait = c.timings?.lockPassingFirstPollMs ?? LOCK_PASSING_FIRST_POLL_MS; ; wait *= 2) {
    const left = deadline - performance.now();
    if (left <= 0 || options.signal?.aborted || !c.lock.usable) break;
    await new Promise((r) => setTimeout(r, Math.min(wait, left)));
    const holder = await describeHolder(c.pool, c.namespace, lockName, attempt);
    last = holder.skip;
    if (holder.passing == null) return { won: false, skip: holder.skip };
    if (holder.passing === 'free' && (await c.lock.tryAcquire(lockName, 0))) {
      const pause = await prefetch.pause;
      if (pause) {
        await c.lock.release(lockName);
        return { won: false, skip: skips.paused(pause) };
      }
      return claim(c, attempt, lockName, prefetch);
    }
  }
  return {
    won: false,
    skip: last ?? (await describeHolder(c.pool, c.namespace, lockName, attempt)).skip,
  };
}

const iso = (d: Date): string => d.toISOString();
