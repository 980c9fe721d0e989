/**
 * The owner's half of `baton kill`: the process that runs a run (a runner, or `baton run` in the
 * foreground) looks for kill requests on its own runs once a tick (KILL_WATCH_MS) and stops each
 * one it finds — SIGTERM to the job's process group, SIGKILL after the request's grace, through
 * the run's RunControl like any other stop, so no retry follows and the verdict is `killed`,
 * written by the pipeline as usual (fire/run-fire.ts), with the lock released after it.
 *
 * Why polling: the request is written by another host, through the database (that is how any host
 * can act); the database has no way to wake this process. One statement by primary key a second,
 * and none at all while the process runs nothing, costs nothing worth a notification channel;
 * the issue's bound (about 2 s from the request to SIGTERM) is one tick plus the statement.
 */
import { delay } from '../delay.js';
import type { KeepAlive } from '../keep-alive.js';

import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import { findKillRequests, type KillRequest } from '../store/kill-requests.js';
import type { LocalRuns } from './local-runs.js';
import { KILL_WATCH_MS } from './run-control.js';

export { KILL_WATCH_MS };

/** The run's `error`: "killed by alice: stuck on a lock" (who asked, and why when they said). */
export function killedReason(r: Pick<KillRequest, 'by' | 'reason'>): string {
  return `killed by ${r.by}${r.reason ? `: ${r.reason}` : ''}`;
}

export interface KillWatchOptions {
  /** The pool while it can be used (null: skip this tick). */
  pool: () => Queryable | null;
  runs: LocalRuns;
  log?: Logger;
  /** The pace of the looks; KILL_WATCH_MS by default. */
  everyMs?: number;
  /** Whether its sleeps hold the process (keep-alive.ts). */
  keepAlive?: KeepAlive;
}

/** One look: stops the runs of `runs` that have a kill request. Returns how many it stopped. */
export async function actOnKillRequests(o: KillWatchOptions): Promise<number> {
  if (o.runs.size === 0) return 0;
  const pool = o.pool();
  if (!pool) return 0;
  // A run already being stopped (a shutdown, a lost session) keeps its own verdict.
  const open = [...o.runs].filter((r) => !r.control.stopRequested);
  if (open.length === 0) return 0;
  const requests = await findKillRequests(
    pool,
    open.map((r) => r.control.runId),
  );
  let stopped = 0;
  for (const run of open) {
    const request = requests.get(run.control.runId);
    if (!request || run.control.stopRequested) continue;
    o.log?.warn(
      {
        job: run.job,
        runId: run.control.runId,
        by: request.by,
        reason: request.reason,
        graceMs: request.graceMs,
      },
      'killing a run: an operator asked',
    );
    run.control.stop(killedReason(request), request.graceMs, 'killed');
    stopped++;
  }
  return stopped;
}

/**
 * Looks every KILL_WATCH_MS until `signal` aborts, each look after the previous one has settled;
 * a look that fails (the database hiccuped) is logged and the next one tries again.
 */
export function watchKillRequests(o: KillWatchOptions, signal: AbortSignal): void {
  void (async () => {
    for (;;) {
      await delay(o.everyMs ?? KILL_WATCH_MS, signal, o.keepAlive);
      if (signal.aborted) return;
      await actOnKillRequests(o).catch((err: unknown) =>
        o.log?.warn({ err: errorMessage(err) }, 'could not look for kill requests'),
      );
    }
  })();
}
