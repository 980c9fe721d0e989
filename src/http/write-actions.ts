/**
 * What the write API's routes do (write-api.ts does the HTTP around them): run a job now or a
 * past fire again, backfill, pause, resume, kill — each the operator action its command takes
 * too (src/actions), taken by the runner that received the request: its fires
 * run on this runner, through the job's lock. Each is recorded in `baton_audit` (via `api`, the
 * token's name as operator, this runner as host) before it acts, its outcome added once known.
 * Here: which names this runner accepts, a scoped token's judgement before the job is looked up
 * (actions/scope.ts; each action judges again itself), the run's `env` and `args`, and the HTTP
 * answer of each outcome.
 */
import {
  type BackfillProgress,
  planBackfill,
  previewBackfill,
  runBackfill,
} from '../actions/backfill.js';
import { authorizeChain } from '../actions/dependents.js';
import { pauseDocument } from '../actions/documents.js';
import {
  pause,
  pauseOutcomeDocument,
  resume,
  resumeOutcomeDocument,
  type Actor,
} from '../actions/pause.js';
import { AlreadyRanError, runJob, type RunAction } from '../actions/run.js';
import {
  askRun,
  noRunnerForPlacedJob,
  refuseSecretEnv,
  RUN_ELSEWHERE_REFUSALS,
  runnersToAsk,
} from '../actions/run-request.js';
import {
  authorize,
  OutOfScopeError,
  type ActionScope,
  type ScopeAction,
} from '../actions/scope.js';
import { JOB_NAME_MAX, JOB_NAME_PATTERN } from '../config/names.js';
import type { JobDefinition } from '../config/schema.js';
import { checkParamsSize, PARAM_NAME, type ManualParams } from '../fire/run-params.js';
import { hasControlCharacter } from '../operator.js';
import { BatonError, errorMessage, LockHeldError, UsageError } from '../errors.js';
import { killOutcomeDocument, killRun } from '../actions/kill.js';
import type { OperatorFires } from '../fire/operator-fire.js';
import { parseFireTime } from '../instants.js';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import { findPause } from '../store/pauses.js';

/** What the write API acts on: the runner serving it. */
export interface WriteSubject {
  /** This runner's name (the audit's host). */
  host: string;
  namespace(): string;
  /** Every job of the loaded schedules file, disabled ones included. */
  jobs(): readonly string[];
  /** Why this runner may not run `job` (`runOn`: "needs tag sftp"); null when it may. */
  whyNotHere(job: string): string | null;
  /** A pool that takes writes; null while the runner cannot coordinate. */
  pool(): Queryable | null;
  /** The runner as the process of operators' fires (daemon/runner.ts); null as `pool`. */
  fires(): OperatorFires | null;
  /** Where a backfill's end is logged (it goes on after the answer). */
  log: Logger;
}

interface RunBody {
  fire?: string;
  again?: boolean;
  withDependents?: boolean;
  onHost?: string;
  env?: Record<string, string>;
  args?: string[];
}

/**
 * Variables that decide what code a process loads or runs rather than what it is asked to do:
 * the dynamic loader's, the shells' start-up files and field splitting, interpreters' options and
 * search paths, and the executable search path. Over HTTP they are refused, whatever the token's
 * scope: with them, "may run report-daily" would be "may run any code as the job's user" (a
 * library or script of the caller's, preloaded or found first). `baton run --env` takes them —
 * its operator has a shell already. A job that needs one sets it in its own `env:`.
 */
const CODE_LOADING_ENV =
  /^(?:LD_\w*|DYLD_\w*|BASH_FUNC_\w*|PATH|IFS|ENV|BASH_ENV|SHELLOPTS|BASHOPTS|PS4|CDPATH|GCONV_PATH|LOCPATH|HOSTALIASES|NODE_OPTIONS|NODE_PATH|NODE_EXTRA_CA_CERTS|PYTHON\w*|PERL5\w*|PERLLIB|PERLIO\w*|RUBYOPT|RUBYLIB|GEM_\w*|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|CLASSPATH|GIT_\w*|LESSOPEN|LESSCLOSE|TMPDIR|HOME|OTEL_\w*)$/;

/**
 * The body's `env` and `args` as a run's parameters, checked as `baton run --env K=V -- args`
 * checks them (fire/run-params.ts): variable names, no BATON_*, arguments for command jobs only,
 * at most PARAMS_MAX_BYTES as recorded; and no control character in a value or an argument (a
 * NUL cannot be passed to a process at all, and the history and the dashboard show them), and no
 * variable that changes what code the job loads (CODE_LOADING_ENV). A 400 naming the field, never
 * echoing a value, before anything is written or run.
 */
