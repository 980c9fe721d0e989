/**
 * `catchUp: {window, fires: all}`: after an outage, every fire of the window that nobody
 * attempted runs once, oldest first, one after another, each with its own `scheduled_at`.
 *
 * Every runner that recovers walks the same list; each fire still goes through the usual fire
 * protocol, so the fire key gives it one winner however many runners walk at once. A runner moves
 * to the next fire only once the current one is over wherever it runs: having won it, when its
 * run ends; having lost it (`taken`), when the winner's row is final. So the fires run in order and
 * never side by side, and a runner that dies mid-walk leaves the rest to the others (its run is
 * reaped `lost`, and the next fire goes on).
 *
 * The walk stops, and records what is left as `missed`:
 * - when the job's next regular fire comes (the loop runs it; an older fire after it would run
 *   out of order), or a later fire of the job is already running (`behind`);
 * - when the job is paused (its fires are skipped anyway).
 * It stops without recording anything when the runner stops or loses the database: the recovery
 * after the reconnect walks again, from the fires still without a run.
 */
import { isBlackoutReason } from '../store/blackouts.js';
import type { JobDefinition } from '../config/schema.js';
import { delay } from '../delay.js';
import type { KeepAlive } from '../keep-alive.js';

import type { FireOutcome } from '../fire/run-fire.js';
import type { Logger } from '../log.js';
import type { DueFire } from '../schedule/fire-schedule.js';
import type { Queryable } from '../store/deadline.js';
import { eventTargets } from '../config/notify-targets.js';
import { insertMissed } from '../store/fire-writes.js';
import { findWinner, firesWithRows } from '../store/fire-reads.js';

/** At most this many missed fires are run by one recovery; older ones are recorded missed. */
export const MAX_CATCH_UP_FIRES = 1_000;
/** Tries again of a catch-up fire that was not attempted, and the pause before each. */
const RETRIES = 3;
const RETRY_DELAY_MS = 1_000;
/** How often a runner that lost a fire looks whether the winner's run is over. */
const WINNER_POLL_MS = 500;
/**
 * A fire lost with no winning row after this long has none: the other runners skipped it too (an
 * overlap with a manual run, say), or its claimer died between the lock and its row.
 */
const NO_WINNER_AFTER_MS = 5_000;

/** A catch-up walk's pace (the runner's `recovery` timings, recovery.ts). */
export interface CatchUpTimings {
  /** RETRY_DELAY_MS: the pause before a catch-up fire not attempted is tried again. */
  catchUpRetryMs: number;
  /** WINNER_POLL_MS: how often a lost fire's winner is looked at. */
  winnerPollMs: number;
  /** NO_WINNER_AFTER_MS: a lost fire with no winning row after this long has none. */
  noWinnerAfterMs: number;
}

export const CATCH_UP_TIMINGS: Readonly<CatchUpTimings> = {
  catchUpRetryMs: RETRY_DELAY_MS,
  winnerPollMs: WINNER_POLL_MS,
  noWinnerAfterMs: NO_WINNER_AFTER_MS,
};

export interface CatchUpContext {
  pool: Queryable;
  namespace: string;
  host: string;
  /** The database's clock. */
  now: () => Date;
  coordinated: () => boolean;
  dispatch: (fire: DueFire) => Promise<FireOutcome | null>;
  /** `count` fires the walk did not get to were recorded `missed`. */
  /** `missed` rows it recorded, of the fires after where it stopped. */
  missed: (job: string, instants: Date[]) => void;
  signal: AbortSignal;
  log: Logger;
  /** CATCH_UP_TIMINGS when not given. */
  timings?: CatchUpTimings | undefined;
  /** Whether its sleeps hold the process (keep-alive.ts). */
  keepAlive?: KeepAlive | undefined;
}

/**
 * One walk per job at a time. A recovery that begins while an older walk of the job goes on
 * (a reconnect in the middle of it) takes over: the older walk stops at its next step, and the
 * newer one starts when it has.
 */
export class CatchUpWalks {
  private readonly current = new Map<string, object>();
  private readonly done = new Map<string, Promise<void>>();

