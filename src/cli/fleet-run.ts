/**
 * `baton run <job>` for a job that lives in an application (library mode, docs/library-mode.md):
 * the CLI cannot run a function of another process, so it asks the fleet. Used when the job is
 * not in the schedules file (or there is none) and a live runner of the namespace has it loaded:
 * a request row (store/run-requests.ts) is taken by one replica, which runs the job through its
 * lock like any manual run; the CLI follows the run's row to its verdict and exits as a foreground
 * `baton run` would (0 done; the job's failure; 75 running elsewhere). `--env K=V` travels with
 * the request (the handler's `ctx.params`; the run's row records them, secretEnv masked); `--fire`
 * (a past fire) and `--wait` are refused for such a job, and so are arguments after `--`. A
 * request no replica took in time is cancelled (a conditional UPDATE, the replicas' take's
 * mirror): the CLI's "not run" is then true for good — no replica can run it later. So is a
 * request whose CLI is interrupted (Ctrl-C, SIGTERM) before a replica took it: cancelled, exit
 * 130; once a replica has taken it, the run goes on there and the CLI stops following it (130 too,
 * saying where it runs; `baton kill` stops it). A second signal exits at once.
 *
 * A value for one of the job's `secretEnv` variables (the replicas publish their names in the
 * registry) is refused before anything is written: the request travels through a table, and a
 * secret would be kept there, in the binary log and in backups, in plain text.
 */
import { runDocument } from '../actions/documents.js';
import { delay } from '../delay.js';
import {
  BatonError,
  InterruptedError,
  JobFailedError,
  LockHeldError,
  UsageError,
} from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import { operatorName } from '../operator.js';
import { recordAction, setActionOutcome } from '../store/audit.js';
import { openPool } from '../store/connect.js';
import type { Queryable } from '../store/deadline.js';
import { databaseNow } from '../store/fire-reads.js';
import { findRun } from '../store/history-reads.js';
import {
  cancelRunRequest,
  findRunRequest,
  insertRunRequest,
  RUN_REQUEST_TTL_MS,
} from '../store/run-requests.js';
import { DEFAULT_GONE_AFTER_MS, listRunners, runnerState } from '../store/runners.js';
import type { DatabaseTarget } from '../config/database-url.js';

/** How long the CLI waits for a replica to take its request (they look once a second). */
const TAKE_TIMEOUT_MS = RUN_REQUEST_TTL_MS;
const POLL_MS = 200;
/** How often the CLI checks that the replica running its run is alive. */
const REPLICA_CHECK_MS = 5_000;

/**
 * Ctrl-C and SIGTERM while the CLI waits: `signal` aborts (its reason is the signal's name), and
 * the waits below end at once. A second signal does not wait for the cancel: exit 130 now.
 */
function interruption(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals) => {
    if (controller.signal.aborted) process.exit(ExitCode.Interrupted);
    controller.abort(name);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/** The `--env` names the job keeps secret on any of its replicas (`secretEnv`). */
function secretNames(
  holders: { jobs: ReadonlyMap<string, { secretEnv?: readonly string[] }> }[],
  job: string,
): Set<string> {
  return new Set(holders.flatMap((h) => [...(h.jobs.get(job)?.secretEnv ?? [])]));
}

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
  /** `--env K=V`, checked. */
  env: Record<string, string>;
  /** The words after `--` (refused: a handler takes none). */
  args: readonly string[];
  /** `--wait` seconds (refused when > 0). */
  wait: number;
}

/**
 * Asks a library-mode replica to run the job; null when no live runner of the namespace has it
 * (the caller then reports the job as unknown, as before).
 */