export function runParamsOf(job: JobDefinition, body: RunBody): ManualParams {
  const bad = (field: string, why: string) =>
    new ApiError(400, 'bad-request', `the body: ${field}: ${why}`);
  const env = body.env ?? {};
  const args = body.args ?? [];
  for (const [name, value] of Object.entries(env)) {
    const shown = /^[\x21-\x7e]{1,64}$/.test(name) ? `env.${name}` : 'env';
    if (!PARAM_NAME.test(name)) {
      throw bad(shown, 'not a variable name (letters, digits and _, not starting with a digit)');
    }
    if (name.startsWith('BATON_'))
      throw bad(shown, "BATON_* variables are baton's own (the fire's)");
    if (CODE_LOADING_ENV.test(name)) {
      throw bad(
        shown,
        'decides what code the job loads or runs (the loader, a shell or an interpreter, the ' +
          "search path): not taken over HTTP; set it in the job's env in the schedules file",
      );
    }
    if (hasControlCharacter(value)) throw bad(shown, 'the value contains a control character');
  }
  for (const [i, arg] of args.entries()) {
    if (hasControlCharacter(arg)) throw bad(`args[${i}]`, 'contains a control character');
  }
  if (args.length > 0 && job.target.kind !== 'command') {
    const kind = job.target.kind === 'shell' ? 'a shell job (`shell: true`)' : 'a module job';
    throw bad(
      'args',
      `${job.name} is ${kind}: arguments are for command jobs only; pass values in env`,
    );
  }
  try {
    checkParamsSize(env, args, 'env and args');
  } catch (err) {
    if (err instanceof UsageError)
      throw new ApiError(400, 'bad-request', `the body: ${err.message}`);
    throw err;
  }
  return { env: { ...env }, args: [...args] };
}

/**
 * POST /api/jobs/{job}/run: 202 once the run holds the lock, 409 naming who holds it. With
 * `fire`, that past fire of the schedule again (`baton run --fire`): 409 when it already ran
 * successfully, unless `again`. With `onHost`, or for a job this runner may not run (`runOn`),
 * another runner is asked (`runElsewhere`).
 */
export async function runAction(
  s: WriteSubject,
  job: string,
  body: RunBody,
  r: Who,
): Promise<ApiAnswer> {
  await inScope(s, r, body.fire != null ? 'rerun' : 'run', job);
  const definition = knownJob(s, job);
  const params = runParamsOf(definition, body);
  const fire = body.fire != null ? instantField('fire', body.fire) : null;
  if (body.again && fire == null) {
    throw new ApiError(400, 'bad-request', 'the body: again: needs fire');
  }
  const whyNot = s.whyNotHere(job);
  if (body.onHost != null || whyNot != null) return runElsewhere(s, job, body, params, r, whyNot);
  const fires = usableFires(s);
  let run: RunAction;
  try {
    run = await runJob(
      fires,
      {
        job: definition,
        params,
        fire,
        again: body.again === true,
        withDependents: body.withDependents === true,
      },
      actor(s, r),
    );
  } catch (err) {
    if (err instanceof AlreadyRanError) {
      throw new ApiError(409, 'already-ran', err.message, { runId: err.done.id });
    }
    if (err instanceof UsageError) throw new ApiError(400, 'bad-request', err.message);
    throw err;
  }
  const { start } = run;
  switch (start.status) {
    case 'started':
      return {
        status: 202,
        body: {
          job,
          runId: start.runId,
          scheduledAt: start.scheduledAt.toISOString(),
          rerun: run.rerun,
          host: s.host,
          paused: pauseDocument(run.pause),
          auditId: run.auditId,
          ...(body.withDependents ? { dependents: run.dependents.map((d) => d.job) } : {}),
        },
      };
    case 'busy':
      throw new ApiError(
        409,
        start.alreadyRan ? 'already-ran' : 'busy',
        `${job} not run: ${start.reason}`,
        {
          runId: start.runId,
        },
      );
    default:
      throw new ApiError(503, 'not-run', `${job} not run: ${start.reason}`);
  }
}

/** How the write API answers each refusal of a request to another runner (actions/run-request.ts). */
const REFUSAL_STATUS: Readonly<Record<string, [number, string]>> = {
  [RUN_ELSEWHERE_REFUSALS.unknownRunner]: [404, 'not-found'],
  [RUN_ELSEWHERE_REFUSALS.noJob]: [404, 'not-found'],
  [RUN_ELSEWHERE_REFUSALS.mayNotRun]: [409, 'ineligible'],
  [RUN_ELSEWHERE_REFUSALS.notLive]: [503, 'unavailable'],
  [RUN_ELSEWHERE_REFUSALS.noneMayRun]: [503, 'unavailable'],
};

/**
 * The run route asking another runner (actions/run-request.ts, as `baton run --on-host` and a
 * placed job's `baton run` do): `onHost` names it, else any live runner that may run the job. The
 * same checks from the registry, refused before anything is written; then the audit row and the
 * request, answered 202 once the runner asked has started the run (`host` says which).
 */
