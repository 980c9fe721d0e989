/**
 * The winner's part of a fire (run-fire.ts has the whole): the job's attempts — each in its own
 * process, checked right before it starts that the lock session still vouches for it (and, for
 * an operator's foreground fire, that no Ctrl-C came while the lock was taken), again on
 * failure while `retries` allow — then the verdict, written while the job's lock is still held,
 * and the lock given back in `finally`.
 */
import type { DatabaseTarget } from '../config/database-url.js';
import { formatDuration } from '../config/duration.js';
import { eventTargets } from '../config/event-targets.js';
import type { JobDefinition } from '../config/schema.js';
import type { Contention, FireContext } from '../coordination/fire-protocol.js';
import { errorMessage } from '../errors.js';
import type { FireInfo } from '../execution/job-context.js';
import type { OutputSink } from '../execution/job-launch.js';
import { startJob, type JobResult } from '../execution/job-process.js';
import { finishRun, recordAttempt, type RunOutcome } from '../store/run-verdicts.js';
import type { FireRef } from './events.js';
import type { FireOptions, FireOutcome } from './fire-types.js';
import { OutputLines } from './output-lines.js';
import { KILL_GRACE_MS, type RunControl } from './run-control.js';

/** The winner's part: the attempts, the verdict, and the lock given back in `finally`. */
export async function attemptAndRecord(
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
 * Why the job must not be started now, if it must not, as the run's result: its lock session is
 * gone, so its lock keeps nobody out any more (`lost`); or, before the first attempt, the fire's
 * owner was asked to stop while the lock was being taken (`interrupted`: interruptBeforeStart).
 * (The runs' lease is the spawner's and the watchdogs' to enforce: a runner that is checking is
 * running, and its own lateness is no news about the session.)
 */
function whyNotStart(c: FireContext, o: FireOptions, attempt: number): JobResult | null {
  if (!c.lock.usable) {
    const why = `the runner's lock session ended before the job was started (${c.lock.lossReason ?? 'replaced'})`;
    return notStarted('lost', why);
  }
  const interrupted = attempt === 1 ? (o.interruptBeforeStart?.() ?? null) : null;
  return interrupted ? notStarted('interrupted', interrupted) : null;
}

function notStarted(status: 'lost' | 'interrupted', why: string): JobResult {
  return {
    status,
    exitCode: null,
    signal: null,
    error: `${status}: not started: ${why}`,
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
  const killGraceMs = o.timings?.killGraceMs ?? KILL_GRACE_MS;
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1) await recordAttempt(c.pool, fire.runId, attempt);
    // Checked right before each spawn, not only once the process exists: a session lost while
    // the fire was being claimed, or before a retry, starts nothing.
    const cannotStart = whyNotStart(c, o, attempt);
    if (cannotStart) return { result: cannotStart, attempts: attempt };
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
        launchers: o.launchers,
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
            void run.stop(`timeout: the run took longer than ${limit}`, killGraceMs, 'timeout');
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
