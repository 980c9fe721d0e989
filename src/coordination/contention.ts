/**
 * The words of a contention (fire-protocol.ts tells the protocol whole): what a runner contends
 * with (`FireContext`), what it is told to do (`ContendOptions`), and what it comes back with
 * (`Contention`).
 */
import type { EventTargets } from '../config/notify-targets.js';
import type { JobPool } from '../config/pools.js';
import type { OverlapPolicy, SkipRecord } from '../config/schema.js';
import type { Queryable } from '../store/deadline.js';
import type { Blackout } from '../store/blackouts.js';
import type { Pause } from '../store/pauses.js';
import type { RunningRun } from '../store/run-verdicts.js';
import type { SkipKind } from '../run-status.js';
import type { LockSession } from './lock-session.js';
import type { SkipReason } from './skip-reasons.js';

/** What a runner needs to contend for fires: who it is, and its handles on the database. */
export interface FireContext {
  database: string;
  namespace: string;
  host: string;
  pid: number;
  pool: Queryable;
  lock: LockSession;
  /** Now by the database's clock (queue deadlines are database instants); default this host's. */
  now?: () => Date;
  /** The protocol's windows (`PROTOCOL_TIMINGS` in fire-protocol.ts when not given). */
  timings?: ProtocolTimings;
}

/**
 * The protocol's short windows, each explained where it is defined, in fire-protocol.ts (describe
 * delay, stale fire, queue poll, the lock passing, the early claim). The runner sets them (daemon/timings.ts); `baton run` and the CLI's fires take the defaults.
 */
export interface ProtocolTimings {
  /** DESCRIBE_DELAY_MS: a busy lock's holder is looked up this long after. */
  describeDelayMs: number;
  /** STALE_FIRE_MS: a fire contended this late looks its winner up first. */
  staleFireMs: number;
  /** QUEUE_POLL_MS: a queued fire (or `run --wait` on a fan-out job) asks again this often. */
  queuePollMs: number;
  /** LOCK_PASSING_WAIT_MS: how long a passing lock is asked for again. */
  lockPassingWaitMs: number;
  /** LOCK_PASSING_FIRST_POLL_MS: the first of those waits (each next one doubles). */
  lockPassingFirstPollMs: number;
  /** EARLY_CLAIM_RETRY_MS: a claim early by the database's clock asks again this often… */
  earlyClaimRetryMs: number;
  /** EARLY_CLAIM_LIMIT_MS: …for at most this long. */
  earlyClaimLimitMs: number;
}

/**
 * A contention's answer: won (the winner row's id, the lock held for the run, the worker slot,
 * the pool slot's lock held for it), or not, with the skip row's id — null when the skip was
 * tallied, not written as a row.
 */
export type Contention =
  | {
      won: true;
      runId: number;
      lockName: string | null;
      slot: number;
      /** The generation claimed: a re-run with `--again` takes the next free one (not planned). */
      rerun: number;
      poolLock: string | null;
    }
  | {
      won: false;
      runId: number | null;
      kind: SkipKind;
      reason: string;
      /**
       * The claim's fence refused it (`skips.notInForce`): this runner's read of the job's
       * schedule is stale. Not a skip of a fire: no row, and the fire may be sent again.
       */
      stale?: true;
    };

export type Won = Extract<Contention, { won: true }>;
/** A slot or fire this runner could not have, and why (not recorded yet). */
export type NotWon = {
  won: false;
  skip: SkipReason;
  /** The skip's row is written already (`Prefetch.recordSkip`): its id (null: tallied). */
  recorded?: number | null;
  /** Refused by the claim's fence: no row is written (Contention `stale`). */
  stale?: true;
};