async function runElsewhere(
  s: WriteSubject,
  job: string,
  body: RunBody,
  params: ManualParams,
  r: Who,
  whyNot: string | null,
): Promise<ApiAnswer> {
  const why =
    body.onHost != null
      ? `onHost asks ${body.onHost} to run ${job}`
      : `${s.host} may not run ${job}: ${whyNot}`;
  if (body.fire != null || body.withDependents) {
    throw new ApiError(
      400,
      'bad-request',
      `${why}: fire and withDependents are not sent to another runner`,
    );
  }
  if (params.args.length > 0) {
    throw new ApiError(400, 'bad-request', `${why}: args are not sent to another runner; use env`);
  }
  const pool = usablePool(s);
  const ask = { namespace: s.namespace(), job, onHost: body.onHost ?? null, env: params.env };
  try {
    const runners = await runnersToAsk(pool, ask);
    if (!runners) throw noRunnerForPlacedJob(ask.namespace, job, whyNot ?? '');
    refuseSecretEnv(runners, ask);
    const started = await askRun(pool, ask, runners, actor(s, r));
    return {
      status: 202,
      body: {
        job,
        runId: started.runId,
        host: started.host,
        auditId: started.auditId,
        requestId: started.requestId,
      },
    };
  } catch (err) {
    if (err instanceof LockHeldError) throw new ApiError(409, 'busy', err.message);
    if (err instanceof UsageError) throw new ApiError(400, 'bad-request', err.message);
    if (err instanceof OutOfScopeError) throw err;
    if (err instanceof BatonError) {
      const [status, code] = REFUSAL_STATUS[err.code] ?? [503, 'not-run'];
      throw new ApiError(status, code, err.message);
    }
    throw err;
  }
}

/** A backfill's progress over HTTP is its audit row and the history: nothing told as it goes. */
const UNTOLD: BackfillProgress = { fire: () => {}, note: () => {} };

/**
 * POST /api/jobs/{job}/backfill: `baton backfill`'s walk (actions/backfill.ts), run by this
 * runner in the background: 202 with the fires it will look at once the range is checked; 400 for
 * a bad range or too many fires without `yes`, 409 when this runner is stopping. The runner owns
 * the walk: no fire of it starts once the runner stops, and the runner waits for it to end.
 */
export async function backfillAction(
  s: WriteSubject,
  job: string,
  body: { from: string; to: string; again?: boolean; yes?: boolean; withDependents?: boolean },
  r: Who,
): Promise<ApiAnswer> {
  await inScope(s, r, 'backfill', job);
  const definition = knownJob(s, job);
  const from = instantField('from', body.from);
  const to = instantField('to', body.to);
  if (to < from) throw new ApiError(400, 'bad-request', 'the body: to: is before from');
  const fires = usableFires(s);
  // Asked again by runBackfill, which goes on after this answer: a refusal is the answer's.
  if (body.withDependents) await authorizeChain(fires, actor(s, r), 'backfill', job);
  const request = {
    job: definition,
    from,
    to,
    again: body.again ?? false,
    yes: body.yes ?? false,
    withDependents: body.withDependents === true,
  };
  const plan = await planBackfill(fires, request).catch((err: unknown) => {
    throw err instanceof UsageError ? new ApiError(400, 'bad-request', err.message) : err;
  });
  const preview = await previewBackfill(fires, plan, UNTOLD);
  if (fires.stopping()) {
    throw new ApiError(409, 'busy', 'this runner is stopping; ask another one');
  }
  const range = { job, from: from.toISOString(), to: to.toISOString(), by: r.operator };
  void fires.track(runBackfill(fires, plan, actor(s, r), UNTOLD, () => "the runner's stop")).then(
    (result) =>
      s.log.info(
        { ...range, outcome: result.outcome, auditId: result.auditId },
        'backfill from the write API ended',
      ),
    (err: unknown) =>
      s.log.warn({ ...range, err: errorMessage(err) }, 'backfill from the write API stopped'),
  );
  return {
    status: 202,
    body: {
      job,
      from: range.from,
      to: range.to,
      fires: preview.fires,
      toRun: preview.wouldRun,
      host: s.host,
      progress: `baton audit --job ${job}; baton history ${job}`,
    },
  };
}

/** An answer that is an error: `{error: {code, message, …extra}}` with this status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export interface ApiAnswer {
  status: number;
  body: Record<string, unknown>;
}

/** Who asks, and why: the token's name and the body's reason; the token's scope, if it has one. */
export interface Who {
  operator: string;
  reason: string | null;
  scope?: ActionScope;
}

/**
 * A body's instant (`baton backfill --from`'s forms), or a 400 naming the field. The value is not
 * echoed: it is the operator's own, and the refusal is also logged.
 */
