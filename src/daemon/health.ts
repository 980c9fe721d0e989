/**
 * Whether a runner is doing its job, for `/healthz`, and what the metrics' gauges read.
 */
import { errorMessage } from '../errors.js';
import type { DatabaseLink } from './link.js';
import type { SchedulerLoop } from './loop.js';

/** The loop wakes at least every MAX_SLEEP_MS; this much later than planned means it is stuck. */
const LOOP_STUCK_MS = 10_000;

/** `/healthz`'s threshold; the runner sets it (timings.ts). */
export interface HealthTimings {
  /** LOOP_STUCK_MS: a loop's wake overdue by more than this is a problem. */
  loopStuckMs: number;
}

export const HEALTH_TIMINGS: Readonly<HealthTimings> = { loopStuckMs: LOOP_STUCK_MS };

/** What the metrics' gauges read at each scrape. */
export interface RunnerGauges {
  databaseUp: boolean;
  readOnly: boolean;
  /** Held after a failover: the fleet has left this server (fleet-watch.ts). */
  detached: boolean;
  /** This host's clock minus the database's, in ms; null until measured. */
  clockOffsetMs: number | null;
  runningRuns: number;
  jobsLoaded: number;
  /** Time since the scheduler loop last woke, in ms. */
  sinceLastWakeMs: number;
}

/** Whether the runner is doing its job, for `/healthz`: a list of what is wrong, empty if fine. */
export interface RunnerHealth {
  healthy: boolean;
  problems: string[];
}

/**
 * The loop wakes when planned, the lock session answers its heartbeats, the database takes
 * writes, and the pool (which every fire's rows go through) answers too — it can fail on its
 * own (max_connections reached) while the long-lived lock session stays up.
 */
export async function healthOf(r: {
  stopping: boolean;
  loop: SchedulerLoop;
  link: DatabaseLink;
  timings?: HealthTimings;
}): Promise<RunnerHealth> {
  const problems: string[] = [];
  if (r.stopping) problems.push('the runner is stopping');
  const overdueMs = r.loop.overdueMs;
  if (overdueMs > (r.timings ?? HEALTH_TIMINGS).loopStuckMs) {
    problems.push(`the scheduler loop is stuck: its wake is ${Math.round(overdueMs)} ms overdue`);
  }
  const pool = r.link.anyPool;
  if (!r.link.usable) {
    problems.push(`no usable connection to the database: ${r.link.downReason}`);
  } else if (r.link.fleet.state === 'detached') {
    problems.push(`detached from the fleet: ${r.link.fleet.detachedReason ?? ''}`);
  } else if (r.link.readOnly) {
    problems.push('the database is read-only: no fire runs until it is writable');
  } else if (pool) {
    try {
      await pool.query('SELECT 1');
    } catch (err) {
      problems.push(`the database does not answer on the pool: ${errorMessage(err)}`);
    }
  }
  return { healthy: problems.length === 0, problems };
}
