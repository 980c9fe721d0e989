/**
 * What happened while nobody could coordinate: after start-up and after every reconnect, a runner
 * looks back over each job's recent fires (schedule/look-back.ts finds them).
 *
 * - **Catch-up** (`catchUp: 10m`): the latest fire inside the window that has no row at all runs
 *   once now, with `trigger = catchup` and its own `scheduled_at`, through the usual fire
 *   protocol — the fire key lets one host do it however many notice. Only a fire nobody
 *   attempted: one that runners skipped on purpose (an overlap, a pause) stays skipped. With
 *   `fires: all`, every such fire of the window runs, in order (catch-up.ts walks them).
 * - **Missed**: every fire in the window that nobody attempted at all gets one `missed` row, so
 *   "it did not run at 03:00" is in the history. This waits MISSED_SETTLE_MS first, so that the
 *   runners contending the latest fires have written their rows.
 * - **In doubt**: after a failover (a reconnect to another server), the fires up to the loss that
 *   the new primary has no row of are recorded at once and not caught up (in-doubt.ts).
 */
import type { JobDefinition } from '../config/schema.js';
import { delay } from '../delay.js';
import type { KeepAlive } from '../keep-alive.js';

import { errorMessage } from '../errors.js';
import type { FireOutcome } from '../fire/run-fire.js';
import type { DueFire, StartDelay } from '../schedule/fire-schedule.js';
import { lookBack, MISSED_WINDOW_MS } from '../schedule/look-back.js';
import type { Logger } from '../log.js';
import type { Trigger } from '../run-status.js';
import type { Schedule } from '../schedule/cron.js';
import type { Queryable } from '../store/deadline.js';
import { eventTargets } from '../config/notify-targets.js';
import { scheduledDependents } from '../fire/dependents.js';
import { insertMissed } from '../store/fire-writes.js';
import { firesWithRows, firstFiresOf } from '../store/fire-reads.js';
import {
  CATCH_UP_TIMINGS,
  catchUpAll,
  MAX_CATCH_UP_FIRES,
  type CatchUpTimings,
  type CatchUpWalks,
} from './catch-up.js';
import { setAsideInDoubt, type FailoverWindow } from './in-doubt.js';
import type { RunnerEvents } from './runner-events.js';

/** Runners contending the most recent fires have written their rows by then. */
export const MISSED_SETTLE_MS = 5_000;

/** Recovery's pace, its catch-up walks' included; the runner sets it (timings.ts). */
export interface RecoveryTimings extends CatchUpTimings {
  /** MISSED_SETTLE_MS: the wait before fires nobody attempted are recorded `missed`. */
  missedSettleMs: number;
}

export const RECOVERY_TIMINGS: Readonly<RecoveryTimings> = {
  missedSettleMs: MISSED_SETTLE_MS,
  ...CATCH_UP_TIMINGS,
};

export interface RecoveryContext {
  pool: Queryable;
  namespace: string;
  host: string;
  jobs: ReadonlyMap<string, JobDefinition>;
  schedules: ReadonlyMap<string, Schedule>;
  /** When each job's fires start after their instants (jitter). */
  startDelay: StartDelay;
  /** Since when this runner has run each job's current schedule (database time). */
  knownSince: (job: string) => Date;
  /** Whether the runner can still coordinate (it may lose the database while it waits). */
  coordinated: () => boolean;
  /** The database's clock. */
  now: () => Date;
  dispatch: (fire: DueFire, trigger: Trigger) => Promise<FireOutcome | null>;
  /** The runner's walks over every missed fire (`fires: all`), one per job at a time. */
  walks: CatchUpWalks;
  signal: AbortSignal;
  events: RunnerEvents;
  log: Logger;
  /** The runner's last failover (to this server, or before it): its fires in doubt. */
  failover?: FailoverWindow | null;
  /** RECOVERY_TIMINGS when not given. */
  timings?: RecoveryTimings;
  /** Whether its sleeps (and its catch-up walks') hold the process (keep-alive.ts). */
  keepAlive?: KeepAlive;
}

