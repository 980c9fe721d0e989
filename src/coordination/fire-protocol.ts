/**
 * The fire protocol: what every runner does at every fire of job J at instant T.
 *
 * Several runners (one per redundant server) wake for the same fire. Exactly one must run it, the
 * others must leave a row saying that they skipped and why. Two mechanisms make that hold:
 *
 * 1. The job's session lock, `GET_LOCK(lockName(J), 0)` on the runner's lock session. Whoever
 *    holds it is the only execution of J anywhere (scheduled, manual or catch-up): no overlap.
 *    It is re-entrant within a session, so the runner never asks for a lock it already holds —
 *    a fire of J that arrives while this runner still runs J is skipped before GET_LOCK.
 *    A return of 0 means another run holds it: record a skip that names the holder. NULL is an
 *    error (broken session), never a skip.
 *
 * 2. The fire key, `UNIQUE (namespace, job, scheduled_at, rerun, winner)`. The lock alone
 *    double-runs short jobs when hosts disagree about the time: a host 2 s late finds the lock free again
 *    after a 30 ms job. So the lock holder claims the fire by inserting the winner row; a
 *    duplicate key means this fire already ran elsewhere: release the lock and record a skip.
 *
 * Who asks first: each fire has a *first asker* (first-asker.ts), the runner that contends at the
 * instant; the others contend a lead later (`afterLead`). They, and a stale fire — contended more
 * than STALE_FIRE_MS after its planned start (its instant plus the job's jitter delay, if any),
 * by a runner that stalled or woke late — first look up the fire's winner, without the lock: a
 * fire that has one is skipped as taken or already run, and the job's lock stays free for the
 * runners on time and the job's next fire. Neither changes who may win: a fire with no winner yet
 * is contended as below.
 *
 * A lock met *passing* — its holder runs nothing: it is claiming this very fire, or giving the
 * lock back after a run that just ended or a fire the fire key refused it — is asked for again
 * for up to LOCK_PASSING_WAIT_MS, until the fire has a winner or the lock is free: a fire is not
 * left without a winner because every runner met a lock on its way back.
 *
 * The claim and the wait while the lock passes are in fire-protocol-claim.ts, the words of a
 * contention (its context, options and answer) in contention.ts.
 *
 * A claim the database does not take — no answer within the statement deadline (a table lock, an
 * ALTER, a backup's read lock), an error, or a fire still early by the database's clock after
 * 5 s — is closed (a claim that committed unseen is marked failed), the lock given back, and the
 * job not run. No look-back would record such a fire (the lock session stayed up), so the runner
 * keeps it and writes a `missed` row of kind `not-claimed` once the database answers
 * (fire/verdict-backlog.ts): in the fire key's `winner = 0` slot and only while the fire has no
 * winner, so it never stands beside a winner nor beside another runner's `missed` row.
 *
 * Together: one winner per fire, ever; no overlap while the lock holds; and the lock dies with its
 * session, so a crashed runner leaves nothing behind that needs a timeout to expire.
 *
 * The winner then runs the job (`fire/run-fire.ts`), writes the verdict while still holding the
 * lock (so a late host sees the fire as done, not free), and releases the lock in `finally`.
 *
 * The job's overlap policy changes step 1 only: `queue` keeps asking for the lock (without
 * blocking the shared lock session) until a deadline, `allow` takes no job lock at all — the
 * fire key alone then gives one winner per fire, and runs of different fires may overlap.
 *
 * A re-run (`baton run --fire T`, trigger `rerun`) is a new generation of fire T (`rerun` =
 * 1, 2, …; 0 when T never had a winner): the same steps, the same lock, a fire key place of its
 * own — so its generation, like every other, has one winner, and while it runs the job's lock
 * keeps every other run of the job (of this fire or any) out. Never stale: it is past on purpose.
 *
 * Fan-out (`workers: N`) repeats steps 1–2 over N worker slots: each slot has its own lock and
 * its own place in the fire key (`winner` = the slot), and a runner takes the first slot it can
 * get — at most one per fire. So up to N runners run the fire together, one per slot, and no
 * slot ever runs twice.
 */
import { findAttemptWinner, findWinnerOnHost } from '../store/fire-reads.js';
import type { Attempt } from '../store/runs.js';
import { jobLockName } from '../lock-names.js';
import {
  quiet,
  type ContendOptions,
  type Contention,
  type FireContext,
  type NotWon,
  type Prefetch,
  type ProtocolTimings,
  type Won,
} from './contention.js';
import {
  claim,
  contendWhileLockPasses,
  EARLY_CLAIM_LIMIT_MS,
  EARLY_CLAIM_RETRY_MS,
  LOCK_PASSING_FIRST_POLL_MS,
  LOCK_PASSING_WAIT_MS,
} from './fire-protocol-claim.js';
import { FireBatches } from './fire-batches.js';
import { describeHolder } from './lock-holder.js';
import * as skips from './skip-reasons.js';
import type { SkipReason } from './skip-reasons.js';

