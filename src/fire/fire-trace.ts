/**
 * What the fire pipeline tells a tracer (issue 42): one span per runner's attempt at a fire, the
 * winner's run and its parts. Nothing here loads OpenTelemetry: the pipeline sees this interface
 * only, and its implementation (daemon/otel-tracer.ts) is imported only when tracing is
 * configured. The fire's ids, the same on every runner, are ../trace-context.ts's.
 */
import type { FinalStatus, MissedKind, SkipKind, Trigger } from '../run-status.js';
import type { FireKey, TraceContext } from '../trace-context.js';
import type { NotAttemptedCause } from './fire-events.js';

/** The tracer the pipeline is given (FireOptions.tracer): one `attempt` per fire considered. */
export interface FireTracer {
  /** This runner's attempt at a fire, begun at `startedAt` (this host's clock). */
  attempt(key: FireKey, o: { trigger: Trigger; host: string; startedAt: Date }): AttemptTrace;
  /**
   * A fire nobody attempted, which this runner recorded `missed` at `at` (after a reconnect, a
   * failover, with no eligible runner): an attempt span of outcome `missed` in its trace.
   */
  missed(key: FireKey, o: { host: string; kind: MissedKind; at: Date }): void;
}

/** One runner's attempt at one fire. `end` once, whatever happened; the rest at most once. */
export interface AttemptTrace {
  /** The contention (the lock, its wait, the claim), from `from` to `to` (this host's clock). */
  contended(from: Date, to: Date, won: boolean): void;
  skipped(kind: SkipKind, reason: string): void;
  notAttempted(cause: NotAttemptedCause, error?: string): void;
  /**
   * Won: the run's span, child of this attempt; `slot` 1's winner sends the fire's root span.
   * `generation`: the one claimed — a re-run with `--again` may claim a later one than it
   * planned, and its attempt belongs to that generation's trace.
   */
  won(runId: number, slot: number, generation: number): RunTrace;
  end(): void;
}

/** The winner's run: its span, the job's processes (attempts, retries) and the verdict's write. */
export interface RunTrace {
  /** What the job gets (TRACEPARENT, `ctx.trace`): its spans join the run span. */
  readonly context: TraceContext;
  /** One process of the run (attempt 1, then each retry), from its start to `result`. */
  processRan(
    attempt: number,
    from: Date,
    result: { status: FinalStatus; exitCode: number | null; endedAt: Date },
  ): void;
  /** The wait before a retry. */
  retryWait(attempt: number, waitMs: number): void;
  /**
   * The verdict's write: `recorded`, `kept` (the backlog) or `failed`; `notifies`: the job has
   * notification targets, whose events the verdict's transaction enqueues (daemon/notifier.ts
   * delivers them later, from any runner).
   */
  verdict(from: Date, to: Date, written: 'recorded' | 'kept' | 'failed', notifies: boolean): void;
  end(result: { status: FinalStatus; attempts: number; error: string | null } | null): void;
}
