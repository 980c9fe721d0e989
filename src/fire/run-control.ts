/**
 * A handle on one run of a fire while it goes on, and how long a stopped run gets to go.
 */
import type { JobResult, RunningJob, StopStatus } from '../execution/job-process.js';

/** SIGTERM → SIGKILL delay when a run is stopped (timeout, shutdown, Ctrl-C of `baton run`). */
export const KILL_GRACE_MS = 5_000;
/**
 * A run whose lock session is gone gets this long after SIGTERM: its lock no longer keeps the
 * others out, and someone else may be starting the job (docs/design.md bounds the overlap).
 */
export const LOST_KILL_GRACE_MS = 1_000;
/** How often a process with runs looks for `baton kill` requests on them (fire/kill-watch.ts). */
export const KILL_WATCH_MS = 1_000;

/**
 * A handle on a run that may span several attempts: stopping it stops the current attempt and
 * every retry that would have followed.
 */
export class RunControl {
  private current: RunningJob | null = null;
  private request: { why: string; graceMs: number; status: StopStatus } | null = null;
  private wakeRetry: (() => void) | null = null;
  private over = false;

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

  /**
   * The last attempt's process has ended (no retry follows): what is left of the run is its
   * bookkeeping — the verdict being written, the lock given back. Nothing of the job runs.
   */
  get processesEnded(): boolean {
    return this.over;
  }

  /** @internal run-fire's side: no attempt of the run is going on or will start. */
  markProcessesEnded(): void {
    this.over = true;
  }

  /**
   * Stops the run: the first request decides the status (`timeout`, `lost`, `interrupted`,
   * `killed`).
   */
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

  /** @internal Sleeps between attempts (`retryDelay`); a stop request ends the sleep. */
  waitBeforeRetry(ms: number): Promise<void> {
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
