/**
 * The runner: one `baton start` process. It owns the daemon loop (one timer for all jobs), the
 * lock session, and the set of jobs it is running; each due fire goes through the fire protocol
 * (`src/coordination/run-fire.ts`).
 *
 * Fires of one job are contended one after another (a per-job chain), never concurrently: two
 * GET_LOCKs for the same name on one session would nest instead of excluding each other. A fire
 * that arrives while this runner still runs the job is skipped before GET_LOCK for that reason.
 */
import type { Pool } from 'mysql2/promise';
import type { Config, JobDefinition } from '../config/schema.js';
import type { Coordinator } from '../coordination/fire-protocol.js';
import { LockSession } from '../coordination/lock-session.js';
import { runFire } from '../coordination/run-fire.js';
import { errorMessage } from '../errors.js';
import type { RunningJob } from '../execution/job-process.js';
import type { Logger } from '../log.js';
import { parseSchedule, type Schedule } from '../schedule/cron.js';
import { openPool } from '../store/connect.js';
import type { DatabaseTarget } from '../store/database-url.js';
import { migrateDatabase } from '../store/migrate.js';
import { FireSchedule, type DueFire } from './fire-schedule.js';

export interface RunnerOptions {
  config: Config;
  target: DatabaseTarget;
  host: string;
  log: Logger;
  /** How long a graceful stop waits for running jobs before stopping them. */
  graceMs: number;
}

/** SIGTERM → SIGKILL delay when a run is stopped. */
export const KILL_GRACE_MS = 5_000;
/** A wake this late is worth a warning: the event loop or the host was stalled. */
const LATE_WAKE_WARN_MS = 1_000;

interface ActiveRun {
  scheduledAt: Date;
  handle: RunningJob;
}

export class Runner {
  private pool!: Pool;
  private lock!: LockSession;
  private schedule!: FireSchedule;
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  private readonly jobs: Map<string, JobDefinition>;
  private readonly active = new Map<string, ActiveRun>();
  private readonly chains = new Map<string, Promise<void>>();
  private reopening: Promise<void> | null = null;
  private readonly inflight = new Set<Promise<unknown>>();

  constructor(private readonly options: RunnerOptions) {
    this.jobs = new Map(options.config.jobs.filter((j) => j.enabled).map((j) => [j.name, j]));
  }

  private get log(): Logger {
    return this.options.log;
  }

  private get coordinator(): Coordinator {
    return {
      database: this.options.target.database,
      namespace: this.options.config.namespace,
      host: this.options.host,
      pid: process.pid,
      pool: this.pool,
      lock: this.lock,
    };
  }

  /** Connects, migrates, opens the lock session and starts the loop. */
  async start(): Promise<void> {
    const { target, config } = this.options;
    const { applied } = await migrateDatabase(target);
    if (applied.length > 0) this.log.info({ applied }, 'migrations applied');
    this.pool = openPool(target);
    this.lock = await LockSession.open(target);

    const schedules = new Map<string, Schedule>();
    for (const job of this.jobs.values()) {
      schedules.set(job.name, parseSchedule(job.schedule, job.timezone));
    }
    this.schedule = new FireSchedule(schedules, new Date());
    this.log.info(
      {
        namespace: config.namespace,
        database: target.display,
        lockConnectionId: this.lock.connectionId,
        jobs: [...this.jobs.keys()],
      },
      'runner started',
    );
    this.arm();
  }

