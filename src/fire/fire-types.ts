/**
 * What a fire is given (`FireOptions`) and what it answers (`FireOutcome`): the vocabulary shared
 * by the pipeline (run-fire.ts) and its callers (the dispatcher, `baton run`).
 */
import type { DatabaseTarget } from '../config/database-url.js';
import type { OverlapPolicy } from '../config/schema.js';
import type { FireContext } from '../coordination/fire-protocol.js';
import type { JobPool } from '../config/pools.js';
import type { JobResult, Launchers } from '../execution/job-process.js';
import type { RunLease } from '../execution/run-lease.js';
import type { SkipKind, Trigger } from '../run-status.js';
import type { Schedule } from '../schedule/cron.js';
import type { Attempt, ChainFence, RunParams } from '../store/runs.js';
import type { DependentPlan } from '../store/dependent-fires.js';
import type { FireEvents, NotAttemptedCause } from './fire-events.js';
import type { FireTracer } from './fire-trace.js';
import type { Limiter } from './limiter.js';
import type { LocalRuns } from './local-runs.js';
import type { OutputWriter } from './output-writer.js';
import type { RunTimings } from './run-timings.js';
import type { VerdictBacklog } from './verdict-backlog.js';

export type FireOutcome =
  | {
      status: 'ran';
      runId: number;
      result: JobResult;
      attempts: number;
      recorded: boolean;
      /**
       * The children its verdict carried, as written (`dependentsWithVerdict`): an operator's
       * chain's generation may be a later one than planned. Absent: none, or not recorded.
       */
      dependents?: readonly DependentPlan[];
    }
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
  /** The timing version the fire falls under (store/timings.ts), recorded on the winner's row. */
  timingVersion?: number;
  /** A fire of a schedule created at run time: its row as read, which fences the claim. */
  dynamic?: Attempt['dynamic'];
  /**
   * The job's pool as the runner has it now (a reload replaces it): a fire waiting for a slot
   * gives up when it changed (coordination/pool-slots.ts). Absent: the pool the fire began with.
   */
  currentPool?: () => JobPool | undefined;
  /** Seconds GET_LOCK may wait (`baton run --wait`); 0 for scheduled fires. */
  waitSeconds?: number;
  /** Contended after the fire's first asker's lead: its winner is looked up first. */
  afterLead?: boolean;
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
  /** How runs are stopped (RUN_TIMINGS in fire/run-control.ts when not given). */
  timings?: Pick<RunTimings, 'killGraceMs' | 'lostKillGraceMs' | 'bookkeepingWaitMaxMs'>;
  /** Masked as `***` in the kept output and tail (config/connections.ts: outputSecrets). */
  secrets?: readonly string[];
  /** The fire's generation to claim (a re-run, trigger `rerun`); default 0. */
  rerun?: number;
  /** Claim only while no generation of the fire has a `done` run (see Attempt.unlessDone). */
  unlessDone?: boolean;
  /** Manual parameters: given to the job (`ctx.params`), and as recorded on its row (masked). */
  params?: { given: Record<string, string>; recorded: RunParams | null };
  /**
   * Asked right before the job's first process is spawned, after the claim: a reason not to
   * start it after all (an operator's Ctrl-C that came while the lock was being taken), and the
   * run is recorded `interrupted`, not started. Null to start it.
   */
  interruptBeforeStart?: () => string | null;
  /** Where the job's process comes from: the root's spawner and warm hosts. */
  launchers: Launchers;
  /**
   * The children whose fires the run's verdict carries (`after:`, docs/dependencies.md), and how
   * long the other runners leave them to this one. None: the run has no children to tell.
   */
  dependents?: { plans: readonly DependentPlan[]; leadMs: number };
  /** A chain's child: claimed only while its judge holds the judgement (store/runs.ts). */
  chain?: ChainFence;
  /** Where this fire's attempt and run are traced (fire-trace.ts); none: tracing is off. */
  tracer?: FireTracer;
}
