/**
 * Fires run in the foreground by an operator — `baton run` (now, or a past fire with `--fire`)
 * and each fire of `baton backfill` — through the same pipeline as the daemon's (fire/run-fire.ts):
 * the job's lock, the fire key, the verdict written before the lock is released.
 *
 * One session (a pool and a lock session) serves every fire of the command. Its lock session is
 * watched from the first run on, like a runner's: a lost session aborts the run it no longer
 * protects. Signals: in `stop` mode (`baton run`) SIGINT or SIGTERM stops the run at once
 * (`interrupted`); in `finish` mode (`baton backfill`) the first one lets the run going finish and
 * asks the caller to stop after it, a second one stops the run too. No job starts after a stop
 * was asked: a fire still waiting for its lock is cancelled, and one that won its lock anyway (the
 * request came as it was taken) is recorded `interrupted`, not started. A job spawned before the
 * request is the run going, even if its pid had not been reported yet when the signal came.
 */
import { jobDatabase, outputSecrets, withheldVariables } from '../config/connections.js';
import type { Config, JobDefinition } from '../config/schema.js';
import type { DatabaseTarget } from '../config/database-url.js';
import {
  DEFAULT_HEARTBEAT_DEADLINE_MS,
  DEFAULT_HEARTBEAT_MS,
  type LockSession,
} from '../coordination/lock-session.js';
import { openCoordination, POOL_STATEMENT_DEADLINE_MS } from '../coordination/open-coordination.js';
import { InterruptedError } from '../errors.js';
import { RunLease } from '../execution/run-lease.js';
import { Spawner } from '../execution/spawner-client.js';
import { watchKillRequests } from '../fire/kill-watch.js';
import { LocalRuns } from '../fire/local-runs.js';
import { OutputWriter } from '../fire/output-writer.js';
import { KILL_GRACE_MS } from '../fire/run-control.js';
import {
  manualStartOf,
  type OperatorFire,
  type OperatorFireHandle,
  type OperatorFires,
} from '../fire/operator-fire.js';
import { startFire } from '../fire/run-fire.js';
import { childrenOf } from '../config/dependencies.js';
import { describeRunOn, mayRun } from '../config/placement.js';
import { resolveTags } from './options.js';
import {
  JUDGE_TIMINGS,
  planDependents,
  resolveDependent,
  WRITER_LEAD_MS,
  type DependentEnv,
} from '../fire/dependents.js';
import type { DependentPlan } from '../store/dependent-fires.js';
import { openPool } from '../store/connect.js';
import { findPause, pausedReason } from '../store/pauses.js';
import { DeadlinePool } from '../store/deadline.js';

export type SignalMode = 'stop' | 'finish';

function ignoreBrokenPipe(err: NodeJS.ErrnoException): void {
  if (err.code !== 'EPIPE') throw err;
}

export class ForegroundSession implements OperatorFires {
  private readonly runs = new LocalRuns();
  private readonly lease = new RunLease(DEFAULT_HEARTBEAT_MS + DEFAULT_HEARTBEAT_DEADLINE_MS);
  private watching = false;
  /** Kill requests (`baton kill` from any host) on this session's runs, looked for once one runs. */
  private readonly killWatch = new AbortController();
  private signals = 0;
  /** Aborted at the first stop request: no fire contends after it. */
  private readonly noNewFires = new AbortController();
  /** Fires contending for their lock, and fires whose job is being spawned (not in `runs` yet). */
  private contending = 0;
  private starting = 0;
  /** What the command's actions still write once their runs are over (`track`). */
  private readonly tracked = new Set<Promise<unknown>>();
  /** This process's tags for `runOn` (BATON_TAGS), read once. */
  private readonly tags = resolveTags(undefined);
  /** The session's spawner (it warms no module host: each fire is one run). */
  private readonly launchers = { spawner: new Spawner() };
  /** What asked to stop first (a signal's name, or why), if anything did. */
  interruptedBy: string | null = null;
  /** Called on the first signal in `finish` mode (to say what happens): is a run going on? */
  onFinishRequested: ((running: boolean) => void) | null = null;

  private constructor(
    readonly pool: DeadlinePool,
    readonly lock: LockSession,
    private readonly target: DatabaseTarget,
    private readonly config: Config,
    readonly host: string,
    private readonly mode: SignalMode,
  ) {
    process.on('SIGINT', this.onSignal);
    process.on('SIGTERM', this.onSignal);
    // `baton run job | head` closes our output early: keep running the job, stop echoing.
    process.stdout.on('error', ignoreBrokenPipe);
    process.stderr.on('error', ignoreBrokenPipe);
  }

  static async open(
    config: Config,
    target: DatabaseTarget,
    host: string,
    mode: SignalMode,
  ): Promise<ForegroundSession> {
    const pool = new DeadlinePool(openPool(target, 2), POOL_STATEMENT_DEADLINE_MS);
    const { lock } = await openCoordination(target, pool).catch(async (err: unknown) => {
      await pool.end().catch(() => {});
      throw err;
    });
    return new ForegroundSession(pool, lock, target, config, host, mode);
  }

