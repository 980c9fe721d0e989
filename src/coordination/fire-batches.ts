/**
 * The reads and writes of a contention that do not need the lock session, batched per turn of
 * the event loop (store/batcher.ts): when a whole instant's fires are contended at once, each of
 * these steps is one statement for all of them instead of one per fire.
 *
 * One set per pool and namespace, for as long as the pool lives.
 */
import { asError } from '../errors.js';
import { Batcher, type BatchResult } from '../store/batcher.js';
import type { Queryable } from '../store/deadline.js';
import {
  claimFires,
  insertSkips,
  type Claim,
  type ClaimResult,
  type Skip,
} from '../store/fire-writes.js';
import { lockHolders, runsOfLockSessions, winnersOfFires } from '../store/fire-reads.js';
import { findPauses, type Pause } from '../store/pauses.js';
import { blackoutsAround, coveringBlackout, type Blackout } from '../store/blackouts.js';
import { jobOfSubject } from '../schedule-keys.js';
import { poolUses, type PoolAsk, type PoolUse } from '../store/pool-reads.js';
import { findRunningRuns, type RunningRun } from '../store/run-verdicts.js';
import { hostsOfLockSessions } from '../store/runners.js';
import { tallySkips } from '../store/skip-tallies.js';
import type { Run } from '../store/runs.js';
import { isPoolFull } from './skip-reasons.js';

/** Who holds a job's lock, and what the database says about that holder and about the fire. */
export interface HolderFacts {
  /** The connection id holding the lock; null once it is free. */
  holder: number | null;
  /** The holder's `running` row of the job (the latest), if it has one. */
  run: Run | null;
  /** The winner of the asked fire's generation (its first slot taken), if it was claimed. */
  winner: Run | null;
  /** Without a winner: a runner's skip of the fire because its pool was full (`decisionOf`). */
  poolSkip: Run | null;
  /** The live registered runner whose lock session the holder is. */
  host: string | null;
}

/** A fire's generation: which fire, and which re-run of it (default 0, the scheduled one). */
export interface FireAsk {
  job: string;
  scheduledAt: Date;
  rerun?: number;
  /**
   * Only this slot's winner counts (an `every` job's runner looks at its own host's slot: the
   * other runners' winners say nothing of its own run). Default: the first slot taken.
   */
  slot?: number;
  /**
   * The job's pool is fleet-wide and skips when full: a runner's skip of the fire for a full pool
   * decided it for every runner (`poolSkipOf`). Not for a host pool: one host's full slots say
   * nothing of another's.
   */
  fullPoolSettles?: boolean;
}

/** A fire asked about its pause: its job and its instant (a blackout covers instants). */
export interface PauseAsk {
  job: string;
  scheduledAt: Date;
}

export interface HolderAsk extends FireAsk {
  lockName: string;
}

/**
 * Each of these batchers has one batch in flight at a time (up to 250 asks; a larger one, or the
 * holder's look-ups, may take a few statements); what its fires ask for meanwhile goes in its
 * next (store/batcher.ts): a runner behind its fires sends fewer, larger statements.
 */
const ONE_AT_A_TIME = [250, 1] as const;

export class FireBatches {
  private static readonly byPool = new WeakMap<Queryable, Map<string, FireBatches>>();

  static of(pool: Queryable, namespace: string): FireBatches {
    let sets = FireBatches.byPool.get(pool);
    if (!sets) FireBatches.byPool.set(pool, (sets = new Map()));
    let set = sets.get(namespace);
    if (!set) sets.set(namespace, (set = new FireBatches(pool, namespace)));
    return set;
  }

  private constructor(
    private readonly pool: Queryable,
    private readonly namespace: string,
  ) {}

