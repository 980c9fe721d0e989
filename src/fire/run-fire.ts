/**
 * One fire end to end, forward only, the same for the daemon (scheduled and catch-up fires) and
 * for `baton run` (manual ones):
 *
 *   local overlap (local-runs.ts) → a contention place → contend (coordination/fire-protocol.ts)
 *     → attempts: the job in a child process, again on failure while `retries` allow
 *     → the verdict, written while the lock is still held → release the lock (`finally`)
 *
 * The verdict is written before the release, so that a runner arriving late for the same fire
 * meets the fire key (already ran), never a free lock and no row.
 *
 * The pipeline tells what happens through its events (`events.ts`) and answers with a
 * `FireOutcome`; it calls nothing back in its caller. What the caller shares with it is passed
 * down: the runs this process has going (`LocalRuns`: the pipeline adds its run once started and
 * removes it when done, so a lost lock session can stop every one), the bound on contentions, and
 * where to keep a verdict the database cannot take yet.
 */
import type { DatabaseTarget } from '../config/database-url.js';
import { eventTargets } from '../config/event-targets.js';
import type { JobDefinition } from '../config/schema.js';
import { ClaimNotRecordedError } from '../coordination/fire-claim.js';
import { contend, type Contention } from '../coordination/fire-protocol.js';
import { ReadOnlyDatabaseError } from '../coordination/lock-session.js';
import { errorMessage } from '../errors.js';
import { plannedStart } from '../schedule/jitter.js';
import type { FireRef, NotAttemptedCause } from './events.js';
import type { FireOptions, FireOutcome } from './fire-types.js';
import { localOverlap, takesContentionPlace, type LocalRun } from './local-runs.js';
import { LOST_KILL_GRACE_MS, RunControl } from './run-control.js';
import { attemptAndRecord } from './winner-run.js';

export type { FireOptions, FireOutcome } from './fire-types.js';

/** A fire under way: `contended` settles once the run has started or the fire is over. */
export interface FireHandle {
  contended: Promise<void>;
  outcome: Promise<FireOutcome>;
}

/**
 * Starts one fire. Its contention is over when `contended` settles (a per-job chain may go on to
 * the next fire then, while the run goes on); `outcome` settles when everything is done, and
 * rejects with what baton could not do (the database failed) once the events have told it.
 */
export function startFire(job: JobDefinition, scheduledAt: Date, o: FireOptions): FireHandle {
  let contended!: () => void;
  const settled = new Promise<void>((resolve) => (contended = resolve));
  const outcome = runFire(job, scheduledAt, o, contended).finally(contended);
  return { contended: settled, outcome };
}