  get namespace(): string {
    return this.config.namespace;
  }

  /** Whether the operator asked to stop (a signal came). */
  get stopRequested(): boolean {
    return this.interruptedBy != null;
  }

  stopping(): boolean {
    return this.stopRequested;
  }

  job(name: string): JobDefinition | null {
    return this.config.jobs.find((j) => j.name === name) ?? null;
  }

  jobs(): readonly JobDefinition[] {
    return this.config.jobs;
  }

  /**
   * This command runs jobs in its own process: it may run a placed job only where a runner with
   * its host id (`--host`, BATON_HOST) and the tags of BATON_TAGS could (the operator's host
   * usually has none).
   */
  whyNotHere(job: JobDefinition): string | null {
    if (!job.runOn || mayRun(job.runOn, { host: this.host, tags: this.tags })) return null;
    return describeRunOn(job.runOn);
  }

  now(): Promise<Date> {
    return this.lock.now();
  }

  track<T>(work: Promise<T>): Promise<T> {
    this.tracked.add(work);
    return work;
  }

  private readonly onSignal = (signal: NodeJS.Signals) => this.requestStop(signal, false);

  private requestStop(cause: string, now: boolean): void {
    this.interruptedBy ??= cause;
    this.signals = now ? Math.max(this.signals, 1) + 1 : this.signals + 1;
    this.noNewFires.abort();
    // A job spawned whose pid is not reported yet is a run going too (it joins `runs` then, and
    // the stop reaches it in run()'s `contended` handler).
    const going = this.runs.size + this.starting;
    if (this.mode === 'finish' && this.signals === 1) this.onFinishRequested?.(going > 0);
    if (going === 0) {
      // Still waiting for the lock (`--wait`): cancel the wait on the server, so that the lock
      // is not taken after all once this process has given up. Only then: between fires, or once
      // a job is being spawned, the statement on the lock session may be its heartbeat, and a
      // killed heartbeat loses the session.
      if (this.contending > 0) void this.lock.interruptQuery(this.target).catch(() => {});
      return;
    }
    if (this.mode === 'finish' && this.signals === 1) return;
    for (const run of this.runs)
      run.control.stop(`interrupted by ${cause}`, KILL_GRACE_MS, 'interrupted');
  }

  /**
   * Starts one fire; its `started` and `outcome` reject with InterruptedError when a signal
   * cancelled its lock wait (nothing ran).
   */
  fire(f: OperatorFire): OperatorFireHandle {
    const context = {
      database: this.target.database,
      namespace: this.config.namespace,
      host: this.host,
      pid: process.pid,
      pool: this.pool,
      lock: this.lock,
    };
    const job = f.job;
    const database =
      job.target.kind === 'module' ? jobDatabase(this.config, job, this.target) : null;
    let started = false;
    if (this.stopRequested) {
      const refused = Promise.reject(this.notRun(job));
      return { started: refused, outcome: refused };
    }
    // Where this fire is: contending for its lock, then spawning its job, then a run in `runs`.
    let stage: 'contending' | 'starting' | 'settled' = 'contending';
    this.contending++;
    const fire = startFire(job, f.at, {
      signal: this.noNewFires.signal,
      trigger: f.trigger,
      context: () => context,
      runs: this.runs,
      database: () => database,
      withholdEnv: withheldVariables(this.config),
      secrets: outputSecrets(this.config, job, this.target),
      waitSeconds: f.waitSeconds,
      tee: f.tee,
      lease: this.lease,
      output: new OutputWriter(),
      launchers: this.launchers,
      ...(f.rerun ? { rerun: f.rerun } : {}),
      ...(f.unlessDone ? { unlessDone: true } : {}),
      ...(f.params ? { params: f.params } : {}),
      ...(f.chain ? { chain: f.chain } : {}),
      ...(f.dependents?.length
        ? { dependents: { plans: f.dependents, leadMs: WRITER_LEAD_MS } }
        : {}),
      interruptBeforeStart: () => {
        if (this.interruptedBy) return `${this.interruptedBy} came while the lock was being taken`;
        this.contending--;
        this.starting++;
        stage = 'starting';
        return null;
      },
    });
    void fire.contended.then(() => {
      if (stage === 'contending') this.contending--;
      if (stage === 'starting') this.starting--;
      stage = 'settled';
      if (this.runs.size === 0) return;
      started = true;
      // The signal came after the job was spawned but before the spawner reported its pid (the
      // run was not in `runs` yet): it is the run going (requestStop counted it so), and a stop
      // that stops runs stops it too.
      if (this.interruptedBy && (this.mode === 'stop' || this.signals > 1)) {
        for (const run of this.runs)
          run.control.stop(`interrupted by ${this.interruptedBy}`, KILL_GRACE_MS, 'interrupted');
      }
      this.watch();
    });
    const outcome = fire.outcome.then(
      (over) => {
        // Cut off by the stop before it contended: nothing started.
        if (over.status === 'stopped') throw this.notRun(job);
        return over;
      },
      (err: unknown) => {
        if (this.interruptedBy && !started) throw this.notRun(job);
        throw err;
      },
    );
    const start = fire.contended.then(() => manualStartOf(f, fire.startedRunId, outcome));
    if (f.dependents?.length) {
      const plans = f.dependents;
      // Like a runner: the verdict's children judged here at once, those due run by this session.
      void this.track(
        outcome.then(
          (over) =>
            over.status === 'ran' && over.recorded
              ? this.judgeChildren(f, over.dependents ?? plans)
              : null,
          () => null,
        ),
      );
    }
    // Each is handled by whoever awaits it; a caller may await only one of the two (a backfill
    // reads the outcome alone), and the other must not end the process as unhandled.
    outcome.catch(() => {});
    start.catch(() => {});
    return { started: start, outcome };
  }

