/**
 * Running a job on another runner because an operator asked: the asker's half of a run request
 * (store/run-requests.ts the table, actions/run-request-watch.ts the runner's half). Used when
 * the process asked cannot or must not run the job itself:
 *
 * - `--on-host H` / the write API's `onHost`: the operator names the runner. H must be a live
 *   runner of the namespace (its registry row heartbeating), have the job loaded, and be allowed
 *   to run it (its registry entry has no `ineligible`: `runOn`, config/placement.ts). The request
 *   is addressed to H and only H takes it.
 * - a job with `runOn`, asked without a host: the CLI's host is not a runner and has no tags, so
 *   it is never where a placed job may run (the SFTP mount, the licence), and a runner serving the
 *   write API may not be either. The request is addressed to no one, and one of the live runners
 *   that may run the job takes it; with none of them live it is refused, saying where the job may
 *   run.
 * - a job of a library-mode application (no schedules file here has it): the CLI cannot run a
 *   function of another process; a replica that has it takes the request (cli/fleet-run.ts).
 *
 * Every refusal is made from the registry before anything is written (no audit row, no request):
 * a host given is only ever compared with the registry's names — whatever it looks like, it is
 * a name, never an option or an address. Once checked, the audit row is written first (as every
 * operator action's), then the request; `askRun` resolves once a runner started the run (its
 * id, to follow) and throws what else came of it, the audit's outcome said first.
 *
 * A value for one of the job's `secretEnv` variables (runners publish their names in the
 * registry) is refused: the request travels through a table, and a secret would be kept there,
 * in the binary log and in backups, in plain text.
 */