export type { ContendOptions, Contention, FireContext, ProtocolTimings } from './contention.js';
export { LOCK_PASSING_WAIT_MS };

/**
 * How long a runner that found the lock taken waits before it looks up who holds it. Nothing
 * waits on a skip row, while the winner's claim decides the fire's lag: three runners and the
 * server all working at the fire's instant on two cores made the claim wait its turn.
 */
export const DESCRIBE_DELAY_MS = 20;

/**
 * A fire contended this long after its instant is stale: its winner is looked up before its lock
 * is asked for (see `contend`). Far above the lag of a fire on time, which is milliseconds.
 */
export const STALE_FIRE_MS = 250;

function isStale(c: FireContext, attempt: Attempt): boolean {
  if (attempt.trigger === 'manual' || attempt.trigger === 'rerun') return false;
  const now = c.now?.().getTime() ?? Date.now();
  return now - (attempt.startAt ?? attempt.scheduledAt).getTime() > timingsOf(c).staleFireMs;
}

/** How often a queued fire asks for the lock again. Each ask is one cheap statement. */
export const QUEUE_POLL_MS = 250;

/** The protocol's windows by default: the constants above and in fire-protocol-claim.ts. */
export const PROTOCOL_TIMINGS: Readonly<ProtocolTimings> = {
  describeDelayMs: DESCRIBE_DELAY_MS,
  staleFireMs: STALE_FIRE_MS,
  queuePollMs: QUEUE_POLL_MS,
  lockPassingWaitMs: LOCK_PASSING_WAIT_MS,
  lockPassingFirstPollMs: LOCK_PASSING_FIRST_POLL_MS,
  earlyClaimRetryMs: EARLY_CLAIM_RETRY_MS,
  earlyClaimLimitMs: EARLY_CLAIM_LIMIT_MS,
};

const timingsOf = (c: FireContext): Readonly<ProtocolTimings> => c.timings ?? PROTOCOL_TIMINGS;

export async function contend(
  c: FireContext,
  attempt: Attempt,
  options: ContendOptions = {},
): Promise<Contention> {
  const batches = FireBatches.of(c.pool, c.namespace);
  // Manual runs and re-runs always get their row: the operator is told its id.
  const tally = options.skips === 'tally' && /^(schedule|catchup)$/.test(attempt.trigger);
  const skip = async ({ kind, text, sawWinner }: SkipReason): Promise<Contention> => {
    const row = { attempt, reason: text, kind, ...(tally && sawWinner ? { tally } : {}) };
    return { won: false, runId: await batches.skip.load(row), kind, reason: text };
  };

  const overlap = options.overlap ?? 'skip';
  const workers = options.workers ?? 1;
  if (workers === 1 && (options.afterLead || isStale(c, attempt))) {
    // A fire contended after its first asker's lead (first-asker.ts) has most likely been won by
    // it; one found this late (a runner thawed after a stall, a wake long behind) by a runner
    // that was on time. Look before anything else: the look is one statement for all of a turn's
    // such fires, where the lock, the pause and orphan reads and the holder's description would
    // be several; and holding the job's lock while the fire key refuses this fire would make the
    // runners on time skip the job's *next* fire, met at that very moment, and lose it.
    const winner = await batches.winner.load(attempt);
    if (winner) return skip(skips.fireHasWinner(winner));
  }
  const prefetch: Prefetch = {
    pause: quiet(options.pauseCheck ? batches.pause.load(attempt.job) : Promise.resolve(null)),
    orphans: overlap === 'skip' ? quiet(batches.orphans.load(attempt.job)) : null,
    ...(options.eventTargets ? { targets: options.eventTargets } : {}),
  };
  if (workers > 1) {
    // One slot per runner per fire: a second dispatch of the same fire here (a catch-up racing
    // the scheduled fire) must not take another slot.
    const mine = await findWinnerOnHost(
      c.pool,
      c.namespace,
      attempt.job,
      attempt.scheduledAt,
      c.host,
      attempt.rerun ?? 0,
    );
    if (mine) return skip(skips.slotAlreadyTaken(mine.workerSlot));
  }
  if (overlap === 'allow') {
    // No GET_LOCK, so no read-only check with it: ask on its own (a demoted primary must not
    // hand out winners, whichever policy).
    await c.lock.assertWritable();
    const pause = await prefetch.pause;
    if (pause) return skip(skips.paused(pause));
    for (let slot = 1; slot <= workers; slot++) {
      const won = await claim(c, { ...attempt, slot }, null, prefetch);
      if (won.won) return won;
      if (slot === workers) return skip(won.skip);
    }
  }
  const queued = overlap === 'queue' && options.queueUntil != null;
  // A queued fire that gives up says that it waited, and for what.
  const gaveUp = (holder: SkipReason): SkipReason => {
    if (!queued) return holder;
    return skips.gaveUpQueue(
      holder,
      options.signal?.aborted ? 'stopping' : { nextFire: options.queueUntil! },
    );
  };

  if (options.runningHere) {
    const pause = await prefetch.pause;
    if (pause) return skip(skips.paused(pause));
    return skip(gaveUp(skips.runningHere(c.host, options.runningHere)));
  }

  if (workers > 1) {
    // `baton run --wait` on a fan-out job: any slot that frees up will do, so poll them all
    // against one deadline rather than wait on each slot in turn.
    if ((options.waitSeconds ?? 0) > 0) {
      const deadline = Date.now() + options.waitSeconds! * 1000;
      const once = { ...options, waitSeconds: 0 };
      for (;;) {
        const won = await contendSlots(c, attempt, once, workers, gaveUp, prefetch);
        if (won.won || Date.now() >= deadline) return won.won ? won : skip(won.skip);
        await new Promise((r) => setTimeout(r, timingsOf(c).queuePollMs));
      }
    }
  }
  const won = await contendSlots(c, attempt, options, workers, gaveUp, prefetch);
  return won.won ? won : skip(won.skip);
}