  /**
   * The children of a verdict this session wrote (`--with-dependents`): each judged, and run here
   * when due (fire/dependents.ts), with its own children planned the same way. Settles when the
   * chain below `parent` is over, the children's runs included.
   */
  private async judgeChildren(
    parent: OperatorFire,
    plans: readonly DependentPlan[],
  ): Promise<void> {
    const reran = parent.trigger !== 'manual' && (parent.rerun > 0 || parent.trigger === 'rerun');
    const plansOf = (child: JobDefinition, at: Date) =>
      planDependents(
        this.pool,
        this.namespace,
        childrenOf(this.config.jobs, child.name),
        at,
        reran,
      );
    const env: DependentEnv = {
      pool: this.pool,
      host: this.host,
      pid: process.pid,
      now: () => this.lock.toDatabaseTime(new Date()) ?? new Date(),
      timings: JUDGE_TIMINGS,
      fire: async (child, key, fence) => {
        if (this.stopRequested) return null;
        // A child paused is skipped as at a runner (its pause stops its chain's fires too); an
        // operator who wants it anyway runs it by name.
        const pause = await findPause(this.pool, key.namespace, child.name);
        if (pause) {
          const reason = pausedReason(pause);
          return {
            startedRunId: () => null,
            outcome: Promise.resolve({
              status: 'skipped' as const,
              runId: null,
              kind: 'paused' as const,
              reason,
              contendMs: 0,
            }),
          };
        }
        const grandchildren = await plansOf(child, key.scheduledAt);
        const handle = this.fire({
          job: child,
          at: key.scheduledAt,
          trigger: 'after',
          rerun: key.rerun,
          chain: fence,
          unlessDone: false,
          waitSeconds: 0,
          ...(grandchildren.length > 0 ? { dependents: grandchildren } : {}),
        });
        const start = await handle.started;
        return {
          startedRunId: () => (start.status === 'started' ? start.runId : null),
          outcome: handle.outcome,
        };
      },
      plans: (child, key) => plansOf(child, key.scheduledAt),
    };
    await Promise.allSettled(
      plans.map(async (plan) => {
        const child = this.job(plan.job);
        // A child placed elsewhere is judged and run by a runner that may run it (its chain row
        // is written: dependent-watch.ts), never here.
        if (!child || this.whyNotHere(child) != null) return;
        const key = {
          namespace: this.namespace,
          job: plan.job,
          scheduledAt: parent.at,
          rerun: plan.rerun,
        };
        const resolution = await resolveDependent(env, child, key);
        // Its run (and the chain below it, which its verdict starts) is awaited too; a child
        // skipped leaves its own children nothing to wait for.
        if (resolution.state === 'started') await resolution.contention?.outcome;
        if (resolution.state === 'skipped' && resolution.dependents.length > 0) {
          await this.judgeChildren({ ...parent, job: child }, resolution.dependents);
        }
      }),
    );
  }

  private notRun(job: JobDefinition): InterruptedError {
    return new InterruptedError(
      `${job.name} not run: interrupted by ${this.interruptedBy ?? 'a signal'} while waiting ` +
        'for the lock',
    );
  }

  /**
   * Watched only once a run holds its lock: a GET_LOCK that waits (`--wait`) holds the session,
   * and its heartbeat with it. Like the daemon: a lost lock session means the run no longer
   * excludes others.
   */
  private watch(): void {
    if (this.watching) return;
    this.watching = true;
    this.lock.watch({
      intervalMs: DEFAULT_HEARTBEAT_MS,
      deadlineMs: DEFAULT_HEARTBEAT_DEADLINE_MS,
      onLost: (reason) => {
        this.runs.abortAll(`lost: the lock session ended (${reason}); the run was aborted`);
        this.lease.revoke();
      },
      onAlive: () => this.lease.renew(),
    });
    watchKillRequests({ pool: () => this.pool, runs: this.runs }, this.killWatch.signal);
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.tracked]);
    // A run still going (it never is, unless the command failed) is stopped by its spawner as at
    // a runner's death; this does not wait for that, as a process exiting would not either.
    this.launchers.spawner.close();
    this.killWatch.abort();
    process.off('SIGINT', this.onSignal);
    process.off('SIGTERM', this.onSignal);
    process.stdout.off('error', ignoreBrokenPipe);
    process.stderr.off('error', ignoreBrokenPipe);
    await this.lock.close();
    await this.pool.end().catch(() => {});
  }
}
