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
 * The words of a contention (its context, options and answer) are in contention.ts; who holds a
 * busy lock is lock-holder.ts's to find, and how a skip reads, skip-reasons.ts's.
 *
 * A claim the database does not take — no answer within the statement deadline (a table lock, an
 * ALTER, a backup's read lock), an error, or a fire still early by the database's clock after
 * 5 s — is closed (a claim that committed unseen is marked failed), the lock given back, and the
 * job not run. No look-back would record such a fire (the lock session stayed up), so the runner
 * keeps it and writes a `missed` row of kind `not-claimed` once the database answers
 * (fire/verdict-backlog.ts): in the fire key's `winner = 0` slot and only while the fire has no
 * winner, so it never stands beside a winner nor beside another runner's `missed` row.
 *
 * A scheduled fire's claim is also fenced by the job's schedule as the database has it (the
 * timing version in force at the instant; a schedule created at run time, its row): a runner
 * whose read of them is stale claims nothing of a schedule the fleet has left, and skips
 * (store/fire-writes.ts `definitionFence`).
 *
 * Together: one winner per fire, ever; no overlap while the lock holds; and the lock dies with its
 * session, so a crashed runner leaves nothing behind that needs a timeout to expire.
 *
 * Fencing (issue 43). No overlap of *starts* is not no overlap of *effects*: a run baton gave up
 * on — its session lost, its lease lapsed, a timeout, a kill, a stop past the grace — may live on
 * (an in-process handler that ignores `ctx.signal`, a frozen host that thaws), and write after the
 * next run of its job started. So every run has a **fence**, its run id: ids only grow, and after
 * a failover they move past every id the old primary gave out before any fire is contended
 * (store/failovers.ts), so a fence never goes backwards. A winner under the job's lock, in this
 * order, before its run starts:
 *
 *   a. declares the job's earlier `running` rows whose runner is gone `lost` (the reaper, above
 *      in `claim`: each UPDATE waits for a shared lock a fenced transaction holds on that row);
 *   b. inserts its claim (the fence is the new row's id, in the claim's own statement);
 *   c. makes its fence the newest of the job's slot in `baton_fences` (one statement per batch
 *      of claims, store/fire-writes.ts `moveFences`; exclusive on that row), while its lock session
 *      still holds the job's lock by the server. A claim that cannot write it fails like a claim
 *      the database did not take: the job does not run.
 *
 * A job's fenced transaction (sdk/fence.ts: `ctx.db.fenced`, and the helpers given the fence)
 * reads, before its COMMIT and with a shared lock held to its end, its run's row and the job's
 * fence row: the row must say `running` and the fence must be its own (or older). A check that
 * races a new claim either runs after (c) — it sees the newer fence and rolls back, throwing
 * StaleFenceError — or before it, and then (c) waits for its COMMIT: the stale transaction's
 * writes land before the new run starts, which is as if it had finished before the lock moved.
 * Either way nothing of a stopped run commits after its successor started. Every other way baton
 * gives up on a run writes the row's verdict before the job's lock is given back (the verdict
 * precedes the release in fire/run-fire.ts), so the row check refuses it even before (c); and a
 * verdict that could not be written leaves the row `running` but the fence moved. `overlap:
 * allow` claims take no lock and move no fence: their runs may overlap by design, and their
 * fenced transactions check the row alone.
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
 *
 * A pooled job (`pool:`, docs/pools.md) takes one of its pool's slots between steps 1 and 2: a
 * named lock on the same lock session, asked for by the job's lock holder only (the runners that
 * lose the fire never hold a slot) — so no run is ever claimed without one, and at most N are
 * claimed and running at once; the slot is given back with the job's lock (pool-slots.ts). A full
 * pool skips the fire (kind `pool`) — for the fleet: the runners contending later find that skip
 * where they look for a winner, and skip too — or, with `poolFull: queue`, keeps the holder asking
 * under the job's lock until the job's next fire. Fan-out workers and `every` runners each take a
 * slot.
 *
 * Every runner (`every: true`, docs/placement.md) repeats steps 1–2 in one slot only: its host's
 * own (`ContendOptions.slot`, given once per host and namespace and kept for good:
 * store/host-slots.ts). Each runner is the only one that ever claims its slot, so each fire gets
 * one winner row per runner and no skip rows for the others' shares; the slot's lock is the
 * host's, so overlap and `queue` are judged per host. A restarted runner claims the same slot:
 * the fire key refuses it a fire it ran before the restart. Another runner's winner says nothing
 * of this runner's run, so the looks that skip a fire because it "has a winner" (a fire contended
 * late, a lock met passing, a queue's wait) look at this runner's slot alone.
 */