async function runFire(
  job: JobDefinition,
  scheduledAt: Date,
  o: FireOptions,
  contended: () => void,
): Promise<FireOutcome> {
  const fire: FireRef = { job: job.name, scheduledAt, trigger: o.trigger };
  const notAttempted = (cause: NotAttemptedCause, error?: string): FireOutcome => {
    o.events?.emit('fire:notAttempted', { fire, cause, ...(error != null ? { error } : {}) });
    return { status: 'not-attempted', cause };
  };
  const stopping = () => o.signal?.aborted === true;
  if (stopping()) return { status: 'stopped' };
  // Nobody can prove it is alone without a lock session: not running is the safe side.
  let c = o.context();
  if (!c) return notAttempted('no-session');

  const policy = o.overlap ?? 'skip';
  const { runningHere, queueUntil } = await localOverlap(job.name, policy, scheduledAt, {
    runs: o.runs,
    schedule: o.schedule ?? null,
    now: () => c!.now?.() ?? new Date(),
    ...(o.signal ? { signal: o.signal } : {}),
    ...(o.timings?.bookkeepingWaitMaxMs
      ? { bookkeepingWaitMaxMs: o.timings.bookkeepingWaitMaxMs }
      : {}),
  });
  if (stopping()) return { status: 'stopped' };
  let database: DatabaseTarget | null;
  try {
    database = o.database?.() ?? null;
  } catch (err) {
    return notAttempted('job-database', errorMessage(err));
  }
  // The place is held while the fire contends, not while its run goes on.
  const place = o.places && takesContentionPlace(policy) ? await o.places.acquire() : null;
  let placeHeld = place != null;
  const releasePlace = () => {
    if (placeHeld) place!();
    placeHeld = false;
  };
  let local: LocalRun | null = null;
  let finished!: () => void;
  const whenFinished = new Promise<void>((resolve) => (finished = resolve));
  try {
    if (stopping()) return { status: 'stopped' };
    // Taken again only now: a queued fire, or one that waited for its place, may have waited
    // across a reconnect.
    c = o.context();
    if (!c) return notAttempted('no-session');
    const ctx = c;
    // A scheduled fire of a job with jitter is meant to start after its instant: its lag and
    // staleness count from then (manual runs and catch-ups start when asked).
    const startAt =
      o.trigger === 'schedule'
        ? plannedStart(ctx.namespace, job.name, scheduledAt, job.jitterMs)
        : scheduledAt;
    const attempt = {
      namespace: ctx.namespace,
      job: job.name,
      scheduledAt,
      startAt,
      trigger: o.trigger,
      host: ctx.host,
      pid: ctx.pid,
      ...(o.rerun ? { rerun: o.rerun } : {}),
      ...(o.unlessDone ? { unlessDone: true } : {}),
      ...(o.params?.recorded ? { params: o.params.recorded } : {}),
    };
    const contendStart = performance.now();
    let claim: Contention;
    try {
      claim = await contend(ctx, attempt, {
        overlap: policy,
        runningHere,
        queueUntil,
        workers: job.workers,
        skips: job.skips,
        ...(job.notify ? { eventTargets: eventTargets(job.notify) } : {}),
        ...(o.waitSeconds != null ? { waitSeconds: o.waitSeconds } : {}),
        ...(o.pauseCheck != null ? { pauseCheck: o.pauseCheck } : {}),
        ...(o.afterLead ? { afterLead: true } : {}),
        ...(o.signal ? { signal: o.signal } : {}),
      });
    } catch (thrown) {
      // A claim not recorded carries what the backlog needs; what went wrong is its cause (a
      // command maps that to its exit code).
      const unrecorded = thrown instanceof ClaimNotRecordedError ? thrown : null;
      const err = unrecorded ? unrecorded.cause : thrown;
      if (err instanceof ReadOnlyDatabaseError) notAttempted('read-only');
      // The session died while this fire was contended: like a fire that found no session.
      else if (!ctx.lock.usable) notAttempted('session-lost', errorMessage(err));
      else {
        notAttempted('error', errorMessage(err));
        // Its lock session up, nothing else would ever record this fire: recorded `missed`
        // once the database takes it. (A lost session's fires are the look-back's, after the
        // reconnect: caught up, or missed.)
        if (unrecorded) {
          o.verdicts?.keepUnrecordedFire({
            ...unrecorded.claim,
            reason: unrecorded.reason(ctx.host),
            ...(job.notify ? { targets: eventTargets(job.notify) } : {}),
          });
        }
      }
      throw err;
    }
    const contendMs = performance.now() - contendStart;
    // A queued fire's contention includes its wait for the previous run: not a lock latency.
    const measured = policy === 'queue' ? null : contendMs;
    if (!claim.won) {
      const { runId, kind, reason } = claim;
      o.events?.emit('fire:skipped', { fire, runId, kind, reason, contendMs: measured });
      return { status: 'skipped', runId, kind, reason, contendMs };
    }

    let startedAt = 0;
    const control = new RunControl(claim.runId, scheduledAt);
    const onStarted = () => {
      local = { job: job.name, scheduledAt, control, finished: whenFinished };
      o.runs.add(local);
      startedAt = performance.now();
      const lagMs =
        o.trigger === 'schedule' ? (ctx.now?.() ?? new Date()).getTime() - startAt.getTime() : null;
      o.events?.emit('fire:won', {
        fire,
        runId: claim.runId,
        jobPid: control.pid,
        contendMs: measured,
        lagMs,
      });
      // The session may have died between GET_LOCK and now (the claim runs on the pool): whoever
      // stopped the runs of the lost session did not see this one, so it is aborted here.
      if (!ctx.lock.usable) {
        control.stop(
          `lost: the runner's lock session ended while the run was being claimed ` +
            `(${ctx.lock.lossReason ?? 'replaced'})`,
          o.timings?.lostKillGraceMs ?? LOST_KILL_GRACE_MS,
          'lost',
        );
      }
      // A fire won while a stop begins is waited for like any other run: the daemon lets
      // contention settle before it decides what to wait for and what to stop.
      releasePlace();
      contended();
    };
    let outcome: Extract<FireOutcome, { status: 'ran' }>;
    try {
      outcome = await attemptAndRecord(ctx, job, fire, claim, control, onStarted, database, o);
    } catch (err) {
      if (local)
        o.events?.emit('run:notCompleted', { fire, runId: claim.runId, error: errorMessage(err) });
      // Not started: like a contention that failed (the session may have died meanwhile).
      else notAttempted(ctx.lock.usable ? 'error' : 'session-lost', errorMessage(err));
      throw err;
    }
    const { result } = outcome;
    o.events?.emit('run:finished', {
      fire,
      runId: outcome.runId,
      status: result.status,
      exitCode: result.exitCode,
      attempts: outcome.attempts,
      error: result.error,
      durationMs: startedAt ? performance.now() - startedAt : 0,
    });
    return outcome;
  } finally {
    releasePlace();
    if (local) o.runs.delete(local);
    finished();
  }
}
