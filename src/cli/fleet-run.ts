/**
 * `baton run <job>` for a job that lives in an application (library mode, docs/library-mode.md):
 * the CLI cannot run a function of another process, so it asks the fleet. Used when the job is
 * not in the schedules file (or there is none) and a live runner of the namespace has it loaded:
 * a request row (store/run-requests.ts) is taken by one replica, which runs the job through its
 * lock like any manual run; the CLI follows the run's row to its verdict and exits as a foreground
 * `baton run` would (0 done; the job's failure; 75 running elsewhere). `--env`, `--fire` and
 * `--wait` are not carried over (the request names only the job).
 */
import { BatonError, JobFailedError, LockHeldError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import { operatorName } from '../operator.js';
import { recordAction, setActionOutcome } from '../store/audit.js';
import { openPool } from '../store/connect.js';
import type { Queryable } from '../store/deadline.js';
import { databaseNow } from '../store/fire-reads.js';
import { findRun } from '../store/history-reads.js';
import { findRunRequest, insertRunRequest } from '../store/run-requests.js';
import { DEFAULT_GONE_AFTER_MS, listRunners, runnerState } from '../store/runners.js';
import type { DatabaseTarget } from '../config/database-url.js';
import { runToJson } from './format.js';

/** How long the CLI waits for a replica to take its request (they look once a second). */
const TAKE_TIMEOUT_MS = 15_000;
const POLL_MS = 200;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function replicasWith(pool: Queryable, namespace: string, job: string) {
  const now = await databaseNow(pool);
  return (await listRunners(pool, namespace)).filter(
    (r) => runnerState(r, now, DEFAULT_GONE_AFTER_MS) === 'alive' && r.jobs.has(job),
  );
}

export interface FleetRunArgs {
  job: string;
  namespace: string;
  target: DatabaseTarget;
  host: string;
  json: boolean;
  reason?: string | undefined;
}

/**
 * Asks a library-mode replica to run the job; null when no live runner of the namespace has it
 * (the caller then reports the job as unknown, as before).
 */
export async function runInFleet(a: FleetRunArgs): Promise<number | null> {
  const pool = openPool(a.target, 1);
  try {
    // A database that cannot tell (unreachable, no registry yet) has no replica to ask: the
    // caller reports the job as it always did.
    const holders = await replicasWith(pool, a.namespace, a.job).catch(() => []);
    if (holders.length === 0) return null;
    const auditId = await recordAction(pool, {
      namespace: a.namespace,
      job: a.job,
      action: 'run',
      operator: operatorName(),
      via: 'cli',
      host: a.host,
      reason: a.reason ?? null,
      details: { via: 'run-request' },
    });
    const id = await insertRunRequest(pool, {
      namespace: a.namespace,
      job: a.job,
      requestedBy: operatorName(),
    });
    if (!a.json) {
      process.stderr.write(
        `baton: ${a.job} is not in a schedules file here; asked the replicas that have it ` +
          `(${holders.map((h) => h.host).join(', ')}) to run it (request ${id})\n`,
      );
    }
    const deadline = Date.now() + TAKE_TIMEOUT_MS;
    let request = await findRunRequest(pool, id);
    while (request?.outcome == null) {
      if (Date.now() > deadline) {
        await setActionOutcome(pool, auditId, 'not run: no replica took the request');
        throw new BatonError(
          'RUN_REQUEST_UNTAKEN',
          `${a.job} not run: no replica took the request within ${TAKE_TIMEOUT_MS / 1000}s ` +
            '(library-mode replicas answer `baton run`; a daemon does not)',
          ExitCode.Unavailable,
        );
      }
      await sleep(POLL_MS);
      request = await findRunRequest(pool, id);
    }
    if (request.outcome.startsWith('busy')) {
      await setActionOutcome(pool, auditId, `not run: ${request.outcome}`, request.runId);
      throw new LockHeldError(`${a.job} not run: ${request.outcome.slice('busy: '.length)}`);
    }
    if (request.runId == null) {
      await setActionOutcome(pool, auditId, request.outcome);
      throw new BatonError(
        'RUN_REQUEST_NOT_RUN',
        `${a.job} ${request.outcome}`,
        ExitCode.Unavailable,
      );
    }
    const runId = request.runId;
    if (!a.json)
      process.stderr.write(`baton: ${a.job} started on ${request.takenBy} (run ${runId})\n`);
    let run = await findRun(pool, runId);
    while (run == null || run.status === 'running') {
      await sleep(POLL_MS);
      run = await findRun(pool, runId);
    }
    await setActionOutcome(pool, auditId, run.status, runId);
    if (a.json) process.stdout.write(`${JSON.stringify(runToJson(run), null, 2)}\n`);
    if (run.status !== 'done') {
      throw new JobFailedError(`${a.job} failed: ${run.error} (run ${runId})`, run.exitCode);
    }
    if (!a.json) process.stderr.write(`baton: ${a.job} done on ${run.host} (run ${runId})\n`);
    return ExitCode.Ok;
  } finally {
    await pool.end().catch(() => {});
  }
}