import { errorMessage } from '../errors.js';
import { jobLockName } from '../lock-names.js';
import { StatementTimeoutError } from '../store/deadline.js';
import { abandonClaim, claimFires } from '../store/fire-writes.js';
import { findAttemptWinner, findWinnerOnHost, nextGeneration } from '../store/fire-reads.js';
import type { Attempt } from '../store/runs.js';
import {
  quiet,
  type ContendOptions,
  type Contention,
  type FireContext,
  type NotWon,
  type PoolClaim,
  type Prefetch,
  type ProtocolTimings,
  type Won,
} from './contention.js';
import { FireBatches } from './fire-batches.js';
import { describeHolder } from './lock-holder.js';
import { poolSlotNames, takePoolSlot } from './pool-slots.js';
import { declareLost, reapOrphanRuns } from './reaper.js';
import * as skips from './skip-reasons.js';
import type { SkipReason } from './skip-reasons.js';

export type { ContendOptions, Contention, FireContext, ProtocolTimings } from './contention.js';

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

/** How often a claim that came early (by the database's clock) asks again. */
export const EARLY_CLAIM_RETRY_MS = 5;
/** Beyond this, "early" is not a clock error of milliseconds but a wrong fire: give up. */
export const EARLY_CLAIM_LIMIT_MS = 5_000;

/** The protocol's windows by default: the constants of this module. */
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
  // The slots this runner may claim: its host's own for an `every` job (the other runners'
  // slots are theirs to claim and to skip), else the fan-out's 1..workers.
  const slots =
    options.slot != null ? [options.slot] : Array.from({ length: workers }, (_, i) => i + 1);
  // Not for an `every` job: another runner's winner does not stand for this runner's run, and
  // its slot's lock is no other runner's to hold.
  if (options.slot == null && workers === 1 && (options.afterLead || isStale(c, attempt))) {
    // A fire contended after its first asker's lead (first-asker.ts) has most likely been won by
    // it; one found this late (a runner thawed after a stall, a wake long behind) by a runner
    // that was on time. Look before anything else: the look is one statement for all of a turn's
    // such fires, where the lock, the pause and orphan reads and the holder's description would
    // be several; and holding the job's lock while the fire key refuses this fire would make the
    // runners on time skip the job's *next* fire, met at that very moment, and lose it.
    // Or decided without one: a runner that took its lock found its pool full and skipped it.
    const decided = await batches.decision.load({ ...attempt, ...settles(options) });
    if (decided) {
      return skip(decided.winner ? skips.fireHasWinner(decided) : skips.poolDecided(decided));
    }
  }
  if (options.heldBack) return skip(options.heldBack);
  const pauseNow = () =>
    options.pauseCheck
      ? batches.pause.load({ job: attempt.job, scheduledAt: attempt.scheduledAt })
      : Promise.resolve(null);
  const prefetch: Prefetch = {
    pause: quiet(pauseNow()),
    running: overlap === 'skip' ? quiet(batches.running.load(attempt.job)) : null,
    ...(options.eventTargets ? { targets: options.eventTargets } : {}),
    pool: options.pool ? poolClaim(c, options.pool, options.signal) : null,
    pauseNow,
    ...(workers === 1 && options.slot == null
      ? { recordSkip: (reason: SkipReason) => skip(reason).then((c) => c.runId) }
      : {}),
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
    for (const slot of slots) {
      const won = await claim(c, { ...attempt, slot }, null, prefetch);
      if (won.won) return won;
      if (won.stale) return unrecorded(won);
      if (slot === slots.at(-1)) return skip(won.skip);
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
        const won = await contendSlots(c, attempt, once, slots, gaveUp, prefetch);
        if (won.won || Date.now() >= deadline) return won.won ? won : skip(won.skip);
        await new Promise((r) => setTimeout(r, timingsOf(c).queuePollMs));
      }
    }
  }
  const won = await contendSlots(c, attempt, options, slots, gaveUp, prefetch);
  if (won.won) return won;
  if (won.stale) return unrecorded(won);
  if (won.recorded !== undefined) {
    const { kind, text } = won.skip;
    return { won: false, runId: won.recorded, kind, reason: text };
  }
  return skip(won.skip);
}