export async function runInFleet(a: FleetRunArgs): Promise<number | null> {
  const pool = openPool(a.target, 1);
  const interrupt = interruption();
  const sleep = (ms: number) => delay(ms, interrupt.signal);
  const interruptedBy = () => `interrupted by ${String(interrupt.signal.reason)}`;
  try {
    // A database that cannot tell (unreachable, no registry yet) has no replica to ask: the
    // caller reports the job as it always did.
    const holders = await replicasWith(pool, a.namespace, a.job).catch(() => []);
    if (holders.length === 0) {
      if (interrupt.signal.aborted)
        throw new InterruptedError(`${a.job} not run: ${interruptedBy()}`);
      return null;
    }
    const refuse = (what: string) =>
      new UsageError(
        `${a.job} is run by the replicas that have it (library mode), not here: ${what}`,
      );
    if (a.args.length > 0) {
      throw refuse('arguments after -- are for command jobs; pass values with --env K=V');
    }
    if (a.wait > 0) throw refuse('--wait is not available for it (75 means it is running)');
    const secretEnv = secretNames(holders, a.job);
    const secret = Object.keys(a.env).filter((name) => secretEnv.has(name));
    if (secret.length > 0) {
      throw refuse(
        `--env ${secret.join(', ')}: the job keeps ${secret.length === 1 ? 'it' : 'them'} ` +
          'secret (secretEnv), and a request travels through the database, where the value ' +
          "would be stored in plain text; give the replicas the value in their own environment (or the job's env)",
      );
    }
    if (interrupt.signal.aborted)
      throw new InterruptedError(`${a.job} not run: ${interruptedBy()}`);
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
      env: a.env,
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
      if (interrupt.signal.aborted) {
        // Not taken yet: cancelled for good. Taken: the replica runs it; said below.
        if (await cancelRunRequest(pool, id, interruptedBy())) {
          await setActionOutcome(pool, auditId, `not run: ${interruptedBy()}`);
          throw new InterruptedError(
            `${a.job} not run: ${interruptedBy()}; the request is cancelled, no replica will run it`,
          );
        }
        request = await findRunRequest(pool, id);
        const where = request?.takenBy ? ` by ${request.takenBy}` : '';
        await setActionOutcome(pool, auditId, `${interruptedBy()}: taken${where}`, request?.runId);
        throw new InterruptedError(
          `${a.job}: ${interruptedBy()}; the request was already taken${where}: its run, if ` +
            `any, goes on (baton history ${a.job}; baton kill ${a.job} stops it)`,
        );
      }
      // Taken, but its replica never said what came of it (it died between the two): its run,
      // if any, is reaped by the others; this CLI cannot follow what it cannot name.
      if (Date.now() > deadline + TAKE_TIMEOUT_MS && request?.takenBy) {
        await setActionOutcome(pool, auditId, `taken by ${request.takenBy}, no outcome`);
        throw new BatonError(
          'RUN_REQUEST_NO_OUTCOME',
          `${a.job}: ${request.takenBy} took the request and never said whether it started the ` +
            `run: see baton history ${a.job}`,
          ExitCode.Unavailable,
        );
      }
      if (
        Date.now() > deadline &&
        (await cancelRunRequest(pool, id, 'no replica took it in time'))
      ) {
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
    let looked = Date.now();
    while (run == null || run.status === 'running') {
      if (interrupt.signal.aborted) {
        await setActionOutcome(pool, auditId, `${interruptedBy()}: left running`, runId);
        throw new InterruptedError(
          `${a.job}: ${interruptedBy()}; run ${runId} goes on on ${request.takenBy} ` +
            `(baton kill ${a.job} stops it)`,
        );
      }
      await sleep(POLL_MS);
      run = await findRun(pool, runId);
      // Every few seconds: is the replica running it still alive? A fleet whose last replica
      // died has nobody to reap the run; this CLI must not wait for ever.
      if (run?.status === 'running' && Date.now() - looked > REPLICA_CHECK_MS) {
        looked = Date.now();
        const host = run.host;
        if (!(await replicasWith(pool, a.namespace, a.job)).some((r) => r.host === host)) {
          await setActionOutcome(pool, auditId, `${host} is gone while running it`, runId);
          throw new BatonError(
            'RUN_REPLICA_GONE',
            `${a.job}: ${host}, which was running it (run ${runId}), is gone; the run is ` +
              'recorded lost when another replica notices',
            ExitCode.Unavailable,
          );
        }
      }
    }
    await setActionOutcome(pool, auditId, run.status, runId);
    if (a.json) process.stdout.write(`${JSON.stringify(runDocument(run), null, 2)}\n`);
    if (run.status !== 'done') {
      throw new JobFailedError(`${a.job} failed: ${run.error} (run ${runId})`, run.exitCode);
    }
    if (!a.json) process.stderr.write(`baton: ${a.job} done on ${run.host} (run ${runId})\n`);
    return ExitCode.Ok;
  } finally {
    interrupt.dispose();
    await pool.end().catch(() => {});
  }
}
