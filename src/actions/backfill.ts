/**
 * A backfill: every fire of a job's schedule in [from, to], oldest first, one at a time, each as
 * a re-run of that fire would run it — its own instant, the job's lock, a fire-key claim
 * (docs/history.md, "Re-runs"). One implementation for every surface, whichever process runs the
 * fires (fire/operator-fire.ts): `baton backfill` (cli/commands/backfill.ts) in its own
 * foreground session, `POST /api/jobs/{job}/backfill` (http/write-actions.ts) in the runner that
 * received it, which owns the walk: it stops with the runner, and the runner's stop waits for it.
 *
 * Which fires run: by default (only missing) those without a `done` run in any generation, so a
 * backfill never runs a fire twice, and the history itself is its progress record — a backfill
 * started again after an interruption skips what the first one did. `again` runs every fire as a
 * new generation; its progress is the audit row of the backfill (`details.lastFire`), and a
 * backfill `again` of the same range started after one that did not complete resumes after that
 * fire.
 *
 * A stop of the process (Ctrl-C, the runner's stop) lets the fire that is running finish (or the
 * process stops it, as it stops any run) and starts no further fire. A fire whose job is running
 * elsewhere (a scheduled run holds the lock) is tried again for up to BLOCKED_MS, then the
 * backfill stops (`blocked`).
 */
import type { JobDefinition } from '../config/schema.js';
import { errorMessage, InterruptedError, UsageError } from '../errors.js';
import { delay } from '../delay.js';
import type { OperatorFires } from '../fire/operator-fire.js';
import { listActions, recordAction, setActionDetails, setActionOutcome } from '../store/audit.js';
import type { Queryable } from '../store/deadline.js';
import { winnersOfFire, winnersOfJobBetween } from '../store/fire-reads.js';
import type { Run } from '../store/runs.js';
import type { Actor } from './pause.js';
import { authorize, scopeDetails } from './scope.js';
import { firesBetweenYielding, ownSchedule, timingsOf } from './past-fires.js';
import { describePlan, describeRun, planRerun } from './rerun-plan.js';
import { authorizeChain, awaitChain, operatorDependents, type ChainStep } from './dependents.js';
import { refusePlacedElsewhere } from './run.js';

/** More fires than this need `yes`. */
export const BACKFILL_BOUND = 100;
/** Never more than this many fires in one backfill, `yes` or not. */
const BACKFILL_MAX = 100_000;
/** A refusal over the bound counts the range's fires up to this many (croner: ~100 µs a fire). */
const COUNT_MAX = 10_000;
/** How long one fire may find its job running elsewhere before the backfill gives up. */
const BLOCKED_MS = 60_000;
const RETRY_MS = 250;
/**
 * GET_LOCK's wait per try in a foreground session: short, because the session's heartbeat waits
 * behind it (a runner never waits: fire/operator-fire.ts).
 */
const LOCK_WAIT_SECONDS = 1;

export interface BackfillRequest {
  job: JobDefinition;
  from: Date;
  to: Date;
  /** Run every fire as a new generation (not only those without a `done` run). */
  again: boolean;
  /** Go ahead with more than BACKFILL_BOUND fires. */
  yes: boolean;
  /**
   * Run each fire's children after it (`--with-dependents`, docs/dependencies.md), the chain of
   * an instant over before the next instant's parent starts.
   */
  withDependents?: boolean;
}

/** The fires a backfill looks at, checked: `planBackfill`. */
export interface BackfillPlan extends BackfillRequest {
  fires: readonly Date[];
  /** The fire the interrupted `again` backfill of the same range got to; null: from the start. */
  resumeAfter: Date | null;
}

/** One line of a backfill's progress: a fire and what was (or would be) done with it. */
export interface FireLine {
  fire: string;
  /** 1-based place of the fire in the range. */
  index: number;
  of: number;
  /** `run`: it was run (see `status`); `skip`: it was left alone (see `reason`); `plan`: a dry run's. */
  action: 'run' | 'skip' | 'plan';
  rerun?: number;
  runId?: number | null;
  status?: string;
  reason?: string;
  /** With `withDependents`: what each child (and theirs) did with the fire, in order. */
  dependents?: ChainStep[];
}

