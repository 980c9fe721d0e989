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
import { formatDuration } from '../config/duration.js';
import { eventTargets } from '../config/notify-config.js';
import type { JobDefinition, OverlapPolicy } from '../config/schema.js';
import { contend, type Contention, type FireContext } from '../coordination/fire-protocol.js';
import { ReadOnlyDatabaseError } from '../coordination/lock-session.js';
import { errorMessage } from '../errors.js';
import type { FireInfo } from '../execution/job-context.js';
import { startJob, type JobResult } from '../execution/job-process.js';
import type { RunLease } from '../execution/run-lease.js';
import type { SkipKind, Trigger } from '../run-status.js';
import type { Schedule } from '../schedule/cron.js';
import { plannedStart } from '../schedule/jitter.js';
import { finishRun, recordAttempt, type RunOutcome } from '../store/run-verdicts.js';
import type { RunParams } from '../store/runs.js';
import type { FireEvents, FireRef, NotAttemptedCause } from './events.js';
import type { Limiter } from './limiter.js';
import { localOverlap, takesContentionPlace, LocalRuns, type LocalRun } from './local-runs.js';
import { KILL_GRACE_MS, LOST_KILL_GRACE_MS, RunControl } from './run-control.js';
import type { OutputSink } from '../execution/job-launch.js';
import { OutputLines } from './output-lines.js';
import type { OutputWriter } from './output-writer.js';
import type { VerdictBacklog } from './verdict-backlog.js';

export type FireOutcome =
  | { status: 'ran'; runId: number; result: JobResult; attempts: number; recorded: boolean }
  | { status: 'skipped'; runId: number | null; kind: SkipKind; reason: string; contendMs: number }
  /** Not contended, or not to the end; the `fire:notAttempted` event said why. */
  | { status: 'not-attempted'; cause: NotAttemptedCause }
  /** The runner began to stop before this fire was contended: nothing was done or recorded. */
  | { status: 'stopped' };

