/**
 * Running a job because an operator asked: now, or a past fire of its schedule again with its
 * own instant (a re-run, docs/history.md). One implementation for every surface, whichever
 * process runs the fire (fire/operator-fire.ts):
 *
 * - `baton run` (cli/commands/run.ts): its own foreground session;
 * - `POST /api/jobs/{job}/run` (http/write-actions.ts): the runner serving the API;
 * - library mode: `scheduler.runNow()` and the requests `baton run` leaves for the replicas
 *   (library/run-request-watch.ts) — the replica that runs the job is the process.
 *
 * `startRun` is the run itself: the instant (now, or the past fire checked against the schedule
 * and its generation planned from its winners), the fire through the job's lock. `runJob` is the
 * operator's action around it: the audit row first, then what came of it — `started (run N)`
 * once contended, the verdict once the run is over — so an action whose outcome never comes
 * (the process died) still shows who asked.
 */
import type { JobDefinition } from '../config/schema.js';
import { errorMessage, LockHeldError, UsageError } from '../errors.js';
import { manualInstant } from '../fire/manual-instant.js';
import type { FireOutcome } from '../fire/fire-types.js';
import type { ManualStart, OperatorFires } from '../fire/operator-fire.js';
import { recordedParams, withParams, type ManualParams } from '../fire/run-params.js';
import { recordAction, setActionOutcome } from '../store/audit.js';
import { winnersOfFire } from '../store/fire-reads.js';
import { findRun } from '../store/history-reads.js';
import { findPause, type Pause } from '../store/pauses.js';
import { currentBlackout, type Blackout } from '../store/blackouts.js';
import type { Run } from '../store/runs.js';
import type { Actor } from './pause.js';
import { authorize, scopeDetails } from './scope.js';
import { assertPastFire, ownSchedule, timingsOf } from './past-fires.js';
import { describeRun, planRerun } from './rerun-plan.js';
import { authorizeChain, operatorDependents } from './dependents.js';
import type { DependentPlan } from '../store/dependent-fires.js';

export interface RunRequest {
  /** The job as defined; `params` are applied to the run only. */
  job: JobDefinition;
  /** `--env K=V` and the arguments after `--` (fire/run-params.ts); none by default. */
  params?: ManualParams;
  /** A past fire of the schedule to run again; absent: run now. */
  fire?: Date | null;
  /** With `fire`: run it even if a generation of it is done (a new generation). */
  again?: boolean;
  /** Seconds to wait for a run of the job going on (`baton run --wait`; a runner never waits). */
  waitSeconds?: number;
  /** The job's output echoed besides its history (a foreground command's terminal). */
  tee?: boolean | 'stderr';
  /**
   * Run the job's children after it too, as its schedule's fires do (`--with-dependents`,
   * docs/dependencies.md); without it an operator's run starts no child.
   */
  withDependents?: boolean;
}

/** A run that began (or was refused by the lock): where, and what came of it when over. */
export interface RunStart {
  at: Date;
  /** The generation claimed (0 for a run now). */
  rerun: number;
  start: ManualStart;
  /** Settles when the fire is over (null: it did not run). */
  outcome: Promise<FireOutcome | null>;
  /** The children its verdict carries (`withDependents`); empty: none. */
  dependents: readonly DependentPlan[];
}

/** The past fire asked for ran successfully already, and `again` was not given. Exit 75. */
export class AlreadyRanError extends LockHeldError {
  constructor(
    job: string,
    readonly at: Date,
    readonly done: Run,
  ) {
    super(
      `${job} not run: the fire ${at.toISOString()} already ran: ${describeRun(done)}; ` +
        'add --again to run it once more',
    );
  }
}

const NO_PARAMS: ManualParams = { env: {}, args: [] };

/** Where and as which generation the request runs; AlreadyRanError, UsageError otherwise. */
interface PlannedRun {
  at: Date;
  rerun: number;
  rerunOf: Date | null;
  dependents: DependentPlan[];
}

async function planRun(fires: OperatorFires, r: RunRequest): Promise<PlannedRun> {
  // A past fire of a job that runs only after its parents is theirs (refused before any read).
  if (r.fire != null) ownSchedule(r.job);
  refusePlacedElsewhere(fires, r.job);
  const now = await fires.now();
  const children = (at: Date, reran: boolean) =>
    r.withDependents ? operatorDependents(fires, r.job, at, reran) : Promise.resolve([]);
  if (r.fire == null) {
    const at = manualInstant(now);
    return { at, rerun: 0, rerunOf: null, dependents: await children(at, false) };
  }
  // A past fire is the fleet's: by the timing version in force at it, whichever file is here.
  const at = assertPastFire(r.job, r.fire, now, await timingsOf(fires, r.job.name));
  const winners = await winnersOfFire(fires.pool, fires.namespace, r.job.name, at);
  const plan = planRerun(winners, r.again === true);
  if (plan.kind === 'refuse') throw new AlreadyRanError(r.job.name, at, plan.done);
  return { at, rerun: plan.rerun, rerunOf: at, dependents: await children(at, true) };
}

function fire(fires: OperatorFires, r: RunRequest, planned: PlannedRun) {
  const params = r.params ?? NO_PARAMS;
  const recorded = recordedParams(r.job, params);
  return fires.fire({
    job: withParams(r.job, params),
    at: planned.at,
    trigger: planned.rerunOf ? 'rerun' : 'manual',
    rerun: planned.rerun,
    unlessDone: planned.rerunOf != null && r.again !== true,
    // Parameters only where some were given: a plain manual run's row records none.
    ...(recorded ? { params: { given: params.env, recorded } } : {}),
    waitSeconds: r.waitSeconds ?? 0,
    ...(r.tee != null ? { tee: r.tee } : {}),
    ...(planned.dependents.length > 0 ? { dependents: planned.dependents } : {}),
  });
}

