/**
 * `baton run <job>` of a job this command does not run in its own process: asked of the fleet
 * through a run request (actions/run-request.ts has the checks, the audit row and the request;
 * actions/run-request-watch.ts the runner's half), then followed to its verdict, exiting as a
 * foreground `baton run` would (0 done; the job's failure; 75 running elsewhere). Three cases:
 *
 * - `--on-host H`: the live runner H runs it, if it may (docs/cli.md, "Running a placed job by
 *   hand");
 * - a job with `runOn`: one of the live runners that may run it (this host is not a runner);
 * - a job no schedules file here has, which a live runner of the namespace has loaded (a
 *   library-mode application's, docs/library-mode.md).
 *
 * `--env K=V` travels with the request (the run's row records them, secretEnv masked; a handler's
 * `ctx.params`); `--fire` (a past fire), `--wait`, `--with-dependents` and arguments after `--`
 * are refused, before anything is written: a request carries none of them. A request no runner
 * took in time is cancelled (a conditional UPDATE, the runners' take's mirror): the CLI's "not
 * run" is then true for good. So is a request whose CLI is interrupted (Ctrl-C, SIGTERM) before
 * a runner took it: cancelled, exit 130; once a runner has taken it, the run goes on there and
 * the CLI stops following it (130 too, saying where it runs; `baton kill` stops it). A second
 * signal exits at once.
 */
import { runDocument } from '../actions/documents.js';
import {
  askRun,
  noRunnerForPlacedJob,
  refuseSecretEnv,
  runnersToAsk,
} from '../actions/run-request.js';
import { delay } from '../delay.js';
import { BatonError, InterruptedError, JobFailedError, UsageError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import { operatorName } from '../operator.js';
import { setActionOutcome } from '../store/audit.js';
import { openPool } from '../store/connect.js';
import type { Queryable } from '../store/deadline.js';
import { databaseNow } from '../store/fire-reads.js';
import { findRun } from '../store/history-reads.js';
import { DEFAULT_GONE_AFTER_MS, listRunners, runnerState } from '../store/runners.js';
import type { DatabaseTarget } from '../config/database-url.js';

const POLL_MS = 200;
/** How often the CLI checks that the runner running its run is alive. */
const RUNNER_CHECK_MS = 5_000;

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

async function isAlive(pool: Queryable, namespace: string, host: string): Promise<boolean> {
  const now = await databaseNow(pool);
  return (await listRunners(pool, namespace)).some(
    (r) => r.host === host && runnerState(r, now, DEFAULT_GONE_AFTER_MS) === 'alive',
  );
}

export interface FleetRunArgs {
  job: string;
  namespace: string;
  target: DatabaseTarget;
  host: string;
  json: boolean;
  reason?: string | undefined;
  /** The runner named by `--on-host`; null: any that may run the job. */
  onHost: string | null;
  /** The job's `runOn` in words when this host's schedules file places it; null otherwise. */
  placed: string | null;
  /** `--env K=V`, checked. */
  env: Record<string, string>;
  /** The words after `--` (refused: a request carries none). */
  args: readonly string[];
  /** `--wait` seconds (refused when > 0). */
  wait: number;
  /** `--fire`, `--with-dependents` given (refused). */
  fire: boolean;
  withDependents: boolean;
}

/** Why the job goes to the fleet, for the refusals of what a request cannot carry. */
function whyAsked(a: FleetRunArgs): string {
  if (a.onHost != null) return `--on-host asks ${a.onHost} to run ${a.job}`;
  if (a.placed != null) return `${a.job} runs only on runners that match its runOn (${a.placed})`;
  return `${a.job} is run by the replicas that have it (library mode), not here`;
}

/** Refuses what a request cannot carry, before the database is opened. */
function refuseUnsent(a: FleetRunArgs): void {
  const refuse = (what: string) => new UsageError(`${whyAsked(a)}: ${what}`);
  if (a.fire) {
    throw refuse(
      '--fire is not sent to another runner; run the past fire on a runner that may run it ' +
        '(the write API: POST /api/jobs/{job}/run {"fire": …})',
    );
  }
  if (a.withDependents) throw refuse('--with-dependents is not sent to another runner');
  if (a.args.length > 0) {
    const why =
      a.onHost != null || a.placed != null
        ? 'are not sent to another runner'
        : 'are for command jobs'; // a replica's job is a handler
    throw refuse(`arguments after -- ${why}; pass values with --env K=V`);
  }
  if (a.wait > 0) throw refuse('--wait is not available for it (75 means it is running)');
}

/**
 * Asks the fleet to run the job and follows its run; null when no host is named, the job is not
 * placed, and no live runner of the namespace has it (the caller then reports the job as
 * unknown, as before).
 */
export async function runInFleet(a: FleetRunArgs): Promise<number | null> {
  // A job nobody has is reported unknown by the caller, whatever else was given.
  const named = a.onHost != null || a.placed != null;
  if (named) refuseUnsent(a);
  const pool = openPool(a.target, 1);
  const interrupt = interruption();
  const interruptedBy = () => `interrupted by ${String(interrupt.signal.reason)}`;
  try {
    const ask = { namespace: a.namespace, job: a.job, onHost: a.onHost, env: a.env };
    // A library-mode job: a database that cannot tell (unreachable, no registry yet) has no
    // replica to ask, and the caller reports the job as it always did. A named runner or a
    // placed job: the database's error is the answer.
    const lookup = runnersToAsk(pool, ask);
    const runners = named ? await lookup : await lookup.catch(() => null);
    if (runners == null) {
      if (a.placed != null) throw noRunnerForPlacedJob(a.namespace, a.job, a.placed);
      if (interrupt.signal.aborted)
        throw new InterruptedError(`${a.job} not run: ${interruptedBy()}`);
      return null;
    }
    refuseUnsent(a);
    refuseSecretEnv(runners, a);
    const actor = {
      operator: operatorName(),
      via: 'cli' as const,
      host: a.host,
      reason: a.reason ?? null,
    };
    const started = await askRun(pool, ask, runners, actor, {
      signal: interrupt.signal,
      asked: (id) => {
        if (a.json) return;
        const whom = a.onHost ?? runners.map((r) => r.host).join(', ');
        process.stderr.write(`baton: ${whyAsked(a)}; asked ${whom} (request ${id})\n`);
      },
    });
    const { runId, auditId } = started;
    if (!a.json)
      process.stderr.write(`baton: ${a.job} started on ${started.host} (run ${runId})\n`);
    let run = await findRun(pool, runId);
    let looked = Date.now();
    while (run == null || run.status === 'running') {
      if (interrupt.signal.aborted) {
        await setActionOutcome(pool, auditId, `${interruptedBy()}: left running`, runId);
        throw new InterruptedError(
          `${a.job}: ${interruptedBy()}; run ${runId} goes on on ${started.host} ` +
            `(baton kill ${a.job} stops it)`,
        );
      }
      await delay(POLL_MS, interrupt.signal);
      run = await findRun(pool, runId);
      // Every few seconds: is the runner running it still alive? A fleet whose last runner died
      // has nobody to reap the run; this CLI must not wait for ever.
      if (run?.status === 'running' && Date.now() - looked > RUNNER_CHECK_MS) {
        looked = Date.now();
        const host = run.host;
        if (!(await isAlive(pool, a.namespace, host))) {
          await setActionOutcome(pool, auditId, `${host} is gone while running it`, runId);
          throw new BatonError(
            'RUN_REPLICA_GONE',
            `${a.job}: ${host}, which was running it (run ${runId}), is gone; the run is ` +
              'recorded lost when another runner notices',
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
