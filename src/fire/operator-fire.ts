/**
 * A fire an operator asked for — a job run now, or a past fire run again — as an operator action
 * (src/actions) hands it to the process that runs it: a runner (`baton start`, a library-mode
 * scheduler: daemon/dispatcher.ts) or the CLI's own foreground session (cli/foreground-fire.ts).
 * The actions are written against `OperatorFires` alone, so `baton run`, `baton backfill`, the
 * write API and library mode's run are each one implementation, whichever process runs the fire.
 *
 * Either way the fire goes down the one fire pipeline (run-fire.ts): the job's lock, the fire
 * key, the verdict written before the lock is released. An operator's fire is never queued and
 * never paused: a run of the job going on makes it `busy`.
 */
import type { JobDefinition } from '../config/schema.js';
import type { Queryable } from '../store/deadline.js';
import type { FireOptions, FireOutcome } from './fire-types.js';
import type { DependentPlan } from '../store/dependent-fires.js';
import type { ChainFence } from '../store/runs.js';

export interface OperatorFire {
  /** The job as this run starts it (manual parameters applied: run-params.ts). */
  job: JobDefinition;
  at: Date;
  /**
   * `manual`: now (fire/manual-instant.ts); `rerun`: a past fire of the schedule; `after`: a
   * child's fire in an operator's chain (`--with-dependents`, fire/dependents.ts).
   */
  trigger: 'manual' | 'rerun' | 'after';
  /** The generation claimed (0: the fire's first; actions/rerun-plan.ts). */
  rerun: number;
  /** The claim is refused when a generation of the fire is `done` by then (no `--again`). */
  unlessDone: boolean;
  params?: FireOptions['params'];
  /**
   * Seconds GET_LOCK may wait (`baton run --wait`). A runner contends on the session its
   * heartbeat shares, so it never waits there: its fire is `busy` at once instead.
   */
  waitSeconds: number;
  /** The job's output echoed besides its history (a foreground command's terminal). */
  tee?: boolean | 'stderr';
  /**
   * The children its verdict carries (`--with-dependents`, docs/dependencies.md): the process
   * judges them once the verdict is written, and runs those due as fires of its own (trigger
   * `after`) with their own children; none: none.
   */
  dependents?: readonly DependentPlan[];
  /** A chain's child (trigger `after`): the judgement its claim rests on (store/runs.ts). */
  chain?: ChainFence;
}

/**
 * How an operator's fire began: `started` once it holds the job's lock and its run row; `busy`
 * when a run of the job holds the lock (its skip row names the holder), or the fire's claim found
 * it done meanwhile (`alreadyRan`).
 */
export type ManualStart =
  | { status: 'started'; runId: number; scheduledAt: Date }
  | { status: 'busy'; runId: number | null; reason: string; alreadyRan?: boolean }
  /** Not contended (no lock session, the database failed), or the process is stopping. */
  | { status: 'not-run'; reason: string };

/** An operator's fire under way. */
export interface OperatorFireHandle {
  /** Settles once the fire is contended. */
  started: Promise<ManualStart>;
  /** Settles when the fire is over: its run ended and its verdict is written (null: no run). */
  outcome: Promise<FireOutcome | null>;
}

/** A process that runs operators' fires. */
export interface OperatorFires {
  readonly namespace: string;
  /** This process's host id: the audit's host, the run row's. */
  readonly host: string;
  /** A pool that takes writes: history reads, audit rows. */
  readonly pool: Queryable;
  /** The job of that name as this process has it (disabled ones included); null: none. */
  job(name: string): JobDefinition | null;
  /** Every job this process has (disabled ones included): a chain's children. */
  jobs(): readonly JobDefinition[];
  /**
   * Why this process may not run `job` (its `runOn`, config/placement.ts: "needs tag sftp");
   * null when it may. An operator's fire of a job placed elsewhere is refused before anything is
   * written; a chain's child placed elsewhere is left to the runners that may run it.
   */
  whyNotHere(job: JobDefinition): string | null;
  /** Now by the database's clock. */
  now(): Promise<Date>;
  /** True once the process began to stop: no further operator fire may start. */
  stopping(): boolean;
  fire(f: OperatorFire): OperatorFireHandle;
  /**
   * Work of an action that goes on after its surface has answered (a backfill's walk, a run's
   * audit outcome written when it ends) and writes through `pool`: the process waits for it
   * before it closes the pool. Returns `work`.
   */
  track<T>(work: Promise<T>): Promise<T>;
}

/**
 * What a fire's start was once it is contended: its own run if it started (`startedRunId`: the
 * fire handle's, never another run of the same instant), else its outcome (whose rejection,
 * nothing run, is the start's).
 */
export async function manualStartOf(
  f: Pick<OperatorFire, 'at'>,
  startedRunId: () => number | null,
  outcome: Promise<FireOutcome | null>,
): Promise<ManualStart> {
  // Started: it may go on for hours; the answer is not its end.
  const runId = startedRunId();
  if (runId != null) return { status: 'started', runId, scheduledAt: f.at };
  const over = await outcome;
  switch (over?.status) {
    case 'ran':
      return { status: 'started', runId: over.runId, scheduledAt: f.at };
    case 'skipped':
      return {
        status: 'busy',
        runId: over.runId,
        reason: over.reason,
        ...(over.kind === 'already-ran' ? { alreadyRan: true } : {}),
      };
    case 'not-attempted':
      return { status: 'not-run', reason: `not attempted: ${over.cause}` };
    default:
      return { status: 'not-run', reason: 'the process is stopping, or the database failed' };
  }
}