  /**
   * What pauses the fire, if anything: the job's pause, or else a blackout its instant is in. A
   * dynamic schedule's subject (`<job>:<key>`) is paused by its own pause or its job's, and
   * blacked out by its job's blackouts: pausing a job pauses every schedule of it. Two
   * statements for the whole batch, side by side: the pauses of its jobs, and the blackouts
   * around its instants (each fire is then judged by its own instant, not by the clock).
   */
  readonly pause = new Batcher<PauseAsk, Pause | Blackout | null>(
    async (asks) => {
      const jobs = asks.map((a) => a.job);
      const names = unique([...jobs, ...jobs.map(jobOfSubject)]);
      const instants = asks.map((a) => a.scheduledAt.getTime());
      const [pauses, blackouts] = await Promise.all([
        findPauses(this.pool, this.namespace, names),
        blackoutsAround(
          this.pool,
          this.namespace,
          new Date(Math.min(...instants)),
          new Date(Math.max(...instants)),
        ),
      ]);
      return asks.map(({ job, scheduledAt }) => ({
        value:
          pauses.get(job) ??
          pauses.get(jobOfSubject(job)) ??
          coveringBlackout(blackouts, job, scheduledAt),
      }));
    },
    ...ONE_AT_A_TIME,
  );

  /** The job's `running` rows, each with whether its lock session was gone when read. */
  readonly running = new Batcher<string, RunningRun[]>(
    async (jobs) => {
      const rows = await findRunningRuns(this.pool, this.namespace, unique(jobs));
      const byJob = new Map<string, RunningRun[]>();
      for (const r of rows) byJob.set(r.job, [...(byJob.get(r.job) ?? []), r]);
      return jobs.map((job) => ({ value: byJob.get(job) ?? [] }));
    },
    ...ONE_AT_A_TIME,
  );

  /** See HolderFacts. */
  readonly holder = new Batcher<HolderAsk, HolderFacts>(
    async (asks) => {
      const holders = await lockHolders(
        this.pool,
        asks.map((a) => a.lockName),
      );
      const ids = unique(holders.filter((h): h is number => h != null));
      const [running, winners, hosts] = await Promise.all([
        ids.length
          ? runsOfLockSessions(this.pool, this.namespace, unique(asks.map((a) => a.job)), ids)
          : [],
        winnersOfFires(this.pool, this.namespace, asks, { poolSkips: true }),
        ids.length
          ? hostsOfLockSessions(this.pool, this.namespace, ids)
          : new Map<number, string>(),
      ]);
      const byFire = byFireOf(winners);
      const runningOf = new Map<string, Run[]>();
      for (const r of running) {
        const key = `${r.job}\0${r.lockConnectionId}`;
        runningOf.set(key, [...(runningOf.get(key) ?? []), r]);
      }
      return asks.map((ask, i) => {
        const holder = holders[i]!;
        const latest = (runs: Run[]) =>
          runs.reduce<Run | null>((a, r) => (!a || r.id > a.id ? r : a), null);
        return {
          value: {
            holder,
            run: latest(runningOf.get(`${ask.job}\0${holder}`) ?? []),
            winner: winnerOf(byFire.get(fireKey(ask)) ?? [], ask),
            poolSkip: poolSkipOf(byFire.get(fireKey(ask)) ?? [], ask),
            host: holder == null ? null : (hosts.get(holder) ?? null),
          },
        };
      });
    },
    ...ONE_AT_A_TIME,
  );

  /**
   * How a fire's generation was decided, if it was: its winner (its first slot taken), or else a
   * runner's skip of it for a full pool (`poolSkipOf`) — what a fire contended late looks up
   * before it asks for the lock (fire-protocol.ts). A row with `winner` false is that skip.
   */
  readonly decision = new Batcher<FireAsk, Run | null>(
    async (asks) => {
      const rows = byFireOf(
        await winnersOfFires(this.pool, this.namespace, asks, { poolSkips: true }),
      );
      return asks.map((ask) => {
        const ofFire = rows.get(fireKey(ask)) ?? [];
        return { value: winnerOf(ofFire, ask) ?? poolSkipOf(ofFire, ask) };
      });
    },
    ...ONE_AT_A_TIME,
  );

  /**
   * Who holds the slots of a pool (store/pool-reads.ts): one statement for every pool asked in a
   * turn — an instant's fires of one pool ask the same thing, answered once.
   */
  readonly poolUse = new Batcher<PoolAsk, PoolUse>(
    async (asks) => {
      const byKey = new Map<string, PoolAsk>();
      for (const a of asks) byKey.set(poolKey(a), a);
      const distinct = [...byKey.values()];
      const uses = await poolUses(this.pool, this.namespace, distinct);
      const answer = new Map(distinct.map((a, i) => [poolKey(a), uses[i]!]));
      return asks.map((a) => ({ value: answer.get(poolKey(a))! }));
    },
    ...ONE_AT_A_TIME,
  );