/** A claim its fence refused, told without a row: the fire is no fire of the schedule in force. */
function unrecorded(won: NotWon): Contention {
  return { won: false, runId: null, kind: won.skip.kind, reason: won.skip.text, stale: true };
}

/** Steps 1–2 over the worker slots: the first of `slots` this runner can lock and claim. */
async function contendSlots(
  c: FireContext,
  attempt: Attempt,
  options: ContendOptions,
  slots: readonly number[],
  gaveUp: (holder: SkipReason) => SkipReason,
  prefetch: Prefetch,
): Promise<Won | NotWon> {
  // Every slot that could not be had, and why: the skip reason when none could. The holders of
  // busy slots are named only once no slot was won (see nameHolders).
  const busy: (SkipReason | null)[] = [];
  const held: { index: number; lockName: string; attempt: Attempt }[] = [];
  for (const slot of slots) {
    const slotAttempt = { ...attempt, slot };
    const lockName = jobLockName(c.database, c.namespace, attempt.job, slot);
    const got = await acquire(c, lockName, slotAttempt, options);
    if (got === 'taken') {
      // While this fire waited in the queue, another runner won this very fire (this slot of
      // it, for an `every` job: this host ran it already).
      const winner = await findAttemptWinner(c.pool, c.namespace, attempt, options.slot);
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
    // Refused by its fence: no other slot is asked (the read is as stale for each).
    if (won.won || won.recorded !== undefined || won.stale) return won;
    busy.push(won.skip);
    // A full pool is full for every worker slot of the fire: the others are not asked again.
    if (won.skip.kind === 'pool') {
      while (busy.length < slots.length) busy.push(won.skip);
      break;
    }
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
      held.map((h) =>
        describeHolder(
          c.pool,
          c.namespace,
          h.lockName,
          h.attempt,
          options.slot,
          settles(options).fullPoolSettles,
        ),
      ),
    );
    if (slots.length === 1 && !queued && named[0]!.passing != null) {
      // The lock is passing, not held by a run: ask again for a moment rather than leave the
      // fire without a winner (see LOCK_PASSING_WAIT_MS).
      const again = await contendWhileLockPasses(
        c,
        held[0]!.lockName,
        held[0]!.attempt,
        options,
        prefetch,
      );
      if (again.won || again.recorded !== undefined || again.stale) return again;
      return { won: false, skip: gaveUp(await heldForPool(c, again, prefetch.pool)) };
    }
    held.forEach((h, i) => (busy[h.index] = gaveUp(named[i]!.skip)));
  }
  if (slots.length === 1) return { won: false, skip: busy[0]! };
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
    if (await findAttemptWinner(c.pool, c.namespace, attempt, options.slot)) return 'taken';
    const now = c.now?.().getTime() ?? Date.now();
    const wait = Math.min(timingsOf(c).queuePollMs, until - now);
    if (wait <= 0) return 'busy';
    await new Promise((r) => setTimeout(r, wait));
  }
}

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
  let claimed: number | 'taken' | 'fenced' | 'stale';
  let poolLock: string | null = null;
  try {
    // A pooled job's run takes one of its pool's slots first (pool-slots.ts): never claimed
    // without one, so at most N of the pool's runs are ever claimed and running at once.
    let waited = false;
    if (prefetch.pool) {
      const slot = await takePoolSlot(c, prefetch.pool, timingsOf(c).queuePollMs);
      if ('full' in slot) {
        const why = slot.gaveUp ? { gaveUp: slot.gaveUp } : {};
        const full = skips.poolFull(prefetch.pool.pool, slot.full, { host: c.host, ...why });
        // Written while the job's lock is still held: a runner that takes it next finds the fire
        // decided (a full fleet pool's skip), not free to run in a slot freed meanwhile.
        const recorded =
          lockName && prefetch.recordSkip ? await prefetch.recordSkip(full) : undefined;
        if (lockName) await c.lock.release(lockName);
        return { won: false, skip: full, ...(recorded !== undefined ? { recorded } : {}) };
      }
      ({ lockName: poolLock, waited } = slot);
      attempt = { ...attempt, pool: prefetch.pool.pool.name };
      // What was read before the wait is old news: the job may have been paused meanwhile.
      const pause = waited ? await prefetch.pauseNow() : null;
      if (pause) {
        await releaseAll(c, lockName, poolLock);
        return { won: false, skip: skips.paused(pause) };
      }
    }
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
      // What was read beside GET_LOCK serves only if every row in it was already dead: a row
      // whose runner was alive then may have died between that read and our lock (its session's
      // end freed the lock we took), and it must be `lost` before this fire's run starts — else
      // the history shows two runs at once and a `notify: {after}` streak is judged without it.
      const running = prefetch.running && !waited ? await prefetch.running : null;
      if (running?.every((r) => r.gone)) await declareLost(c.pool, running, scope);
      else await reapOrphanRuns(c.pool, scope);
    }
    // A re-run with `--again` is a generation of its own: the one after every generation that
    // has a winner, read under the job's lock — two operators who ran the fire again at once
    // planned the same one, and the second to take the lock must not meet the first's row.
    if (againGeneration(attempt)) {
      attempt = { ...attempt, rerun: await nextGeneration(c.pool, c.namespace, attempt) };
    }
    claimed = await claimWhenDue(c, attempt, lockName);
  } catch (err) {
    // The insert may have committed although its answer was lost (a timeout): leave no row
    // `running` behind a lock that is about to be released.
    const abandoned = await abandonClaim(c.pool, attempt, c.lock.connectionId, errorMessage(err))
      .then(() => true)
      .catch(() => false);
    await releaseAll(c, lockName, poolLock);
    throw new ClaimNotRecordedError(
      { attempt, lockConnectionId: c.lock.connectionId, abandoned, locked: lockName != null },
      err,
    );
  }
  if (typeof claimed === 'number') {
    const { slot = 1, rerun = 0 } = attempt;
    return { won: true, runId: claimed, lockName, slot, rerun, poolLock };
  }
  await releaseAll(c, lockName, poolLock);
  if (claimed === 'fenced') return { won: false, skip: skips.chainJudgedElsewhere() };
  if (claimed === 'stale') return { won: false, skip: skips.notInForce(), stale: true };
  const winner = await findAttemptWinner(c.pool, c.namespace, attempt, attempt.slot);
  return { won: false, skip: skips.claimedElsewhere(winner) };
}

