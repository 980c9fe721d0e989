/**
 * The runs this process has going, and the local half of the `overlap` policy.
 *
 * `overlap` decides what a fire of job J does while a run of J is still going. Where that run
 * is decides who can tell:
 *
 * - **Here** (this runner runs J): only this process knows, and it must find out before it asks
 *   for J's lock — GET_LOCK is re-entrant within a session, so the runner would "win" its own
 *   lock and run J beside itself. `localOverlap` below answers before contention starts: `skip`
 *   records the skip at once (unless the run is over but for its verdict: then it waits for
 *   that), `queue` first waits for the local run (at most until J's next fire), `allow` ignores
 *   it.
 * - **Elsewhere** (another runner holds J's lock): the database half, in
 *   `coordination/fire-protocol.ts:contend` — `skip` records whoever holds the lock, `queue`
 *   keeps asking for it until the next fire, `allow` takes no job lock at all.
 *
 * A queued fire may wait long for its lock: it does not take one of the runner's contention
 * places meanwhile (`takesContentionPlace`), since its polls are one cheap statement each.
 */
import { once } from 'node:events';
import type { OverlapPolicy } from '../config/schema.js';
import { delay } from '../delay.js';
import type { KeepAlive } from '../keep-alive.js';

import type { Schedule } from '../schedule/cron.js';
import { LOST_KILL_GRACE_MS, type RunControl } from './run-control.js';

export interface LocalRun {
  job: string;
  scheduledAt: Date;
  control: RunControl;
  /** Settles when the run's verdict is written (or given up). */
  finished: Promise<void>;
  /** The pool's slot it took (`pool:`, docs/pools.md): the pool's name and the slot's lock. */
  poolSlot?: { pool: string; lockName: string };
}

/** The runs of this process that have started and not yet finished, of every job. */
export class LocalRuns {
  private readonly runs = new Set<LocalRun>();
  /**
   * The same runs by job: a fire looks up its own job's (`latest`), and a runner may have
   * thousands going at once (library mode's schedules created at run time, a tenant each).
   */
  private readonly byJob = new Map<string, Set<LocalRun>>();

  /** `lostKillGraceMs`: the grace of the runs `abortAll` stops (the runner's timings). */
  constructor(
    private readonly lostKillGraceMs = LOST_KILL_GRACE_MS,
    /** Whether the waits for its runs hold the process (the runner's policy, keep-alive.ts). */
    readonly keepAlive?: KeepAlive,
  ) {}

  get size(): number {
    return this.runs.size;
  }

  [Symbol.iterator](): IterableIterator<LocalRun> {
    return this.runs.values();
  }

  add(run: LocalRun): void {
    this.runs.add(run);
    let ofJob = this.byJob.get(run.job);
    if (!ofJob) this.byJob.set(run.job, (ofJob = new Set()));
    ofJob.add(run);
  }

  delete(run: LocalRun): void {
    this.runs.delete(run);
    const ofJob = this.byJob.get(run.job);
    if (ofJob?.delete(run) && ofJob.size === 0) this.byJob.delete(run.job);
  }

  /**
   * The lock session these runs hold their locks on is gone: their locks no longer keep anyone
   * out, so each is stopped at once, with the short grace, and recorded `lost` with `why`.
   */
  abortAll(why: string): void {
    for (const run of this.runs) run.control.stop(why, this.lostKillGraceMs, 'lost');
  }

  /**
   * A run of `pool` whose processes still live although the lock session it took its slot on is
   * gone (`holds` says which slots the session has now): the server has freed that slot, and
   * until the run is over this process must not count on the pool's N (docs/pools.md).
   */
  outlivingItsSlot(pool: string, holds: (lockName: string) => boolean): LocalRun | undefined {
    for (const run of this.runs) {
      const slot = run.poolSlot;
      if (slot?.pool === pool && !holds(slot.lockName) && !run.control.processesEnded) return run;
    }
    return undefined;
  }