export async function recover(c: RecoveryContext, now: Date): Promise<void> {
  const { pool, namespace, log } = c;
  const plans: { job: JobDefinition; fires: Date[]; from: Date; caughtUp: Set<number> }[] = [];
  // Jobs of one expression, time zone and window look back over the same fires: computed once.
  // Library mode's schedules created at run time are thousands of such jobs (tenants on
  // `0 3 * * *`), and croner's answers, one per fire per job, would hold the event loop (and the
  // heartbeats) for seconds at every connect.
  const windows = new Map<string, ReturnType<typeof lookBack>>();
  const windowOf = (job: JobDefinition, schedule: Schedule, knownSince: Date) => {
    const key = JSON.stringify([
      schedule.timezone,
      schedule.expression,
      job.catchUpMs,
      Math.max(now.getTime() - (job.catchUpMs ?? MISSED_WINDOW_MS), knownSince.getTime()),
    ]);
    let window = windows.get(key);
    if (!window) windows.set(key, (window = lookBack(job, schedule, now, knownSince)));
    return window;
  };
  try {
    const firsts = await firstFiresOf(pool, namespace, [...c.jobs.keys()]);
    for (const job of c.jobs.values()) {
      const schedule = c.schedules.get(job.name);
      if (!schedule) continue;
      const first = firsts.get(job.name) ?? null;
      const loaded = c.knownSince(job.name);
      const knownSince = first && first < loaded ? first : loaded;
      const window = windowOf(job, schedule, knownSince);
      const { from } = window;
      // A jittered fire whose instant has passed but whose start has not is the loop's, still to
      // come: neither caught up nor recorded missed.
      const due = window.fires.filter(
        (at) => at.getTime() + c.startDelay.delayMs(job.name, at) <= now.getTime(),
      );
      // Fires in doubt after a failover are recorded now and left out of catch-up.
      const { left: fires, inDoubt } = await setAsideInDoubt(c, c.failover ?? null, job, due, from);
      if (inDoubt.length > 0) {
        c.events.emit('fires:inDoubt', { job: job.name, count: inDoubt.length, instants: inDoubt });
      }
      if (fires.length === 0) continue;
      let caughtUp: Date[] = [];
      if (job.catchUpMs != null && job.catchUpFires === 'all') {
        // A fire marked as one no runner that may run the job was alive for is this runner's to
        // catch up, as one nobody attempted (store/fire-reads.ts).
        const seen = await firesWithRows(pool, namespace, job.name, from, now, {
          attemptable: true,
        });
        // The newest MAX_CATCH_UP_FIRES of them; older ones are recorded missed below.
        caughtUp = fires.filter((at) => !seen.has(at.getTime())).slice(-MAX_CATCH_UP_FIRES);
        // The walk stops at the first fire the loop runs: one still to start (jitter), or the next.
        const next = window.fires.find((at) => !due.includes(at)) ?? schedule.nextAfter(now);
        if (caughtUp.length > 0) walk(c, job, caughtUp, next);
      } else if (job.catchUpMs != null) {
        const latest = fires.at(-1)!;
        const seen = await firesWithRows(pool, namespace, job.name, latest, latest, {
          attemptable: true,
        });
        if (seen.size === 0) {
          caughtUp = [latest];
          log.info({ job: job.name, scheduledAt: latest }, 'catching up a missed fire');
          void c.dispatch({ job: job.name, scheduledAt: latest, lateMs: 0 }, 'catchup');
        }
      }
      plans.push({ job, fires, from, caughtUp: new Set(caughtUp.map((at) => at.getTime())) });
    }
    await delay((c.timings ?? RECOVERY_TIMINGS).missedSettleMs, c.signal, c.keepAlive);
    if (c.signal.aborted || !c.coordinated()) return;
    // The children of a missed fire are among the jobs with `after:` (few, where the jobs may be
    // thousands: the schedules created at run time), and the same for each of a job's fires.
    const withParents = [...c.jobs.values()].filter((j) => j.after);
    for (const { job, fires, from, caughtUp } of plans) {
      const seen = await firesWithRows(pool, namespace, job.name, from, now);
      const children = scheduledDependents(withParents, job);
      const recorded: Date[] = [];
      for (const at of fires) {
        if (seen.has(at.getTime()) || caughtUp.has(at.getTime())) continue;
        const attempt = {
          namespace,
          job: job.name,
          scheduledAt: at,
          trigger: 'schedule' as const,
          host: c.host,
          pid: process.pid,
        };
        const reason =
          'nobody attempted this fire: no runner was connected to the database at the time ' +
          `(it was down or unreachable, or the runners were starting; recorded by ${c.host})`;
        const targets = eventTargets(job.notify);
        if (await insertMissed(pool, attempt, reason, targets, 'not-run', children)) {
          recorded.push(at);
        }
      }
      if (recorded.length > 0) {
        c.events.emit('fires:missed', {
          job: job.name,
          count: recorded.length,
          instants: recorded,
          kind: 'not-run',
        });
      }
    }
  } catch (err) {
    log.warn({ err: errorMessage(err) }, 'could not look back for missed fires');
  }
}

/** Starts the walk over every missed fire of `job`, until `next`, its next regular fire. */
function walk(c: RecoveryContext, job: JobDefinition, fires: Date[], next: Date | null): void {
  const stopAt = next && new Date(next.getTime() + c.startDelay.delayMs(job.name, next));
  c.log.info(
    { job: job.name, fires: fires.length, from: fires[0], to: fires.at(-1) },
    'catching up every missed fire, oldest first',
  );
  c.walks.start(job.name, (stillMine) =>
    catchUpAll(
      {
        pool: c.pool,
        namespace: c.namespace,
        host: c.host,
        now: c.now,
        coordinated: c.coordinated,
        dispatch: (fire) => c.dispatch(fire, 'catchup'),
        missed: (name, instants) =>
          c.events.emit('fires:missed', {
            job: name,
            count: instants.length,
            instants,
            kind: 'not-run',
          }),
        signal: c.signal,
        log: c.log,
        timings: c.timings,
        keepAlive: c.keepAlive,
      },
      job,
      fires,
      stopAt,
      stillMine,
    ),
  );
}