/** A re-run with `--again`: not refused once done (`unlessDone`), so a new generation each time. */
function againGeneration(attempt: Attempt): boolean {
  return attempt.trigger === 'rerun' && attempt.unlessDone !== true;
}

/**
 * Whether a skip of this fire for a full pool decides it for every runner: a fleet-wide pool that
 * skips when full. A host pool's full slots are one host's; a queued fire's holder waits on.
 */
function settles(options: ContendOptions): { fullPoolSettles?: true } {
  const pool = options.pool?.pool;
  return pool?.scope === 'fleet' && pool.full === 'skip' ? { fullPoolSettles: true } : {};
}

/** Gives back the job's lock and the pool slot a claim held, those it had (in one statement). */
async function releaseAll(
  c: FireContext,
  lockName: string | null,
  poolLock: string | null,
): Promise<void> {
  await Promise.all([lockName, poolLock].flatMap((n) => (n ? [c.lock.release(n)] : [])));
}

/** The pool step of a fire of a pooled job (pool-slots.ts). */
function poolClaim(
  c: FireContext,
  asked: NonNullable<ContendOptions['pool']>,
  signal: AbortSignal | undefined,
): PoolClaim {
  return { ...asked, slotNames: poolSlotNames(c, asked.pool), ...(signal ? { signal } : {}) };
}