  /** The job's run of the latest fire, if this process runs the job now. */
  latest(job: string): LocalRun | undefined {
    let latest: LocalRun | undefined;
    for (const run of this.byJob.get(job) ?? []) {
      if (!latest || run.scheduledAt > latest.scheduledAt) latest = run;
    }
    return latest;
  }
}

/** What contention needs to know about this process's own runs of the job. */
export interface LocalOverlap {
  /** The fire of the job this runner still runs: skip it without GET_LOCK. */
  runningHere: Date | null;
  /** `queue`: ask for the lock until this instant (the job's next fire). */
  queueUntil: Date | null;
}

export interface LocalOverlapContext {
  runs: LocalRuns;
  /** The job's schedule: a queued fire waits at most until the next fire. */
  schedule: Schedule | null;
  /** Now by the database's clock (fires are database instants). */
  now: () => Date;
  /** The runner is stopping: a queued fire stops waiting. */
  signal?: AbortSignal;
  /** BOOKKEEPING_WAIT_MAX_MS unless the runner set another (its `runs.bookkeepingWaitMaxMs`). */
  bookkeepingWaitMaxMs?: number;
}

/**
 * At most this long does a fire wait for the bookkeeping of a run that is over (below): about
 * the deadline of the verdict's statement, so a database that does not answer at all costs the
 * fire, not the runner.
 */
export const BOOKKEEPING_WAIT_MAX_MS = 10_000;

export async function localOverlap(
  job: string,
  policy: OverlapPolicy,
  scheduledAt: Date,
  c: LocalOverlapContext,
): Promise<LocalOverlap> {
  let local = c.runs.latest(job);
  if (policy === 'skip') {
    // Bookkeeping never costs a fire: a run whose processes have all ended, and whose verdict is
    // still being written (a slow disk, a busy server), is over — skipping for it would leave
    // the fire without a winner, since its lock keeps the other runners out too. The fire waits
    // for that write instead, until the job's next fire at most, and then contends as usual.
    if (local?.control.processesEnded) {
      const next = c.schedule?.nextAfter(scheduledAt) ?? null;
      const cap = new Date(c.now().getTime() + (c.bookkeepingWaitMaxMs ?? BOOKKEEPING_WAIT_MAX_MS));
      await waitForRun(local, next && next < cap ? next : cap, c);
      local = c.runs.latest(job);
    }
    return { runningHere: local?.scheduledAt ?? null, queueUntil: null };
  }
  if (policy !== 'queue') return { runningHere: null, queueUntil: null };
  const queueUntil = c.schedule?.nextAfter(scheduledAt) ?? null;
  if (local) await waitForRun(local, queueUntil, c);
  return { runningHere: c.runs.latest(job)?.scheduledAt ?? null, queueUntil };
}

/** `overlap: queue`: waits for this runner's own run of the job, at most until `until`. */
async function waitForRun(
  run: LocalRun,
  until: Date | null,
  c: LocalOverlapContext,
): Promise<void> {
  const { signal } = c;
  if (signal?.aborted) return;
  // One controller per wait, aborted by the runner's stop and at the end of the wait; the
  // listener on the runner's long-lived signal is removed again (no AbortSignal.any, which some
  // Node versions never free).
  const done = new AbortController();
  const stop = () => done.abort();
  signal?.addEventListener('abort', stop, { once: true });
  try {
    await Promise.race([
      run.finished,
      until
        ? delay(until.getTime() - c.now().getTime(), done.signal, c.runs.keepAlive)
        : once(done.signal, 'abort'),
    ]);
  } finally {
    signal?.removeEventListener('abort', stop);
    done.abort();
  }
}

/** Whether a fire of this policy holds one of the runner's contention places while it contends. */
export function takesContentionPlace(policy: OverlapPolicy): boolean {
  return policy !== 'queue';
}
