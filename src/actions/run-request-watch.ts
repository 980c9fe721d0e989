/**
 * A runner's half of a `baton run` that it did not start itself (store/run-requests.ts has the
 * table; actions/run-request.ts the asker's half): a job of a library-mode application (the CLI
 * cannot run a function that lives there), a placed job (`runOn`: the CLI's host is not where it
 * may run), or any job asked of this runner by name (`--on-host`, the write API's `onHost`).
 * Every runner — `baton start` and library mode's schedulers alike — looks for the open requests
 * it may take once a tick (RUN_REQUEST_WATCH_MS): those of the jobs it may run addressed to no
 * one, and those addressed to it. The runner that takes one (a conditional UPDATE: one wins, and
 * one addressed to another host is never taken here) starts the job through its lock like any
 * manual run (`startRun`, the write API's path; the audit row is the asker's), with the
 * request's `--env` parameters (its `ctx.params`), and writes what came of it: the run's id,
 * which the asker then follows, or why it did not run (busy elsewhere, stopping, not a job this
 * runner may run). Polling for the same reason as kill-watch.ts: the request comes from another
 * host through the database.
 */
import { startRun } from './run.js';
import type { ManualStart, OperatorFires } from '../fire/operator-fire.js';
import { parseEnvPairs, type ManualParams } from '../fire/run-params.js';
import { delay } from '../delay.js';
import type { KeepAlive } from '../keep-alive.js';

import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import {
  openRunRequests,
  settleRunRequest,
  takeRunRequest,
  type OpenRunRequest,
} from '../store/run-requests.js';

/** How often a runner looks for run requests. */
export const RUN_REQUEST_WATCH_MS = 1_000;

export interface RunRequestWatch {
  /** The runner as the process of operators' fires while it can write; null: skip this tick. */
  fires: () => OperatorFires | null;
  namespace: string;
  host: string;
  /** The jobs this runner may run (`runOn`), disabled ones included. */
  jobs: () => readonly string[];
  /** Why this runner may not run `job` ("needs tag sftp"); null when it may or has no such job. */
  whyNot: (job: string) => string | null;
  log: Logger;
  /** Whether its sleeps hold the process (the root's policy, keep-alive.ts). */
  keepAlive?: KeepAlive;
  /**
   * How the open requests are read; default `openRunRequests`. Library mode reads them together
   * with its schedules' revision, one statement for both (store/replica-inbox.ts).
   */
  open?: (pool: Queryable, jobs: readonly string[]) => Promise<OpenRunRequest[]>;
}

/** What the request row says came of it. */
function outcomeOf(start: ManualStart): { runId: number | null; outcome: string } {
  if (start.status === 'started') return { runId: start.runId, outcome: 'started' };
  if (start.status === 'busy') return { runId: start.runId, outcome: `busy: ${start.reason}` };
  return { runId: null, outcome: `not run: ${start.reason}` };
}

async function look(o: RunRequestWatch): Promise<void> {
  const fires = o.fires();
  // A stopping runner leaves the requests to the others (a request addressed to it waits out
  // its TTL, and its asker says no runner took it).
  if (!fires || fires.stopping()) return;
  const { pool } = fires;
  const mine = o.jobs();
  const open = o.open ?? ((db, jobs) => openRunRequests(db, o.namespace, o.host, jobs));
  for (const request of await open(pool, mine)) {
    if (!(await takeRunRequest(pool, request.id, o.host))) continue;
    // Addressed to this runner for a job it may not run (the asker checks the registry first;
    // this is for a registry read before a reload, or anything else with a grant that writes a
    // request): said at once, nothing runs.
    const whyNot = o.whyNot(request.job);
    const job = mine.includes(request.job) ? fires.job(request.job) : null;
    if (!job) {
      const why = whyNot
        ? `${o.host} may not run ${request.job}: ${whyNot}`
        : `${o.host} has no job ${request.job}`;
      o.log.warn({ job: request.job, request: request.id }, `a run request refused: ${why}`);
      await settleRunRequest(pool, request.id, null, `not run: ${why}`);
      continue;
    }
    o.log.info({ job: request.job, request: request.id }, 'running a job: baton run asked');
    let params: ManualParams;
    try {
      // Checked by the asker already; again here, as anything with a grant can write a request.
      params = {
        env: parseEnvPairs(Object.entries(request.env).map(([k, v]) => `${k}=${v}`)),
        args: [],
      };
    } catch (err) {
      await settleRunRequest(pool, request.id, null, `not run: ${errorMessage(err)}`);
      continue;
    }
    const start = await startRun(fires, { job, params }).then(
      (run) => run.start,
      (err: unknown): ManualStart => ({ status: 'not-run', reason: errorMessage(err) }),
    );
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
