/**
 * One fire end to end, shared by the daemon (scheduled and catch-up fires) and `baton run`
 * (manual ones): contend (fire-protocol.ts) → run the job in a child process, again on failure
 * while `retries` allow → write the verdict → release the lock in `finally`. The verdict is
 * written before the release, so that a runner arriving late for the same fire meets the fire key
 * (already ran), never a free lock and no row.
 */
import type { JobDefinition } from '../config/schema.js';
import { formatDuration } from '../config/duration.js';
import { errorMessage } from '../errors.js';
import type { FireInfo } from '../execution/job-context.js';
import {
  startJob,
  type JobResult,
  type RunningJob,
  type StopStatus,
} from '../execution/job-process.js';
import type { DatabaseTarget } from '../config/database-url.js';
import type { Trigger } from '../run-status.js';
import { finishRun, recordAttempt, type RunOutcome } from '../store/run-verdicts.js';
import { contend, type ContendOptions, type Coordinator } from '../coordination/fire-protocol.js';

/** SIGTERM → SIGKILL delay when a run is stopped (timeout, shutdown). */
export const KILL_GRACE_MS = 5_000;

export type FireOutcome =
  | { ran: true; runId: number; result: JobResult; attempts: number; recorded: boolean }
  | { ran: false; runId: number; reason: string; contendMs: number };

export interface RunFireOptions extends ContendOptions {
  trigger: Trigger;
  /** Pass the job's output through to this process (foreground `baton run`). */
  tee?: boolean;
  /** The database a module job gets as `ctx.db`. */
  database?: DatabaseTarget | null;
  /** Environment variables no job inherits (the connections' URLs). */
  withholdEnv?: readonly string[];
  /**
   * Called once the run has won and its first attempt has started; `contendMs` is how long
   * winning took (lock, fire key, and the reads that go with them).
   */
  onStart?: (control: RunControl, fire: FireInfo, contendMs: number) => void;
  /**
   * A verdict that could not be written (the database is gone): the caller keeps it and writes
   * it when the database answers again. Without it, the error is thrown.
   */
  onUnwrittenVerdict?: (runId: number, outcome: RunOutcome) => void;
}

/**
 * A handle on a run that may span several attempts: stopping it stops the current attempt and
 * every retry that would have followed.
 */
export class RunControl {
  private current: RunningJob | null = null;
  private request: { why: string; graceMs: number; status: StopStatus } | null = null;
  private wakeRetry: (() => void) | null = null;

  constructor(
    readonly runId: number,
    readonly scheduledAt: Date,
  ) {}

  get pid(): number | undefined {
    return this.current?.pid;
  }

  get stopRequested(): boolean {
    return this.request != null;
  }

  /** Stops the run: the first request decides the status (`timeout`, `lost`, `interrupted`). */
  stop(why: string, graceMs: number, status: StopStatus): void {
    this.request ??= { why, graceMs, status };
    void this.current?.stop(why, graceMs, status);
    this.wakeRetry?.();
  }

  /** @internal run-fire's side: the attempt now running. */
  attach(run: RunningJob): void {
    this.current = run;
    if (this.request) void run.stop(this.request.why, this.request.graceMs, this.request.status);
  }

  /** @internal Sleeps between attempts; a stop request ends the sleep. */
  pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeRetry = done;
    }).finally(() => (this.wakeRetry = null));
  }

  /** The stop request as a result, when the run is stopped between two attempts. */
  stoppedResult(last: JobResult): JobResult {
    if (!this.request) return last;
    return { ...last, status: this.request.status, error: this.request.why };
  }
}

export async function runFire(
  c: Coordinator,
  job: JobDefinition,
  scheduledAt: Date,
  options: RunFireOptions,
): Promise<FireOutcome> {
  const attempt = {
    namespace: c.namespace,
    job: job.name,
    scheduledAt,
    trigger: options.trigger,
    host: c.host,
    pid: c.pid,
  };
  const contendStart = performance.now();
  const claim = await contend(c, attempt, { ...options, workers: job.workers });
  const contendMs = performance.now() - contendStart;
  if (!claim.won) return { ran: false, runId: claim.runId, reason: claim.reason, contendMs };

  try {
    const fire: FireInfo = {
      job: job.name,
      runId: claim.runId,
      scheduledAt,
      trigger: options.trigger,
      host: c.host,
      attempt: 1,
      worker: { slot: claim.slot, count: job.workers },
    };
    const control = new RunControl(claim.runId, scheduledAt);
    const { result, attempts } = await attemptRuns(c, job, fire, control, contendMs, options);
    const outcome: RunOutcome = {
      status: result.status,
      exitCode: result.exitCode,
      error: attempts > 1 && result.error ? `${result.error} (attempt ${attempts})` : result.error,
      outputTail: result.outputTail,
    };
    // `finished_at` says when the run ended, in database time — not when the verdict reached the
    // database, which can be much later (a lost run written after reconnecting, a verdict kept
    // through a pool outage) or first by another runner.
    const endedAt = c.lock.toDatabaseTime(result.endedAt);
    if (endedAt) outcome.finishedAt = endedAt;
    let recorded = false;
    try {
      recorded = await finishRun(c.pool, claim.runId, outcome);
    } catch (err) {
      if (!options.onUnwrittenVerdict) throw err;
      options.onUnwrittenVerdict(claim.runId, outcome);
    }
    return { ran: true, runId: claim.runId, result, attempts, recorded };
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
    if (claim.lockName && c.lock.usable) await c.lock.release(claim.lockName).catch(() => {});
  }
}

/** Whether a result is worth another attempt: the job's own failure, not a stop by the runner. */
function retryable(result: JobResult): boolean {
  return result.status === 'failed' || result.status === 'timeout';
}

async function attemptRuns(
  c: Coordinator,
  job: JobDefinition,
  fire: FireInfo,
  control: RunControl,
  contendMs: number,
  options: RunFireOptions,
): Promise<{ result: JobResult; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1) await recordAttempt(c.pool, fire.runId, attempt);
    const run = startJob(
      job,
      { ...fire, attempt },
      {
        tee: options.tee ?? false,
        database: options.database ?? null,
        withholdEnv: options.withholdEnv ?? [],
      },
    );
    // The spawner reports the job's pid a moment later; the run is "started" with its pid known.
    await run.started;
    control.attach(run);
    if (attempt === 1) options.onStart?.(control, fire, contendMs);
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
    await control.pause(job.retryDelayMs);
    if (control.stopRequested) return { result: control.stoppedResult(result), attempts: attempt };
  }
}
