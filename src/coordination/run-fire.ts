/**
 * One fire end to end, shared by the daemon (scheduled fires) and `baton run` (manual ones):
 * contend (fire-protocol.ts) → run the job in a child process → write the verdict → release the
 * lock in `finally`. The verdict is written before the release, so that a runner arriving late for
 * the same fire meets the fire key (already ran), never a free lock and no row.
 */
import type { JobDefinition } from '../config/schema.js';
import { errorMessage } from '../errors.js';
import type { FireInfo } from '../execution/job-context.js';
import { startJob, type JobResult, type RunningJob } from '../execution/job-process.js';
import { finishRun, type Trigger } from '../store/runs.js';
import { contend, type ContendOptions, type Coordinator } from './fire-protocol.js';

export type FireOutcome =
  | { ran: true; runId: number; result: JobResult; recorded: boolean }
  | { ran: false; runId: number; reason: string };

export interface RunFireOptions extends ContendOptions {
  trigger: Trigger;
  /** Pass the job's output through to this process (foreground `baton run`). */
  tee?: boolean;
  /** Called once the job's process has started, with a handle to stop it. */
  onStart?: (run: RunningJob, fire: FireInfo) => void;
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
  const claim = await contend(c, attempt, options);
  if (!claim.won) return { ran: false, runId: claim.runId, reason: claim.reason };

  try {
    const fire: FireInfo = {
      job: job.name,
      runId: claim.runId,
      scheduledAt,
      trigger: options.trigger,
      host: c.host,
    };
    const run = startJob(job, fire, { tee: options.tee ?? false });
    options.onStart?.(run, fire);
    const result = await run.result;
    const recorded = await finishRun(c.pool, claim.runId, {
      status: result.status,
      exitCode: result.exitCode,
      error: result.error,
      outputTail: result.outputTail,
    });
    return { ran: true, runId: claim.runId, result, recorded };
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
    await c.lock.release(claim.lockName).catch(() => {});
  }
}