export interface ContendOptions {
  /** Seconds GET_LOCK may wait (`baton run --wait`); 0 for scheduled fires. */
  waitSeconds?: number;
  /** The fire this runner is already running for the job, if it is; skips without GET_LOCK. */
  runningHere?: Date | null;
  /** Default `skip`. */
  overlap?: OverlapPolicy;
  /** `queue`: keep asking for the lock until this instant (the job's next fire). */
  queueUntil?: Date | null;
  /** Ends a queued wait early (the runner is stopping). */
  signal?: AbortSignal;
  /** Fan-out: how many runners may win this fire, one per worker slot. Default 1. */
  workers?: number;
  /**
   * `every: true`: the one slot this runner claims, its host's (store/host-slots.ts) — each
   * runner wins the fire in its own slot, under that slot's lock. Instead of `workers`.
   */
  slot?: number;
  /**
   * Skip the fire when the job is paused, or the fire's instant is in a blackout of the job
   * (scheduled and catch-up fires; not manual runs).
   */
  pauseCheck?: boolean;
  /** Whom the job's events are told to: a dead earlier run declared `lost` here notifies them. */
  eventTargets?: EventTargets;
  /** `tally`: a skip of a fire whose winner was seen is counted, not a row (scheduled fires). */
  skips?: SkipRecord;
  /**
   * This runner is not the fire's first asker and contends after its lead (first-asker.ts):
   * the fire's winner is looked up first, and a fire that has one is skipped at once.
   */
  afterLead?: boolean;
  /**
   * The job's pool (docs/pools.md): a winner takes one of its slots before its claim, or waits
   * for one until `until` (null: skips when full) — see PoolClaim.
   */
  pool?: Omit<PoolClaim, 'slotNames' | 'signal'>;
  /**
   * Skip the fire for this reason (after the look for its winner, for a fire contended after the
   * lead or stale: a winner found is the reason then): the runner knows it must not take a slot
   * of the job's pool now (fire/run-fire.ts: a run of the pool outliving its slot).
   */
  heldBack?: SkipReason;
}

/**
 * Reads a fire needs that do not depend on holding the lock, started together with GET_LOCK so
 * that a winner waits one round trip, not three, before its row is written (fire lag).
 */
export interface Prefetch {
  /** The job's pause, or else a blackout the fire's instant is in. */
  pause: Promise<Pause | Blackout | null>;
  /**
   * The job's `running` rows, read beside GET_LOCK: once the lock is ours, those found with their
   * runner gone are declared lost without another read. null: look them up once the lock is held
   * (a queued fire may wait long; fetch fresh then).
   */
  running: Promise<RunningRun[]> | null;
  /** The job's event targets (ContendOptions), for the `lost` of a dead earlier run. */
  targets?: EventTargets;
  /** The pool step (pool-slots.ts), for a job with a pool. */
  pool: PoolClaim | null;
  /** Reads the pause again: a fire that waited for a pool slot may have been paused meanwhile. */
  pauseNow: () => Promise<Pause | Blackout | null>;
  /**
   * Writes this runner's skip row of the fire now, before the job's lock is given back: a fire
   * found with its pool full is decided for the fleet by that row, and a runner taking the lock
   * right after must find it (fire-protocol.ts `claim`). Only where one row stands for the
   * runner's whole contention (one worker slot, not an `every` job).
   */
  recordSkip?: (skip: SkipReason) => Promise<number | null>;
}

/** The pool step of one fire (pool-slots.ts): which pool, which slots, how long it may wait. */
export interface PoolClaim {
  pool: JobPool;
  /** The lock names of the slots this runner may take: its host's for a `scope: host` pool. */
  slotNames: readonly string[];
  /**
   * Ask again until this instant — the job's next fire (`poolFull: queue`), or the end of an
   * operator's `--wait` (`waitFor`) — in database time; null: skip at once when full.
   */
  until: Date | null;
  /** What `until` is, for the skip of a wait that ran out. */
  waitFor: 'next-fire' | 'operator';
  /**
   * The job's pool as the runner has it now: a wait ends when a reload changed it (another
   * size, scope or pool), rather than take a slot of a pool the fleet no longer has.
   */
  current?: () => JobPool | undefined;
  /** Ends a wait for a slot early (the runner is stopping). */
  signal?: AbortSignal;
}

/** Settles `p` quietly if nobody ends up awaiting it (an early skip), keeping its failure. */
export function quiet<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}