/**
 * A job's lock met held by a runner with no run of it, after the lock-passing wait: for a pooled
 * job, that runner is usually waiting for a slot (`poolFull: queue`) — said as the pool's skip
 * when the pool is indeed full, the holder's words otherwise.
 */
async function heldForPool(
  c: FireContext,
  notWon: NotWon,
  pool: PoolClaim | null,
): Promise<SkipReason> {
  if (!pool || notWon.skip.kind !== 'taken' || notWon.skip.sawWinner) return notWon.skip;
  const ask = { pool: pool.pool.name, slotNames: pool.slotNames };
  const use = await FireBatches.of(c.pool, c.namespace).poolUse.load(ask);
  if (use.used < use.slots) return notWon.skip;
  // The holder's words first: this row does not say that this runner found the pool full (it
  // decides nothing for the fleet: skip-reasons.ts `isPoolFull`).
  const full = skips.poolFull(pool.pool, use, { host: c.host });
  return { kind: 'pool', text: `${notWon.skip.text}, waiting for a slot: ${full.text}` };
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

/**
 * Inserts the winner row as soon as the database's clock has reached the fire. Runners fire by
 * the database's clock already, so this waits at most the error of the offset estimate (a
 * millisecond or so); it turns "never before its instant" from an estimate into a guarantee.
 */
async function claimWhenDue(
  c: FireContext,
  attempt: Attempt,
  lockName: string | null,
): Promise<number | 'taken' | 'fenced' | 'stale'> {
  // Claims under their job's lock are batched. Lock-free ones (`allow`) race the other runners
  // for the same fire keys: alone, each gets its answer without holding up a batch.
  // Under the job's lock the claim also moves the job's fence (fire-writes.ts `moveFences`).
  const locked = lockName != null;
  const claim = {
    attempt,
    lockConnectionId: c.lock.connectionId,
    ...(lockName != null ? { underLock: lockName } : {}),
  };
  const batched = FireBatches.of(c.pool, c.namespace).claim;
  const limitMs = c.timings?.earlyClaimLimitMs ?? EARLY_CLAIM_LIMIT_MS;
  const retryMs = c.timings?.earlyClaimRetryMs ?? EARLY_CLAIM_RETRY_MS;
  const giveUpAt = Date.now() + limitMs;
  for (;;) {
    const result = locked ? await batched.load(claim) : (await claimFires(c.pool, [claim]))[0]!;
    if (result === 'taken' || result === 'fenced' || result === 'stale') return result;
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
    const holder = await describeHolder(
      c.pool,
      c.namespace,
      lockName,
      attempt,
      options.slot,
      settles(options).fullPoolSettles,
    );
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
    skip:
      last ??
      (
        await describeHolder(
          c.pool,
          c.namespace,
          lockName,
          attempt,
          options.slot,
          settles(options).fullPoolSettles,
        )
      ).skip,
  };
}

const iso = (d: Date): string => d.toISOString();