export interface FireOptions {
  trigger: Trigger;
  /**
   * The lock session and pool to contend with, asked for when needed (a queued fire may wait
   * across a reconnect); null while there is no usable lock session.
   */
  context: () => FireContext | null;
  /** This process's runs: read by the overlap policy, and the run is added while it goes. */
  runs: LocalRuns;
  /** The job's overlap policy; without it a fire is contended like `skip` (manual runs). */
  overlap?: OverlapPolicy;
  /** The job's schedule: a queued fire waits at most until the next fire. */
  schedule?: Schedule | null;
  /** Seconds GET_LOCK may wait (`baton run --wait`); 0 for scheduled fires. */
  waitSeconds?: number;
  /** Skip the fire when the job is paused (scheduled and catch-up fires; not manual runs). */
  pauseCheck?: boolean;
  /** The runner is stopping: no new contention, a queued fire stops waiting. */
  signal?: AbortSignal;
  /** The runner's bound on contentions at once (a queued fire takes no place). */
  places?: Limiter;
  /** Where a verdict the database cannot take is kept; without it the error is thrown. */
  verdicts?: VerdictBacklog;
  events?: FireEvents;
  /** Pass the job's output through to this process (foreground `baton run`; see job-launch.ts). */
  tee?: boolean | 'stderr';
  /**
   * The database a module job gets as `ctx.db`, resolved when the fire is about to contend (a
   * reload may have changed it); one that throws means the fire is not attempted.
   */
  database?: () => DatabaseTarget | null;
  /** Environment variables no job inherits (the connections' URLs). */
  withholdEnv?: readonly string[];
  /** The runner's lease on its runs (execution/run-lease.ts): renewed by its heartbeats. */
  lease?: RunLease;
  /** Where the runs' whole output is written as it comes; without it only the tail is kept. */
  output?: OutputWriter;
  /** Masked as `***` in the kept output and tail (config/connections.ts: outputSecrets). */
  secrets?: readonly string[];
  /** The fire's generation to claim (a re-run, trigger `rerun`); default 0. */
  rerun?: number;
  /** Claim only while no generation of the fire has a `done` run (see Attempt.unlessDone). */
  unlessDone?: boolean;
  /** Manual parameters: given to the job (`ctx.params`), and as recorded on its row (masked). */
  params?: { given: Record<string, string>; recorded: RunParams | null };
}

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
        ...(o.signal ? { signal: o.signal } : {}),
      });
    } catch (err) {
      if (err instanceof ReadOnlyDatabaseError) notAttempted('read-only');
      // The session died while this fire was contended: like a fire that found no session.
      else if (!ctx.lock.usable) notAttempted('session-lost', errorMessage(err));
      else notAttempted('error', errorMessage(err));
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
          LOST_KILL_GRACE_MS,
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

/** The winner's part: the attempts, the verdict, and the lock given back in `finally`. */
async function attemptAndRecord(
  c: FireContext,
  job: JobDefinition,
  ref: FireRef,
  claim: Extract<Contention, { won: true }>,
  control: RunControl,
  onStarted: () => void,
  database: DatabaseTarget | null,
  o: FireOptions,
): Promise<Extract<FireOutcome, { status: 'ran' }>> {
  try {
    const fire: FireInfo = {
      job: job.name,
      runId: claim.runId,
      scheduledAt: ref.scheduledAt,
      trigger: ref.trigger,
      host: c.host,
      attempt: 1,
      worker: { slot: claim.slot, count: job.workers },
      ...(o.params ? { params: o.params.given } : {}),
    };
    const { result, attempts } = await attemptRuns(c, job, fire, control, onStarted, database, o);
    // From here on the run is bookkeeping only: the next fire may wait for it (local-runs.ts).
    control.markProcessesEnded();
    const outcome: RunOutcome = {
      status: result.status,
      exitCode: result.exitCode,
      error: attempts > 1 && result.error ? `${result.error} (attempt ${attempts})` : result.error,
      outputTail: result.outputTail,
    };
    if (job.notify) {
      const scope = { namespace: c.namespace, subject: job.name, fire: ref.scheduledAt };
      outcome.notices = {
        scope: { ...scope, slot: claim.slot, rerun: o.rerun ?? 0 },
        targets: eventTargets(job.notify),
      };
    }
    // `finished_at` says when the run ended, in database time — not when the verdict reached the
    // database, which can be much later (a lost run written after reconnecting, a verdict kept
    // through a pool outage) or first by another runner.
    const endedAt = c.lock.toDatabaseTime(result.endedAt);
    if (endedAt) outcome.finishedAt = endedAt;
    // A run that reads finished has all its output in (`baton logs --follow` stops there).
    await o.output?.settle(claim.runId);
    let recorded = false;
    try {
      recorded = await finishRun(c.pool, claim.runId, outcome);
    } catch (err) {
      if (!o.verdicts) throw err;
      o.verdicts.keep(claim.runId, outcome);
      o.events?.emit('verdict:kept', { fire: ref, runId: claim.runId, status: outcome.status });
    }
    return { status: 'ran', runId: claim.runId, result, attempts, recorded };
  } catch (err) {
    // The job could not be started or its verdict not written; leave no row `running` if the
    // database still answers.
    await finishRun(c.pool, claim.runId, {
      status: 'failed',
      exitCode: null,
      error: `baton could not complete the run: ${errorMessage(err)}`,
      outputTail: null,
    }).catch(() => {});
    throw err;
  } finally {
    o.output?.forget(claim.runId);
    if (claim.lockName && c.lock.usable) await c.lock.release(claim.lockName).catch(() => {});
  }
}

/**
 * Why the job must not be started now, if it must not: its lock session is gone, so its lock
 * keeps nobody out any more. (The runs' lease is the spawner's and the watchdogs' to enforce:
 * a runner that is checking is running, and its own lateness is no news about the session.)
 */
function whyNotStart(c: FireContext): string | null {
  if (c.lock.usable) return null;
  return `the runner's lock session ended before the job was started (${c.lock.lossReason ?? 'replaced'})`;
}

function notStarted(why: string): JobResult {
  return {
    status: 'lost',
    exitCode: null,
    signal: null,
    error: `lost: not started: ${why}`,
    outputTail: '',
    endedAt: new Date(),
  };
}

/**
 * Where an attempt's output goes: the history (fire/output-writer.ts) and, with `output: {log:
 * true}`, the runner's log line by line (fire/output-lines.ts). None with `output: {max: 0}`.
 */
function outputSink(
  c: FireContext,
  job: JobDefinition,
  fire: FireInfo,
  attempt: number,
  o: FireOptions,
): OutputSink | undefined {
  if (!o.output || job.outputMaxBytes === 0) return undefined;
  const stored = o.output.sink(
    c.pool,
    { runId: fire.runId, namespace: c.namespace, attempt },
    job.outputMaxBytes,
  );
  if (!job.outputLog || !o.events) return stored;
  const events = o.events;
  const lines = new OutputLines();
  const ref: FireRef = { job: fire.job, scheduledAt: fire.scheduledAt, trigger: fire.trigger };
  return {
    maxBytes: stored.maxBytes,
    deliver(chunks, final) {
      stored.deliver(chunks, final);
      const out = [...lines.push(chunks), ...(final ? lines.end() : [])];
      if (out.length > 0)
        events.emit('run:output', { fire: ref, runId: fire.runId, attempt, lines: out });
    },
  };
}

/** Whether a result is worth another attempt: the job's own failure, not a stop by the runner. */
function retryable(result: JobResult): boolean {
  // A handler that ignored its timeout may still be going: a retry would run the fire twice.
  return !result.mayStillRun && (result.status === 'failed' || result.status === 'timeout');
}

async function attemptRuns(
  c: FireContext,
  job: JobDefinition,
  fire: FireInfo,
  control: RunControl,
  onStarted: () => void,
  database: DatabaseTarget | null,
  o: FireOptions,
): Promise<{ result: JobResult; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1) await recordAttempt(c.pool, fire.runId, attempt);
    // Checked right before each spawn, not only once the process exists: a session lost while
    // the fire was being claimed, or before a retry, starts nothing.
    const cannotStart = whyNotStart(c);
    if (cannotStart) return { result: notStarted(cannotStart), attempts: attempt };
    const run = startJob(
      job,
      { ...fire, attempt },
      {
        tee: o.tee ?? false,
        database,
        withholdEnv: o.withholdEnv ?? [],
        lease: o.lease,
        secrets: o.secrets,
        output: outputSink(c, job, fire, attempt, o),
      },
    );
    // The spawner reports the job's pid a moment later; the run is "started" with its pid known.
    await run.started;
    control.attach(run);
    if (attempt === 1) onStarted();
    // A timeout ends this attempt only (a retry may follow), so it stops the attempt directly
    // rather than through `control`, whose stop is for good.
    const timer =
      job.timeoutMs != null
        ? setTimeout(() => {
            const limit = formatDuration(job.timeoutMs!);
            void run.stop(`timeout: the run took longer than ${limit}`, KILL_GRACE_MS, 'timeout');
          }, job.timeoutMs)
        : undefined;
    let result: JobResult;
    try {
      result = await run.result;
    } finally {
      clearTimeout(timer);
    }
    if (control.stopRequested || !retryable(result) || attempt > job.retries) {
      return { result, attempts: attempt };
    }
    await control.waitBeforeRetry(job.retryDelayMs);
    if (control.stopRequested) return { result: control.stoppedResult(result), attempts: attempt };
  }
}