  start(job: string, walk: (stillMine: () => boolean) => Promise<void>): void {
    const token = {};
    this.current.set(job, token);
    const stillMine = () => this.current.get(job) === token;
    const before = this.done.get(job) ?? Promise.resolve();
    const done = before.then(() => (stillMine() ? walk(stillMine) : undefined)).catch(() => {});
    this.done.set(job, done);
    void done.then(() => {
      if (stillMine()) {
        this.current.delete(job);
        this.done.delete(job);
      }
    });
  }
}

/** Walks `fires` (oldest first) until it is over or stopped; `stopAt`: the next regular fire. */
export async function catchUpAll(
  c: CatchUpContext,
  job: JobDefinition,
  fires: readonly Date[],
  stopAt: Date | null,
  stillMine: () => boolean,
): Promise<void> {
  const going = () => !c.signal.aborted && c.coordinated() && stillMine();
  for (let i = 0; i < fires.length; i++) {
    const at = fires[i]!;
    if (!going()) return;
    if (stopAt && c.now() >= stopAt) {
      await recordLeft(c, job, fires.slice(i), 'its next regular fire came first');
      return;
    }
    const winner = await findWinner(c.pool, c.namespace, job.name, at);
    if (!winner) {
      c.log.info({ job: job.name, scheduledAt: at }, 'catching up a missed fire');
      let outcome = await c.dispatch({ job: job.name, scheduledAt: at, lateMs: 0 });
      // A fire not attempted while the runner can still coordinate (a statement that failed) is
      // tried again a few times; with the database gone, the recovery after the reconnect walks.
      for (let retry = 1; outcome?.status === 'not-attempted' && retry <= RETRIES; retry++) {
        await delay((c.timings ?? CATCH_UP_TIMINGS).catchUpRetryMs, c.signal, c.keepAlive);
        if (!going()) return;
        outcome = await c.dispatch({ job: job.name, scheduledAt: at, lateMs: 0 });
      }
      if (!outcome || outcome.status === 'stopped' || outcome.status === 'not-attempted') return;
      if (outcome.status === 'skipped') {
        // A blackout covers its own instants: the fires after it are judged each by its own.
        if (outcome.kind === 'paused' && isBlackoutReason(outcome.reason)) continue;
        if (outcome.kind === 'paused' || outcome.kind === 'behind') {
          const why = outcome.kind === 'paused' ? 'the job is paused' : 'a later fire is running';
          await recordLeft(c, job, fires.slice(i + 1), why);
          return;
        }
        // Lost (or an overlap with a run of another trigger): go on once that fire is over.
        if (!(await untilOver(c, job.name, at, going))) return;
      }
    } else if (!(await untilOver(c, job.name, at, going))) {
      return;
    }
  }
}

/** Waits until the fire's winning run (if any comes) is final; false when stopped meanwhile. */
async function untilOver(
  c: CatchUpContext,
  job: string,
  at: Date,
  going: () => boolean,
): Promise<boolean> {
  const since = Date.now();
  for (;;) {
    const winner = await findWinner(c.pool, c.namespace, job, at);
    const t = c.timings ?? CATCH_UP_TIMINGS;
    if (winner ? winner.status !== 'running' : Date.now() - since > t.noWinnerAfterMs) {
      return true;
    }
    await delay(t.winnerPollMs, c.signal, c.keepAlive);
    if (!going()) return false;
  }
}

/** `missed` rows for the fires the walk did not get to (those nobody attempted meanwhile). */
async function recordLeft(
  c: CatchUpContext,
  job: JobDefinition,
  left: readonly Date[],
  why: string,
): Promise<void> {
  if (left.length === 0) return;
  const seen = await firesWithRows(c.pool, c.namespace, job.name, left[0]!, left.at(-1)!);
  const recorded: Date[] = [];
  const reason =
    'nobody attempted this fire: no runner was connected to the database at the time, and its ' +
    `catch-up stopped before it because ${why} (recorded by ${c.host})`;
  for (const at of left) {
    if (seen.has(at.getTime())) continue;
    const inserted = await insertMissed(
      c.pool,
      {
        namespace: c.namespace,
        job: job.name,
        scheduledAt: at,
        trigger: 'schedule',
        host: c.host,
        pid: process.pid,
      },
      reason,
      eventTargets(job.notify),
    );
    if (inserted) recorded.push(at);
  }
  if (recorded.length > 0) c.missed(job.name, recorded);
  c.log.info({ job: job.name, left: left.length, why }, 'catch-up stopped');
}