/** Where a backfill tells what it does (the CLI's bar or JSON lines; nothing for the API). */
export interface BackfillProgress {
  fire(line: FireLine): void;
  note(text: string): void;
}

/**
 * The request's fires, checked against the database's clock and the bound; a UsageError naming
 * what is wrong otherwise (nothing is written).
 */
export async function planBackfill(
  fires: OperatorFires,
  r: BackfillRequest,
): Promise<BackfillPlan> {
  const { job, from, to } = r;
  // A job that runs only after its parents has no fires of its own to walk: backfill a parent.
  const schedule = ownSchedule(job);
  refusePlacedElsewhere(fires, job);
  if (to < from) {
    throw new UsageError(`to (${to.toISOString()}) is before from (${from.toISOString()})`);
  }
  const now = await fires.now();
  if (to > now) {
    throw new UsageError(
      `--to ${to.toISOString()} has not come yet (the database's clock says ` +
        `${now.toISOString()}): a backfill runs past fires; the schedule runs the rest`,
    );
  }
  // Listed with turns of the event loop between (a runner serving the write API goes on), and
  // never further than the bound needs: a range of years is not walked to be refused.
  // The fleet's fires: by the timing version in force at each instant, whichever file is here.
  const timings = await timingsOf(fires, job.name);
  const list = await firesBetweenYielding(
    job,
    from,
    to,
    r.yes ? BACKFILL_MAX : BACKFILL_BOUND,
    timings,
  );
  if (list.length === 0) {
    throw new UsageError(
      `${job.name} ("${schedule}", ${job.timezone}) has no fire in ` +
        `[${from.toISOString()}, ${to.toISOString()}]`,
    );
  }
  if (list.length > BACKFILL_MAX) {
    throw new UsageError(`the range has more than ${BACKFILL_MAX} fires of ${job.name}: split it`);
  }
  if (!r.yes && list.length > BACKFILL_BOUND) {
    // The count, for the operator to judge, as far as it is cheap to take.
    const n = (await firesBetweenYielding(job, from, to, COUNT_MAX, timings)).length;
    throw new UsageError(
      `the range has ${n > COUNT_MAX ? `more than ${COUNT_MAX}` : n} fires of ${job.name}, ` +
        `more than ${BACKFILL_BOUND}: add --yes to run them all (at most ${BACKFILL_MAX} in one ` +
        'backfill)',
    );
  }
  const resumeAfter = r.again
    ? await interruptedAgain(fires.pool, fires.namespace, job.name, rangeOf(r))
    : null;
  return { ...r, fires: list, resumeAfter };
}

/** What the plan would do to each fire (a dry run), told as `plan` lines; the count to run. */
export async function previewBackfill(
  fires: OperatorFires,
  plan: BackfillPlan,
  progress: BackfillProgress,
): Promise<{ fires: number; wouldRun: number }> {
  const winners = await winnersOfJobBetween(
    fires.pool,
    fires.namespace,
    plan.job.name,
    plan.from,
    plan.to,
  );
  const byFire = new Map<number, Run[]>();
  for (const w of winners.sort((a, b) => a.rerun - b.rerun || a.id - b.id)) {
    const key = w.scheduledAt.getTime();
    byFire.set(key, [...(byFire.get(key) ?? []), w]);
  }
  let wouldRun = 0;
  plan.fires.forEach((at, i) => {
    const line = {
      fire: at.toISOString(),
      index: i + 1,
      of: plan.fires.length,
      action: 'plan' as const,
    };
    if (plan.resumeAfter && at <= plan.resumeAfter) {
      progress.fire({ ...line, reason: 'skip: run by the interrupted backfill' });
      return;
    }
    const rerun = planRerun(byFire.get(at.getTime()) ?? [], plan.again);
    if (rerun.kind === 'run') wouldRun++;
    progress.fire({
      ...line,
      ...(rerun.kind === 'run' ? { rerun: rerun.rerun } : {}),
      reason: describePlan(rerun),
    });
  });
  return { fires: plan.fires.length, wouldRun };
}