import { delay } from '../delay.js';
import { BatonError, InterruptedError, LockHeldError, UsageError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import { recordAction, setActionOutcome } from '../store/audit.js';
import type { Queryable } from '../store/deadline.js';
import { databaseNow } from '../store/fire-reads.js';
import {
  cancelRunRequest,
  findRunRequest,
  insertRunRequest,
  RUN_REQUEST_TTL_MS,
  type RunRequest,
} from '../store/run-requests.js';
import {
  DEFAULT_GONE_AFTER_MS,
  listRunners,
  runnerState,
  type RunnerRecord,
} from '../store/runners.js';
import type { Actor } from './pause.js';
import { authorize, scopeDetails } from './scope.js';

/** How often the asker looks at its request (runners look for requests once a second). */
const POLL_MS = 200;

export interface RunElsewhere {
  namespace: string;
  job: string;
  /** The runner asked (`--on-host`); null: any live runner that may run the job. */
  onHost: string | null;
  /** `--env K=V`, checked. */
  env: Record<string, string>;
}

/** Refusals of a request, each with its own code (the write API answers by it). */
export const RUN_ELSEWHERE_REFUSALS = {
  /** No runner of that name has ever registered in the namespace: exit 64. */
  unknownRunner: 'RUNNER_UNKNOWN',
  /** It registered, but is stopped or gone: exit 69. */
  notLive: 'RUNNER_NOT_LIVE',
  /** It has no such job loaded: exit 64. */
  noJob: 'RUNNER_HAS_NO_JOB',
  /** Its registry entry says it may not run the job (`runOn`): exit 64. */
  mayNotRun: 'RUNNER_MAY_NOT_RUN',
  /** No live runner may run the placed job: exit 69. */
  noneMayRun: 'NO_RUNNER_MAY_RUN',
} as const;

function liveRunners(runners: readonly RunnerRecord[], now: Date): RunnerRecord[] {
  return runners.filter((r) => runnerState(r, now, DEFAULT_GONE_AFTER_MS) === 'alive');
}

/** A name from the command line or a request body, printed so that nothing in it can deceive. */
function quoted(host: string): string {
  return JSON.stringify(host);
}

function liveList(live: readonly RunnerRecord[]): string {
  return live.length > 0 ? live.map((r) => r.host).join(', ') : 'none';
}

/**
 * The live runners a request for `a` may go to: the one named, or those that may run the job.
 * Throws the refusal when there is none. Null when no host is named and no live runner has the
 * job at all (a job nobody knows: the caller reports it as unknown, as for any job).
 */
export async function runnersToAsk(
  pool: Queryable,
  a: Pick<RunElsewhere, 'namespace' | 'job' | 'onHost'>,
): Promise<RunnerRecord[] | null> {
  const now = await databaseNow(pool);
  const runners = await listRunners(pool, a.namespace);
  const live = liveRunners(runners, now);
  if (a.onHost != null) {
    const named = runners.find((r) => r.host === a.onHost);
    if (!named) {
      throw new BatonError(
        RUN_ELSEWHERE_REFUSALS.unknownRunner,
        `${a.job} not run: no runner ${quoted(a.onHost)} in namespace ${a.namespace} ` +
          `(live runners: ${liveList(live)}; baton status lists them)`,
        ExitCode.Usage,
      );
    }
    const state = runnerState(named, now, DEFAULT_GONE_AFTER_MS);
    if (state !== 'alive') {
      const when = (named.stoppedAt ?? named.lastSeenAt).toISOString();
      throw new BatonError(
        RUN_ELSEWHERE_REFUSALS.notLive,
        `${a.job} not run: ${a.onHost} is not a live runner of namespace ${a.namespace} ` +
          `(${state === 'stopped' ? `stopped at ${when}` : `gone: last seen ${when}`}; ` +
          `live runners: ${liveList(live)})`,
        ExitCode.Unavailable,
      );
    }
    const entry = named.jobs.get(a.job);
    if (!entry) {
      throw new BatonError(
        RUN_ELSEWHERE_REFUSALS.noJob,
        `${a.job} not run: ${a.onHost} has no job ${a.job} (not in the schedules it loaded)`,
        ExitCode.Usage,
      );
    }
    if (entry.ineligible != null) {
      const may = live.filter((r) => {
        const e = r.jobs.get(a.job);
        return e != null && e.ineligible == null;
      });
      throw new BatonError(
        RUN_ELSEWHERE_REFUSALS.mayNotRun,
        `${a.onHost} may not run ${a.job}: ${entry.ineligible} ` +
          `(live runners that may: ${liveList(may)})`,
        ExitCode.Usage,
      );
    }
    return [named];
  }
  const having = live.filter((r) => r.jobs.has(a.job));
  if (having.length === 0) return null;
  const may = having.filter((r) => r.jobs.get(a.job)?.ineligible == null);
  if (may.length === 0) {
    const why = having[0]!.jobs.get(a.job)?.ineligible ?? '';
    throw new BatonError(
      RUN_ELSEWHERE_REFUSALS.noneMayRun,
      `${a.job} not run: no live runner of namespace ${a.namespace} may run it (${why}; ` +
        `live runners: ${liveList(live)}); start one that may, or name one with --on-host`,
      ExitCode.Unavailable,
    );
  }
  return may;
}

/** A job's placement in words for the refusal when no runner has registered it at all. */
export function noRunnerForPlacedJob(namespace: string, job: string, where: string): BatonError {
  return new BatonError(
    RUN_ELSEWHERE_REFUSALS.noneMayRun,
    `${job} not run: it runs only on runners that match its runOn (${where}), and no live ` +
      `runner of namespace ${namespace} has it; the command does not run a placed job on this ` +
      'host: start a runner that may, or name one with --on-host',
    ExitCode.Unavailable,
  );
}

/** Refuses `--env` values of the job's `secretEnv` variables (see the header). */
export function refuseSecretEnv(
  runners: readonly RunnerRecord[],
  a: Pick<RunElsewhere, 'job' | 'env'>,
): void {
  const secretEnv = new Set(runners.flatMap((r) => [...(r.jobs.get(a.job)?.secretEnv ?? [])]));
  const secret = Object.keys(a.env).filter((name) => secretEnv.has(name));
  if (secret.length > 0) {
    throw new UsageError(
      `${a.job} is run by another runner, not here: --env ${secret.join(', ')}: the job keeps ` +
        `${secret.length === 1 ? 'it' : 'them'} secret (secretEnv), and a request travels ` +
        'through the database, where the value would be stored in plain text; give the ' +
        "runners the value in their own environment (or the job's env)",
    );
  }
}

export interface AskHooks {
  /** Aborts the wait (Ctrl-C): an untaken request is cancelled, a taken one goes on. */
  signal?: AbortSignal;
  /** Told once the request is written (the CLI says where it asked). */
  asked?: (requestId: number) => void;
}

/** A request a runner took and started the run of. */
export interface RunAsked {
  auditId: number;
  requestId: number;
  runId: number;
  /** The runner running it. */
  host: string;
}

/**
 * Writes the audit row and the request for `a`, sent to `runners` (from `runnersToAsk`), and
 * waits until a runner started the run; throws why not (the audit's outcome says it too): busy
 * (75), not taken in time or not run (69), interrupted (130).
 */
export async function askRun(
  pool: Queryable,
  a: RunElsewhere,
  runners: readonly RunnerRecord[],
  actor: Actor,
  hooks: AskHooks = {},
): Promise<RunAsked> {
  const interrupted = () => `interrupted by ${String(hooks.signal?.reason)}`;
  if (hooks.signal?.aborted) throw new InterruptedError(`${a.job} not run: ${interrupted()}`);
  await authorize(pool, actor, { action: 'run', job: a.job, namespace: a.namespace });
  const asked = a.onHost ?? runners.map((r) => r.host).join(', ');
  const auditId = await recordAction(pool, {
    namespace: a.namespace,
    job: a.job,
    action: 'run',
    ...actor,
    details: {
      via: 'run-request',
      ...(a.onHost != null ? { onHost: a.onHost } : {}),
      ...scopeDetails(actor),
    },
  });
  const requestId = await insertRunRequest(pool, {
    namespace: a.namespace,
    job: a.job,
    requestedBy: actor.operator,
    env: a.env,
    targetHost: a.onHost,
  });
  hooks.asked?.(requestId);
  const request = await awaitOutcome(pool, a, requestId, auditId, hooks.signal, asked);
  const outcome = request.outcome ?? '';
  if (outcome.startsWith('busy')) {
    await setActionOutcome(pool, auditId, `not run: ${outcome}`, request.runId);
    throw new LockHeldError(`${a.job} not run: ${outcome.slice('busy: '.length)}`);
  }
  if (request.runId == null || request.takenBy == null) {
    await setActionOutcome(pool, auditId, outcome);
    throw new BatonError('RUN_REQUEST_NOT_RUN', `${a.job} ${outcome}`, ExitCode.Unavailable);
  }
  await setActionOutcome(
    pool,
    auditId,
    `started on ${request.takenBy} (run ${request.runId})`,
    request.runId,
  );
  return { auditId, requestId, runId: request.runId, host: request.takenBy };
}

/** Waits for the request's outcome (see `askRun`): cancelled when untaken in time or interrupted. */
async function awaitOutcome(
  pool: Queryable,
  a: RunElsewhere,
  id: number,
  auditId: number,
  signal: AbortSignal | undefined,
  asked: string,
): Promise<RunRequest & { outcome: string }> {
  const interrupted = () => `interrupted by ${String(signal?.reason)}`;
  const deadline = Date.now() + RUN_REQUEST_TTL_MS;
  let request = await findRunRequest(pool, id);
  while (request?.outcome == null) {
    if (signal?.aborted) {
      // Not taken yet: cancelled for good. Taken: the runner runs it; said below.
      if (await cancelRunRequest(pool, id, interrupted())) {
        await setActionOutcome(pool, auditId, `not run: ${interrupted()}`);
        throw new InterruptedError(
          `${a.job} not run: ${interrupted()}; the request is cancelled, no runner will run it`,
        );
      }
      request = await findRunRequest(pool, id);
      const where = request?.takenBy ? ` by ${request.takenBy}` : '';
      await setActionOutcome(pool, auditId, `${interrupted()}: taken${where}`, request?.runId);
      throw new InterruptedError(
        `${a.job}: ${interrupted()}; the request was already taken${where}: its run, if ` +
          `any, goes on (baton history ${a.job}; baton kill ${a.job} stops it)`,
      );
    }
    // Taken, but its runner never said what came of it (it died between the two): its run, if
    // any, is reaped by the others; the asker cannot follow what it cannot name.
    if (Date.now() > deadline + RUN_REQUEST_TTL_MS && request?.takenBy) {
      await setActionOutcome(pool, auditId, `taken by ${request.takenBy}, no outcome`);
      throw new BatonError(
        'RUN_REQUEST_NO_OUTCOME',
        `${a.job}: ${request.takenBy} took the request and never said whether it started the ` +
          `run: see baton history ${a.job}`,
        ExitCode.Unavailable,
      );
    }
    if (Date.now() > deadline && (await cancelRunRequest(pool, id, 'no runner took it in time'))) {
      await setActionOutcome(pool, auditId, 'not run: no runner took the request');
      throw new BatonError(
        'RUN_REQUEST_UNTAKEN',
        `${a.job} not run: no runner took the request within ${RUN_REQUEST_TTL_MS / 1000}s ` +
          `(asked: ${asked})`,
        ExitCode.Unavailable,
      );
    }
    await delay(POLL_MS, signal);
    request = await findRunRequest(pool, id);
  }
  return request as RunRequest & { outcome: string };
}