/** Steps 1–2 over the worker slots: the first slot this runner can lock and claim. */
async function contendSlots(
  c: FireContext,
  attempt: Attempt,
  options: ContendOptions,
  workers: number,
  gaveUp: (holder: SkipReason) => SkipReason,
  prefetch: Prefetch,
): Promise<Won | NotWon> {
  // Every slot that could not be had, and why: the skip reason when none could. The holders of
  // busy slots are named only once no slot was won (see nameHolders).
  const busy: (SkipReason | null)[] = [];
  const held: { index: number; lockName: string; attempt: Attempt }[] = [];
  for (let slot = 1; slot <= workers; slot++) {
    const slotAttempt = { ...attempt, slot };
    const lockName = jobLockName(c.database, c.namespace, attempt.job, slot);
    const got = await acquire(c, lockName, slotAttempt, options);
    if (got === 'taken') {
      // While this fire waited in the queue, another runner won this very fire.
      const winner = await findAttemptWinner(c.pool, c.namespace, attempt);
      busy.push(skips.fireHasWinner(winner));
      continue;
    }
    if (got === 'busy') {
      // A paused job is skipped as paused by every runner, also by those that met the lock
      // of a runner that is just finding out.
      const pause = await prefetch.pause;
      if (pause) return { won: false, skip: skips.paused(pause) };
      held.push({ index: busy.push(null) - 1, lockName, attempt: slotAttempt });
      continue;
    }
    const pause = await prefetch.pause;
    if (pause) {
      await c.lock.release(lockName);
      return { won: false, skip: skips.paused(pause) };
    }
    const won = await claim(c, slotAttempt, lockName, prefetch);
    if (won.won) return won;
    busy.push(won.skip);
  }
  if (held.length > 0) {
    // The holder of a lock met at the fire's instant is usually claiming this very fire right
    // now: let its claim have the database (and, on a small machine, the CPU) first; its row is
    // then there to be named. Not for a queued fire that gave up (the holder is an earlier run)
    // nor one cut off by a stop.
    const queued = options.overlap === 'queue' && options.queueUntil != null;
    if (!queued && !options.signal?.aborted) {
      await new Promise((r) => setTimeout(r, timingsOf(c).describeDelayMs));
    }
    const named = await Promise.all(
      held.map((h) => describeHolder(c.pool, c.namespace, h.lockName, h.attempt)),
    );
    if (workers === 1 && !queued && named[0]!.passing != null) {
      // The lock is passing, not held by a run: ask again for a moment rather than leave the
      // fire without a winner (see LOCK_PASSING_WAIT_MS).
      const again = await contendWhileLockPasses(
        c,
        held[0]!.lockName,
        held[0]!.attempt,
        options,
        prefetch,
      );
      if (again.won) return again;
      return { won: false, skip: gaveUp(again.skip) };
    }
    held.forEach((h, i) => (busy[h.index] = gaveUp(named[i]!.skip)));
  }
  if (workers === 1) return { won: false, skip: busy[0]! };
  return { won: false, skip: skips.allSlotsTaken(busy as SkipReason[]) };
}

/**
 * GET_LOCK; for a queued fire, asked again every QUEUE_POLL_MS until `queueUntil` — unless
 * another runner wins this very fire meanwhile (`taken`): then there is nothing left to wait for.
 */
async function acquire(
  c: FireContext,
  lockName: string,
  attempt: Attempt,
  options: ContendOptions,
): Promise<'acquired' | 'busy' | 'taken'> {
  for (;;) {
    if (await c.lock.tryAcquire(lockName, options.waitSeconds ?? 0)) return 'acquired';
    const until = options.overlap === 'queue' ? options.queueUntil?.getTime() : undefined;
    if (until == null || options.signal?.aborted) return 'busy';
    if (await findAttemptWinner(c.pool, c.namespace, attempt)) return 'taken';
    const now = c.now?.().getTime() ?? Date.now();
    const wait = Math.min(timingsOf(c).queuePollMs, until - now);
    if (wait <= 0) return 'busy';
    await new Promise((r) => setTimeout(r, wait));
  }
}