/** How a backfill ended. */
export interface BackfillResult {
  /**
   * `completed`: every fire was looked at (some runs may have failed: `counts.failed`);
   * `interrupted`: the process began to stop; `blocked`: a fire's job stayed busy BLOCKED_MS.
   */
  ended: 'completed' | 'interrupted' | 'blocked';
  /** The outcome in words, as the audit row has it. */
  outcome: string;
  counts: { ran: number; failed: number; skipped: number };
  fires: number;
  auditId: number;
}

class BlockedError extends Error {}

/**
 * Runs the plan, recorded in the audit as it goes (a `backfill` row, its details the progress;
 * a `rerun` row per fire run). Rejects with what baton could not do (the database failed), its
 * outcome recorded first when the database still takes it.
 */
export async function runBackfill(
  fires: OperatorFires,
  plan: BackfillPlan,
  actor: Actor,
  progress: BackfillProgress,
  /** Why the process is stopping (a signal's name); asked once a fire was cut short by it. */
  stopCause: () => string = () => 'the stop of the process that ran it',
): Promise<BackfillResult> {
  const { pool } = fires;
  const { job, again, resumeAfter } = plan;
  await authorize(pool, actor, { action: 'backfill', job: job.name, namespace: fires.namespace });
  if (plan.withDependents) await authorizeChain(fires, actor, 'backfill', job.name);
  const details: Record<string, unknown> = {
    ...rangeOf(plan),
    mode: again ? 'again' : 'only-missing',
    ...(plan.withDependents ? { withDependents: true } : {}),
    fires: plan.fires.length,
    lastFire: resumeAfter?.toISOString() ?? null,
    ...(resumeAfter ? { resumedAfter: resumeAfter.toISOString() } : {}),
    finished: false,
    ...scopeDetails(actor),
  };
  const audit = { namespace: fires.namespace, job: job.name, ...actor };
  const auditId = await recordAction(pool, { ...audit, action: 'backfill', details });
  if (resumeAfter)
    progress.note(`resuming the --again backfill after ${resumeAfter.toISOString()}`);
  const counts = { ran: 0, failed: 0, skipped: 0 };
  let ended: BackfillResult['ended'] = 'completed';
  let outcome = 'completed';
  try {
    for (let i = 0; i < plan.fires.length; i++) {
      const at = plan.fires[i]!;
      const line = { fire: at.toISOString(), index: i + 1, of: plan.fires.length };
      if (fires.stopping()) throw new InterruptedError('interrupted');
      if (resumeAfter && at <= resumeAfter) {
        counts.skipped++;
        progress.fire({ ...line, action: 'skip', reason: 'run by the interrupted backfill' });
        continue;
      }
      // Recorded once the run has ended, with its outcome, as a re-run of the fire says it.
      const result = await backfillOne(fires, plan, at, (runId, status) =>
        recordAction(pool, {
          ...audit,
          action: 'rerun',
          fire: at,
          runId,
          details: { backfill: auditId, again, ...scopeDetails(actor) },
          outcome: status,
        }),
      );
      progress.fire({ ...line, ...result });
      if (result.action === 'skip') counts.skipped++;
      else if (result.status === 'done') counts.ran++;
      else counts.failed++;
      details.lastFire = at.toISOString();
      await setActionDetails(pool, auditId, details);
    }
    details.finished = true;
  } catch (err) {
    if (err instanceof InterruptedError) {
      ended = 'interrupted';
      outcome = `interrupted by ${stopCause()}`;
    } else if (err instanceof BlockedError) {
      ended = 'blocked';
      outcome = `stopped: ${err.message}`;
    } else {
      await setActionOutcome(pool, auditId, `stopped: ${errorMessage(err)}`).catch(() => {});
      throw err;
    }
  }
  const said = `${outcome}: ${counts.ran} run, ${counts.failed} failed, ${counts.skipped} skipped`;
  await setActionDetails(pool, auditId, details);
  await setActionOutcome(pool, auditId, said);
  return { ended, outcome, counts, fires: plan.fires.length, auditId };
}