  /** Inserts the winning row of a fire whose job's lock is held (see claimFires). */
  readonly claim = new Batcher<Claim, ClaimResult>(
    async (claims) => (await claimFires(this.pool, claims)).map((value) => ({ value })),
    ...ONE_AT_A_TIME,
  );

  /**
   * Writes the skip row, its id; or adds a tallied skip to its tally (`tally`), null. One
   * statement for the rows and one for the tallies of a turn.
   */
  readonly skip = new Batcher<Skip, number | null>(
    async (skips) => {
      const rows = skips.filter((s) => !s.tally);
      const tallied = skips.filter((s) => s.tally);
      // Each statement answers its own skips: a failed tally does not fail the rows, nor back.
      const [ids, counted] = await Promise.allSettled([
        rows.length ? insertSkips(this.pool, rows) : [],
        tallied.length ? tallySkips(this.pool, tallied) : null,
      ]);
      let next = 0;
      return skips.map((s): BatchResult<number | null> => {
        const done = s.tally ? counted : ids;
        if (done.status === 'rejected') return { error: asError(done.reason) };
        return { value: s.tally ? null : (ids as PromiseFulfilledResult<number[]>).value[next++]! };
      });
    },
    ...ONE_AT_A_TIME,
  );
}

/** Of `winners` (rows of several fires), the asked generation's first slot taken (or asked). */
/** A fire's key among a batch's rows (job and instant). */
const fireKey = (f: { job: string; scheduledAt: Date }): string =>
  `${f.job}\0${f.scheduledAt.getTime()}`;

/**
 * A batch's rows by fire: each ask looks at its own fire's rows, not at the whole batch's — a
 * batch of an instant's fires may be thousands (library mode's schedules created at run time).
 */
function byFireOf(rows: readonly Run[]): Map<string, Run[]> {
  const byFire = new Map<string, Run[]>();
  for (const r of rows) {
    const key = fireKey(r);
    const ofFire = byFire.get(key);
    if (ofFire) ofFire.push(r);
    else byFire.set(key, [r]);
  }
  return byFire;
}

function winnerOf(winners: readonly Run[], ask: FireAsk): Run | null {
  let first: Run | null = null;
  for (const r of winners) {
    if (!r.winner) continue;
    if (r.job !== ask.job || r.scheduledAt.getTime() !== ask.scheduledAt.getTime()) continue;
    if (r.rerun !== (ask.rerun ?? 0)) continue;
    if (ask.slot != null && r.workerSlot !== ask.slot) continue;
    if (!first || r.workerSlot! < first.workerSlot!) first = r;
  }
  return first;
}

/** A pool's slots of one scope (a host's, or the fleet's): the same ask whoever makes it. */
const poolKey = (a: PoolAsk): string => `${a.pool}\0${a.slotNames.join('\0')}`;

/**
 * Of `rows`, the first skip of the asked generation for a full pool: the runner that took the
 * fire's lock found every slot taken, and skipped the fire for the fleet (`poolFull: skip`, a
 * fleet-wide pool: `fullPoolSettles`). Not for an `every` job's runner (`slot` asked): each
 * decides its own run.
 */
function poolSkipOf(rows: readonly Run[], ask: FireAsk): Run | null {
  if (ask.slot != null || !ask.fullPoolSettles) return null;
  let first: Run | null = null;
  for (const r of rows) {
    if (r.winner || r.reasonKind !== 'pool' || !isPoolFull(r.reason) || r.job !== ask.job) continue;
    if (r.scheduledAt.getTime() !== ask.scheduledAt.getTime() || r.rerun !== (ask.rerun ?? 0))
      continue;
    if (!first || r.id < first.id) first = r;
  }
  return first;
}

function unique<T>(xs: readonly T[]): T[] {
  return [...new Set(xs)];
}