  private arm(): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => this.wake(), this.schedule.sleepMs(new Date()));
  }

  private wake(): void {
    // Recompute from the clock at every wake: timers drift, hosts get suspended.
    const { due, missed } = this.schedule.take(new Date());
    for (const m of missed) {
      this.log.warn(
        { job: m.job, firstMissed: m.first, resumedAt: m.resumedAt },
        'fires missed: the runner woke too late to run them',
      );
    }
    for (const fire of due) this.dispatch(fire);
    this.arm();
  }

  private dispatch(fire: DueFire): void {
    const job = this.jobs.get(fire.job);
    if (!job) return;
    if (fire.lateMs > LATE_WAKE_WARN_MS) {
      this.log.warn(
        { job: job.name, scheduledAt: fire.scheduledAt, lateMs: fire.lateMs },
        'late wake',
      );
    }
    const previous = this.chains.get(job.name) ?? Promise.resolve();
    const next = previous.then(() => this.fire(job, fire.scheduledAt));
    this.chains.set(job.name, next);
  }

  /** Contends for one fire; resolves once contention is settled (the run may go on). */
  private fire(job: JobDefinition, scheduledAt: Date): Promise<void> {
    if (this.stopping) return Promise.resolve();
    return new Promise<void>((settled) => {
      const log = this.log.child({ job: job.name, scheduledAt });
      const work = this.ensureLockSession()
        .then(() =>
          runFire(this.coordinator, job, scheduledAt, {
            trigger: 'schedule',
            runningHere: this.active.get(job.name)?.scheduledAt ?? null,
            onStart: (handle, fire) => {
              this.active.set(job.name, { scheduledAt, handle });
              log.info({ runId: fire.runId, jobPid: handle.pid }, 'fire won: running');
              settled();
            },
          }),
        )
        .then((outcome) => {
          if (!outcome.ran) {
            log.info({ runId: outcome.runId, reason: outcome.reason }, 'fire skipped');
            return;
          }
          const { result } = outcome;
          log[result.status === 'done' ? 'info' : 'warn'](
            {
              runId: outcome.runId,
              status: result.status,
              exitCode: result.exitCode,
              error: result.error,
            },
            'run finished',
          );
        })
        .catch((err: unknown) => {
          // Usually the database (it cannot record or coordinate the fire); the message says.
          log.error({ err: errorMessage(err) }, 'fire not completed');
        })
        .finally(() => {
          if (this.active.get(job.name)?.scheduledAt === scheduledAt) this.active.delete(job.name);
          this.inflight.delete(work);
          settled();
        });
      this.inflight.add(work);
    });
  }

  /**
   * Replaces a lock session that the driver reported dead. Single-flight: the fires of one wake
   * share one reopen, so no second session is opened (and leaked) by a concurrent fire.
   */
  private ensureLockSession(): Promise<void> {
    if (this.lock.usable) return Promise.resolve();
    this.reopening ??= this.reopenLockSession().finally(() => {
      this.reopening = null;
    });
    return this.reopening;
  }

  private async reopenLockSession(): Promise<void> {
    const dead = this.lock;
    const lost = [...this.active.keys()];
    if (lost.length > 0) {
      // The dead session's locks are gone on the server: these runs no longer exclude others.
      // (Aborting them is the lost-lock handling's job; see docs/design.md, "Limits".)
      this.log.error({ jobs: lost }, 'lock session lost while jobs were running');
    }
    await dead.close();
    this.lock = await LockSession.open(this.options.target);
    this.log.warn({ lockConnectionId: this.lock.connectionId }, 'lock session reopened');
  }

  /**
   * Stops taking fires, waits up to the grace for running jobs, then stops them (their rows say
   * why), releases every lock and closes the connections. `force` skips the wait.
   */
  async stop(reason: string, force = false): Promise<void> {
    const first = !this.stopping;
    this.stopping = true;
    clearTimeout(this.timer);
    // Let contention in progress settle first: a fire that wins right now must be in `active`
    // before we decide what to wait for and what to stop. No new fire starts once stopping.
    await Promise.allSettled([...this.chains.values()]);
    if (first && !force && this.active.size > 0) {
      this.log.info(
        { running: [...this.active.keys()], graceMs: this.options.graceMs },
        'stopping: waiting for running jobs',
      );
      let graceTimer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.inflight]),
        new Promise((r) => (graceTimer = setTimeout(r, this.options.graceMs))),
      ]);
      // A pending timer would keep the process alive after the runner has stopped.
      clearTimeout(graceTimer);
    }
    for (const [job, run] of this.active) {
      this.log.warn({ job }, 'stopping a running job');
      void run.handle.stop(
        `interrupted: the runner stopped (${reason})`,
        force ? 0 : KILL_GRACE_MS,
      );
    }
    await Promise.allSettled([...this.inflight]);
    if (!first) return;
    await this.lock?.close();
    await this.pool?.end().catch(() => {});
    this.log.info('runner stopped');
  }
}