type OneFire = Pick<FireLine, 'action' | 'rerun' | 'runId' | 'status' | 'reason' | 'dependents'>;

/**
 * One fire: planned from its winners, run through the lock, tried again while the job runs
 * elsewhere; a fire that turns out done meanwhile (a claim refused by `unlessDone`) is planned
 * again and skipped.
 */
async function backfillOne(
  fires: OperatorFires,
  { job, again, withDependents }: BackfillPlan,
  at: Date,
  audit: (runId: number, status: string) => Promise<number>,
): Promise<OneFire> {
  const blockedUntil = Date.now() + BLOCKED_MS;
  for (;;) {
    const tryStarted = Date.now();
    const winners = await winnersOfFire(fires.pool, fires.namespace, job.name, at);
    const plan = planRerun(winners, again);
    if (plan.kind === 'refuse') {
      return {
        action: 'skip',
        runId: plan.done.id,
        reason: `already ran (${describeRun(plan.done)})`,
      };
    }
    const dependents = withDependents ? await operatorDependents(fires, job, at, true) : [];
    const outcome = await fires.fire({
      job,
      at,
      trigger: 'rerun',
      rerun: plan.rerun,
      unlessDone: !again,
      waitSeconds: LOCK_WAIT_SECONDS,
      tee: false,
      ...(dependents.length > 0 ? { dependents } : {}),
    }).outcome;
    if (outcome?.status === 'ran') {
      await audit(outcome.runId, outcome.result.status);
      // The instant's chain is over before the next instant's parent starts.
      const chain =
        dependents.length > 0 && outcome.recorded
          ? await awaitChain(fires, job.name, at, outcome.dependents ?? dependents)
          : null;
      return {
        action: 'run',
        rerun: plan.rerun,
        runId: outcome.runId,
        status: outcome.result.status,
        ...(chain ? { dependents: chain } : {}),
      };
    }
    if (fires.stopping()) throw new InterruptedError('interrupted');
    if (outcome == null) {
      throw new Error(
        `${job.name} not run: the fire could not be contended (the database failed, or the ` +
          "lock session was lost: the runner's log says which)",
      );
    }
    if (outcome.status !== 'skipped') throw new Error(`${job.name} not run (${outcome.status})`);
    if (outcome.kind === 'already-ran') continue;
    if (Date.now() > blockedUntil) {
      throw new BlockedError(
        `the fire ${at.toISOString()} could not be run for ${BLOCKED_MS / 1000} s: ${outcome.reason}`,
      );
    }
    // A try a second at most, whether the process waited on the lock (a foreground session)
    // or was refused at once (a runner never waits): each refusal is a skip row in the history.
    await delay(Math.max(RETRY_MS, LOCK_WAIT_SECONDS * 1000 - (Date.now() - tryStarted)));
  }
}

function rangeOf(r: { from: Date; to: Date }): { from: string; to: string } {
  return { from: r.from.toISOString(), to: r.to.toISOString() };
}

/**
 * The last fire done by the newest `again` backfill of the same job and range, when that one did
 * not finish (interrupted, stopped): the fire to resume after. Null to start at the range's
 * beginning.
 */
async function interruptedAgain(
  db: Queryable,
  namespace: string,
  job: string,
  range: { from: string; to: string },
): Promise<Date | null> {
  const actions = await listActions(db, { namespace, jobs: [job], limit: 200 });
  const last = actions.find(
    (a) =>
      a.action === 'backfill' &&
      a.details?.mode === 'again' &&
      a.details.from === range.from &&
      a.details.to === range.to,
  );
  if (!last || last.details?.finished === true || typeof last.details?.lastFire !== 'string') {
    return null;
  }
  return new Date(last.details.lastFire);
}
