/**
 * A replica's half of library mode's `baton run <job>` (store/run-requests.ts has the table): the
 * CLI cannot run a function that lives in an application, so it writes a request, and each
 * replica looks for the open requests of its jobs once a tick (RUN_REQUEST_WATCH_MS). The replica
 * that takes one (a conditional UPDATE: one wins) starts the job through its lock like any manual
 * run (actions/run.ts `startRun`, the write API's path; the audit row is the CLI's), with the
 * request's `--env` parameters (its `ctx.params`), and writes what came of it: the run's id, which the
 * CLI then follows to its verdict, or why it did not run (busy elsewhere, stopping). Polling for
 * the same reason as kill-watch.ts: the request comes from another host through the database.
 */
import { startRun } from '../actions/run.js';
import type { ManualStart, OperatorFires } from '../fire/operator-fire.js';
import { parseEnvPairs, type ManualParams } from '../fire/run-params.js';
import { delay } from '../delay.js';
import type { KeepAlive } from '../keep-alive.js';

import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import { openRunRequests, settleRunRequest, takeRunRequest } from '../store/run-requests.js';

/** How often a replica looks for run requests. */
export const RUN_REQUEST_WATCH_MS = 1_000;

export interface RunRequestWatch {
  /** The replica as the process of operators' fires while it can write; null: skip this tick. */
  fires: () => OperatorFires | null;
  namespace: string;
  host: string;
  jobs: () => readonly string[];
  log: Logger;
  /** Whether its sleeps hold the process (the scheduler's policy, keep-alive.ts). */
  keepAlive?: KeepAlive;
}

/** What the request row says came of it. */
function outcomeOf(start: ManualStart | null): { runId: number | null; outcome: string } {
  if (!start) return { runId: null, outcome: 'not run: the job is not loaded here' };
  if (start.status === 'started') return { runId: start.runId, outcome: 'started' };
  if (start.status === 'busy') return { runId: start.runId, outcome: `busy: ${start.reason}` };
  return { runId: null, outcome: `not run: ${start.reason}` };
}

async function look(o: RunRequestWatch): Promise<void> {
  const fires = o.fires();
  if (!fires) return;
  const { pool } = fires;
  for (const request of await openRunRequests(pool, o.namespace, o.jobs())) {
    if (!(await takeRunRequest(pool, request.id, o.host))) continue;
    o.log.info({ job: request.job, request: request.id }, 'running a job: baton run asked');
    let params: ManualParams;
    try {
      // Checked by the CLI already; again here, as anything with a grant can write a request.
      params = {
        env: parseEnvPairs(Object.entries(request.env).map(([k, v]) => `${k}=${v}`)),
        args: [],
      };
    } catch (err) {
      await settleRunRequest(pool, request.id, null, `not run: ${errorMessage(err)}`);
      continue;
    }
    const job = fires.job(request.job);
    const start = job
      ? await startRun(fires, { job, params }).then(
          (run) => run.start,
          (err: unknown): ManualStart => ({ status: 'not-run', reason: errorMessage(err) }),
        )
      : null;
    const { runId, outcome } = outcomeOf(start);
    await settleRunRequest(pool, request.id, runId, outcome);
  }
}

/** Looks every RUN_REQUEST_WATCH_MS until `signal` aborts; a failed look is logged, not fatal. */
export function watchRunRequests(o: RunRequestWatch, signal: AbortSignal): void {
  void (async () => {
    for (;;) {
      await delay(RUN_REQUEST_WATCH_MS, signal, o.keepAlive);
      if (signal.aborted) return;
      await look(o).catch((err: unknown) =>
        o.log.warn({ err: errorMessage(err) }, 'could not look for run requests'),
      );
    }
  })();
}