/**
 * The generation the run claimed: the planned one, but for `--again`, whose claim takes the next
 * free generation under the job's lock (another operator's re-run may have taken the planned one).
 */
async function claimedGeneration(
  fires: OperatorFires,
  r: RunRequest,
  planned: PlannedRun,
  start: ManualStart,
): Promise<number> {
  if (r.again !== true || planned.rerunOf == null || start.status !== 'started') {
    return planned.rerun;
  }
  const row = await findRun(fires.pool, start.runId).catch(() => null);
  return row?.rerun ?? planned.rerun;
}

/** Runs the request in `fires`' process, without an audit row (see the header). */
export async function startRun(fires: OperatorFires, r: RunRequest): Promise<RunStart> {
  const planned = await planRun(fires, r);
  const handle = fire(fires, r, planned);
  const start = await handle.started;
  return {
    at: planned.at,
    rerun: await claimedGeneration(fires, r, planned, start),
    start,
    outcome: handle.outcome,
    dependents: planned.dependents,
  };
}

/** An operator's run: `startRun` with its audit row (see the header). */
export interface RunAction extends RunStart {
  auditId: number;
  /** The job's pause the run went ahead despite (a pause stops the schedule, not an operator). */
  pause: Pause | null;
  /** A blackout of the job going on, which the run went ahead despite (likewise). */
  blackout: Blackout | null;
}

export async function runJob(
  fires: OperatorFires,
  r: RunRequest,
  actor: Actor,
  hooks: { paused?: (pause: Pause) => void; blackedOut?: (blackout: Blackout) => void } = {},
): Promise<RunAction> {
  const { pool, namespace } = fires;
  const job = r.job.name;
  // A past fire again is a re-run, which a scope grants apart from a run now.
  const action = r.fire != null ? 'rerun' : 'run';
  await authorize(pool, actor, { action, job, namespace, fire: r.fire ?? null });
  if (r.withDependents) await authorizeChain(fires, actor, action, job);
  const pause = await findPause(pool, namespace, job).catch(() => null);
  if (pause) hooks.paused?.(pause);
  const blackout = await currentBlackout(pool, namespace, job).catch(() => null);
  if (blackout) hooks.blackedOut?.(blackout);
  const recorded = recordedParams(r.job, r.params ?? NO_PARAMS);
  const audit = { namespace, job, ...actor };
  let planned;
  try {
    planned = await planRun(fires, r);
  } catch (err) {
    if (err instanceof AlreadyRanError) {
      await recordAction(pool, {
        ...audit,
        action: 'rerun',
        fire: err.at,
        runId: err.done.id,
        details: {
          again: false,
          ...(recorded ? { params: recorded } : {}),
          ...scopeDetails(actor),
        },
        outcome: `refused: already ran (${describeRun(err.done)})`,
      });
    }
    throw err;
  }
  const auditId = await recordAction(pool, {
    ...audit,
    action: planned.rerunOf ? 'rerun' : 'run',
    fire: planned.rerunOf,
    details: {
      ...(planned.rerunOf ? { again: r.again === true, rerun: planned.rerun } : {}),
      ...(recorded ? { params: recorded } : {}),
      ...(r.withDependents ? { withDependents: planned.dependents.map((d) => d.job) } : {}),
      ...scopeDetails(actor),
    },
  });
  const handle = fire(fires, r, planned);
  // The outcome is added in two steps: once contended (`started (run N)`, or why not), then the
  // verdict when the run is over. A failed audit write never stops the run: the run is the
  // action, its audit is said as well as the database lets.
  const say = (text: string, runId: number | null = null) =>
    setActionOutcome(pool, auditId, text, runId).catch(() => {});
  const startSaid = handle.started.then(
    (start) =>
      start.status === 'started'
        ? say(`started (run ${start.runId})`, start.runId)
        : say(`not run: ${start.reason}`, start.status === 'busy' ? start.runId : null),
    (err: unknown) => say(`not run: ${errorMessage(err)}`),
  );
  // Tracked from the fire on: the process keeps its pool open until the verdict is written,
  // however short the run and whatever the surface does meanwhile.
  void fires.track(
    startSaid.then(async () => {
      const start = await handle.started.catch(() => null);
      if (start?.status !== 'started') return;
      const over = await handle.outcome.then(outcomeText, (err: unknown) => {
        return `not run: ${errorMessage(err)}`;
      });
      await say(over, start.runId);
    }),
  );
  await startSaid;
  const start = await handle.started;
  return {
    auditId,
    pause,
    blackout,
    at: planned.at,
    rerun: await claimedGeneration(fires, r, planned, start),
    start,
    outcome: handle.outcome,
    dependents: planned.dependents,
  };
}

/** The audit's outcome of a run that started: its status, or why it has none. */
function outcomeText(over: FireOutcome | null): string {
  if (over?.status === 'ran') return over.result.status;
  if (over?.status === 'skipped') return `not run: ${over.reason}`;
  return over?.status === 'not-attempted' ? `not run: ${over.cause}` : 'not run';
}

/**
 * Refuses (UsageError, nothing written) to run `job` in `fires`' process when its `runOn` places
 * it elsewhere (config/placement.ts): an SFTP job must not run on a host without the mount.
 */
export function refusePlacedElsewhere(fires: OperatorFires, job: JobDefinition): void {
  const why = fires.whyNotHere(job);
  if (why == null) return;
  throw new UsageError(
    `${job.name} may not run on ${fires.host} (${why}): run it on a runner that may ` +
      '(baton run --on-host, or the write API of such a runner)',
  );
}