function instantField(field: 'from' | 'to' | 'fire', value: string): Date {
  try {
    return parseFireTime(value);
  } catch {
    throw new ApiError(
      400,
      'bad-request',
      `the body: ${field}: not an ISO-8601 instant; expected e.g. 2026-11-30T03:00:00Z, ` +
        '2026-11-30T04:00:00+01:00, or 2026-11-30 03:00:00.000 (UTC)',
    );
  }
}

function usablePool(s: WriteSubject): Queryable {
  const pool = s.pool();
  if (!pool) throw unavailable();
  return pool;
}

/**
 * A name the job routes may be asked for: a job's (config/schema.ts). Anything else — a glob, a
 * path, an option, another alphabet — names no job and is 404 before anything is read or written.
 */
export function possibleJobName(job: string): boolean {
  return job.length <= JOB_NAME_MAX && JOB_NAME_PATTERN.test(job);
}

/**
 * A scoped token's judgement of `action` on `job` in this runner's namespace, before the job is
 * looked up (out of scope is 403 whether the job exists or not); the action judges again itself.
 */
async function inScope(s: WriteSubject, r: Who, action: ScopeAction, job: string): Promise<void> {
  if (!r.scope) return;
  await authorize(usablePool(s), actor(s, r), { action, job, namespace: s.namespace() });
}

/** The job of that name in the runner's file, or a 404. */
function knownJob(s: WriteSubject, job: string): JobDefinition {
  const definition = s.jobs().includes(job) ? s.fires()?.job(job) : null;
  if (definition) return definition;
  if (!s.jobs().includes(job)) throw unknownJob(job);
  throw unavailable();
}

function usableFires(s: WriteSubject): OperatorFires {
  const fires = s.fires();
  if (!fires) throw unavailable();
  return fires;
}

function unavailable(): ApiError {
  return new ApiError(
    503,
    'unavailable',
    'this runner cannot reach the database (or it is read-only) right now; try again or ask ' +
      'another runner',
  );
}

function unknownJob(job: string): ApiError {
  return new ApiError(404, 'not-found', `no job "${job}" in this runner's schedules file`);
}

/** The token's name as operator, this runner as host. */
function actor(s: WriteSubject, r: Who): Actor {
  return {
    operator: r.operator,
    host: s.host,
    via: 'api',
    reason: r.reason,
    ...(r.scope ? { scope: r.scope } : {}),
  };
}

/** POST /api/jobs/{job}/pause: 200 with the pause (renewed when there was one). */
export async function pauseAction(s: WriteSubject, job: string, r: Who): Promise<ApiAnswer> {
  await inScope(s, r, 'pause', job);
  if (!s.jobs().includes(job)) throw unknownJob(job);
  const outcome = await pause(usablePool(s), s.namespace(), job, actor(s, r));
  return { status: 200, body: pauseOutcomeDocument(outcome) };
}

/** POST /api/jobs/{job}/resume: 200, `resumed: false` when it was not paused. */
export async function resumeAction(s: WriteSubject, job: string, r: Who): Promise<ApiAnswer> {
  await inScope(s, r, 'resume', job);
  const pool = usablePool(s);
  // Any pause there is can be lifted (also of a job since removed from the file), as `resume`.
  if (!s.jobs().includes(job) && !(await findPause(pool, s.namespace(), job))) {
    throw unknownJob(job);
  }
  const outcome = await resume(pool, s.namespace(), job, actor(s, r));
  return { status: 200, body: resumeOutcomeDocument(outcome) };
}

/** The grace `kill` gives a run before SIGKILL when the body names none (as `baton kill`). */
export const DEFAULT_KILL_GRACE_MS = 10_000;

/**
 * POST /api/runs/{id}/kill: the same order as `baton kill` (actions/kill.ts), given by this
 * runner for whichever runner owns the run, answered once its outcome is known: 200 killed,
 * already finished or declared lost; 202 when the owner has not acted within the grace (the
 * request stays on the row); 404 no such run (in this namespace).
 */
export async function killAction(
  s: WriteSubject,
  runId: number,
  graceMs: number,
  r: Who,
): Promise<ApiAnswer> {
  const pool = usablePool(s);
  const namespace = s.namespace();
  // The order is for this runner's namespace only: killRun reads (and changes) the run in it, so
  // another namespace's run is not found before anything is written.
  const outcome = await killRun(pool, {
    runId,
    namespace,
    operator: r.operator,
    host: s.host,
    via: 'api',
    reason: r.reason,
    ...(r.scope ? { scope: r.scope } : {}),
    graceMs,
  });
  if (outcome.kind === 'not-found') {
    throw new ApiError(404, 'not-found', `no run with id ${runId} in namespace "${namespace}"`);
  }
  return {
    status: outcome.kind === 'pending' ? 202 : 200,
    body: killOutcomeDocument(outcome, graceMs),
  };
}
