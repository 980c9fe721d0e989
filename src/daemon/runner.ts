/**
 * The runner: one `baton start` process. It owns the daemon loop (one timer for all jobs), its
 * connection to the database (the pool and the lock session), and the runs it has started; each
 * due fire goes through the fire protocol (`src/fire/run-fire.ts`).
 *
 * Fires of one job are contended one after another (a per-job chain), never concurrently: two
 * GET_LOCKs for the same name on one session would nest instead of excluding each other. A fire
 * that arrives while this runner still runs the job is skipped before GET_LOCK for that reason
 * (`overlap: skip`), waits for it (`queue`), or runs beside it (`allow`).
 *
 * Faults, and what the runner does about them (docs/design.md has the operator's version):
 * - The database is unreachable at start-up, or goes away later: the runner keeps running, does
 *   not run what it cannot coordinate (each such fire is logged once), reconnects with capped
 *   backoff, and then looks back (`recovery.ts`): catch-up where allowed, `missed` rows otherwise.
 * - The lock session dies (KILL, server restart, partition — found by the heartbeat within
 *   `heartbeatMs + heartbeatDeadlineMs`): its locks are gone, so every run it covered is aborted
 *   (SIGTERM, SIGKILL after LOST_KILL_GRACE_MS) and recorded `lost`; verdicts that cannot be
 *   written yet are kept and written once the database answers.
 * - Another runner vanished: the reaper marks its `running` rows `lost`.
 * - The server is read-only (a demoted primary): no fire runs until it is writable again.
 */
import type { Config, JobDefinition } from '../config/schema.js';
import { openCoordination } from '../coordination/open-coordination.js';
import { reapOrphanRuns } from '../coordination/reaper.js';
import type { Coordinator } from '../coordination/fire-protocol.js';
import {
  DEFAULT_HEARTBEAT_DEADLINE_MS,
  DEFAULT_HEARTBEAT_MS,
  LOCK_SESSION_IDLE_TIMEOUT_SECONDS,
  LockSession,
  ReadOnlyDatabaseError,
} from '../coordination/lock-session.js';
import { KILL_GRACE_MS, runFire, type RunControl } from '../fire/run-fire.js';
import { BatonError, errorMessage, isRetryableDbError, isUnreachableDbError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import type { Logger } from '../log.js';
import { parseSchedule, type Schedule } from '../schedule/cron.js';
import { openPool } from '../store/connect.js';
import type { DatabaseTarget } from '../config/database-url.js';
import { DeadlinePool, StatementTimeoutError, type Queryable } from '../store/deadline.js';
import { insertMissed } from '../store/fire-claims.js';
import { firesWithRows, firstFiresOf } from '../store/fire-reads.js';
import { finishRun, type RunOutcome } from '../store/run-verdicts.js';
import type { FinalStatus, Trigger } from '../run-status.js';
import { FireSchedule, MAX_SLEEP_MS, type DueFire } from './fire-schedule.js';
import { Limiter, shuffleWithinInstant } from './contention.js';
import { prepareSpawner } from '../execution/spawner-client.js';
import {
  heartbeatRunner,
  markRunnerStopped,
  registerRunner,
  registryOwner,
  type LoadedJob,
  type RunnerHeartbeat,
} from '../store/runners.js';
import { connectionVariables, jobDatabase } from '../config/connections.js';
import { scheduleFingerprint } from '../config/fingerprint.js';
import { version } from '../version.js';
import { lookBack, MISSED_SETTLE_MS } from './recovery.js';
import { RetentionSchedule } from './retention.js';

export interface RunnerOptions {
  config: Config;
  target: DatabaseTarget;
  host: string;
  log: Logger;
  /** How long a graceful stop waits for running jobs before stopping them. */
  graceMs: number;
  /** Time between lock-session heartbeats. */
  heartbeatMs?: number;
  /** A heartbeat unanswered for this long means the lock session is lost. */
  heartbeatDeadlineMs?: number;
  /** Time between two looks for `running` rows whose runner is gone. */
  reaperMs?: number;
  /** Time between two registry heartbeats (`baton_runners.last_seen_at`). */
  registryMs?: number;
  /** A clock offset from the database beyond this is logged as a warning. */
  clockWarnMs?: number;
  /** Told about every fire's outcome (the metrics). */
  events?: RunnerEvents;
}

/** What happens to fires, as it happens: for counting (src/http/metrics.ts), not for control. */
export interface RunnerEvents {
  /**
   * Won a fire. `lagMs` (start minus instant) for scheduled fires; `contendMs` null for queued
   * fires, whose contention includes waiting for the previous run.
   */
  fireWon(job: string, contendMs: number | null, lagMs: number | null): void;
  fireSkipped(job: string, reason: string, contendMs: number | null): void;
  runFinished(job: string, status: FinalStatus, durationMs: number): void;
  /** A fire this runner did not (or could not finish to) contend for. */
  fireNotAttempted(job: string, why: NotAttempted): void;
  /** `missed` rows this runner recorded after reconnecting: fires nobody attempted. */
  firesMissed(job: string, count: number): void;
  lockSessionLost(): void;
}

/** What the metrics' gauges read at each scrape. */
export interface RunnerGauges {
  databaseUp: boolean;
  readOnly: boolean;
  /** This host's clock minus the database's, in ms; null until measured. */
  clockOffsetMs: number | null;
  runningRuns: number;
  jobsLoaded: number;
  /** Time since the scheduler loop last woke, in ms. */
  sinceLastWakeMs: number;
}

/**
 * Why a fire was not attempted: no lock session to coordinate it, a read-only database, a wake
 * more than LATE_TOLERANCE_MS late (a stalled host), or an error while contending.
 */
export type NotAttempted = 'no-database' | 'read-only' | 'late-wake' | 'error';

/** Whether the runner is doing its job, for `/healthz`: a list of what is wrong, empty if fine. */
export interface RunnerHealth {
  healthy: boolean;
  problems: string[];
}

/** The loop wakes at least every MAX_SLEEP_MS; this much later than planned means it is stuck. */
const LOOP_STUCK_MS = 10_000;

export const DEFAULT_REAPER_MS = 10_000;
export const DEFAULT_REGISTRY_MS = 5_000;
export const DEFAULT_CLOCK_WARN_MS = 1_000;
/** A run whose lock is gone gets this long after SIGTERM: someone else may be starting it. */
export const LOST_KILL_GRACE_MS = 1_000;
/** Deadline of history statements (the pool); longer than a heartbeat, it guards a partition. */
const STATEMENT_DEADLINE_MS = 10_000;
/** Reconnect backoff: doubles from the first to the cap. */
const RECONNECT_FIRST_MS = 500;
const RECONNECT_MAX_MS = 30_000;
/**
 * Fires contended at once (the rest wait their turn). Their lock statements and most of their
 * reads and writes are batched per turn of the event loop (store/batcher.ts), so a whole
 * instant's fires contend together without queueing hundreds of statements before a heartbeat;
 * the bound keeps a schedule of thousands of jobs on one second from holding thousands of
 * contentions (and their pool statements) at once.
 */
const MAX_CONTENTIONS = 1_000;
/** How early the loop's timer is set before a fire; the rest is polled (see arm). */
const WAKE_AHEAD_MS = 2;
/** A wake this late is worth a warning: the event loop or the host was stalled. */
const LATE_WAKE_WARN_MS = 1_000;

interface ActiveRun {
  job: string;
  scheduledAt: Date;
  control: RunControl;
  /** Settles when the run's verdict is written (or given up). */
  finished: Promise<void>;
}

export class Runner {
  private pool: DeadlinePool | null = null;
  private lock: LockSession | null = null;
  /** Prunes the history by `retention:` (one runner of the fleet at a time). */
  private retention: RetentionSchedule | null = null;
  /** When the connected server started (rounded early): the reaper's test for old rows. */
  private serverStartedBefore = new Date(0);
  private schedule!: FireSchedule;
  private config: Config;
  private jobs = new Map<string, JobDefinition>();
  private schedules = new Map<string, Schedule>();
  private timer: NodeJS.Timeout | undefined;
  private reaperTimer: NodeJS.Timeout | undefined;
  private registryTimer: NodeJS.Timeout | undefined;
  private readonly pendingTimers = new Set<NodeJS.Timeout>();
  private stopping = false;
  private readonly stopSignal = new AbortController();
  private everConnected = false;
  private connecting: Promise<boolean> | null = null;
  private readonly active = new Set<ActiveRun>();
  private readonly contentions = new Limiter(MAX_CONTENTIONS);
  private readonly chains = new Map<string, Promise<void>>();
  private readonly inflight = new Set<Promise<unknown>>();
  /** Verdicts the database could not take yet; written after the next reconnect. */
  private readonly unwritten = new Map<number, RunOutcome>();
  private readonly startedAt = new Date();
  /** Job → fingerprint of the loaded definition (computed once per load, for the registry). */
  private fingerprints: Record<string, string> = {};
  /** When this runner first loaded each job's current schedule (see applyConfig). */
  private knownSince = new Map<string, Date>();

  constructor(private readonly options: RunnerOptions) {
    this.config = options.config;
  }

  private get log(): Logger {
    return this.options.log;
  }

  /** True while the lock session is up: fires can be coordinated. */
  get coordinated(): boolean {
    return this.lock?.usable === true;
  }

  private coordinator(lock: LockSession, pool: DeadlinePool): Coordinator {
    return {
      database: this.options.target.database,
      namespace: this.config.namespace,
      host: this.options.host,
      pid: process.pid,
      pool,
      lock,
      now: () => this.dbNow(),
    };
  }

  /**
   * Starts the loop, then connects: waits (with backoff) while the database is unreachable, and
   * throws only what retrying cannot fix (bad credentials, an unsupported server, a schema this
   * code does not know). Resolves false when the runner was stopped before it connected.
   */
  async start(): Promise<boolean> {
    this.applyConfig(this.config, this.dbNow());
    this.arm();
    this.retention = new RetentionSchedule({
      // Only while this runner can coordinate: the database answers and is the fleet's.
      pool: () => (this.coordinated ? this.pool : null),
      database: this.options.target.database,
      namespace: this.config.namespace,
      retention: this.config.retention,
      log: this.log,
    });
    this.retention.start();
    const connected = await this.connectWithRetry(true);
    if (!connected) return false;
    // The first command run should not wait for the spawner to boot (execution/spawner.ts).
    if (this.config.jobs.some((job) => job.target.kind !== 'module')) prepareSpawner();
    this.log.info(
      {
        namespace: this.config.namespace,
        database: this.options.target.display,
        lockConnectionId: this.lock?.connectionId,
        jobs: [...this.jobs.keys()],
      },
      'runner started',
    );
    return true;
  }

  // ---------------------------------------------------------------------------------------------
  // Connection

  /**
   * Connects (single-flight), retrying with capped backoff. At start-up (`firstStart`) errors that
   * a retry cannot fix are thrown; later they are logged and retried too (an operator may fix the
   * grants or the server while the runner waits).
   */
  private connectWithRetry(firstStart = false): Promise<boolean> {
    this.connecting ??= (async () => {
      for (let attempt = 0; !this.stopping; attempt++) {
        try {
          await this.connect();
          // The new session may already have died (a flapping network): then try again, or
          // nobody would — a loss reported meanwhile found this reconnect still in flight.
          if (this.stopping || this.lock?.usable) return !this.stopping;
          throw new Error(this.lock?.lossReason ?? 'the new lock session was lost at once');
        } catch (err) {
          if (this.stopping) return false;
          if (firstStart && !isTransient(err)) throw err;
          const retryInMs = Math.min(RECONNECT_FIRST_MS * 2 ** attempt, RECONNECT_MAX_MS);
          this.log.warn(
            { err: errorMessage(err), retryInMs },
            this.everConnected
              ? 'database unavailable: reconnecting'
              : 'database unavailable: waiting for it',
          );
          await this.sleep(retryInMs);
        }
      }
      return false;
    })().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const { target } = this.options;
    this.pool ??= new DeadlinePool(openPool(target), STATEMENT_DEADLINE_MS);
    const { lock, facts, applied } = await openCoordination(
      target,
      this.pool,
      lockSessionIdleTimeoutSeconds(this.options),
    );
    if (applied.length > 0) this.log.info({ applied }, 'migrations applied');
    const serverStartedBefore = await lock.serverStartedBefore().catch((err: unknown) => {
      void lock.close();
      throw err;
    });
    // A stop that came while connecting owns the shutdown: this session must not outlive it.
    if (this.stopping) {
      await lock.close();
      return;
    }
    this.serverStartedBefore = serverStartedBefore;
    this.lock = lock;
    const reconnect = this.everConnected;
    this.everConnected = true;
    if (reconnect) {
      this.log.warn({ lockConnectionId: lock.connectionId }, 'lock session reopened');
    } else {
      this.log.debug({ server: facts.version }, 'database server checked');
    }
    if (facts.readOnly) this.onReadOnly(true);
    lock.watch({
      intervalMs: this.options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
      deadlineMs: this.options.heartbeatDeadlineMs ?? DEFAULT_HEARTBEAT_DEADLINE_MS,
      onLost: (reason) => this.onLockSessionLost(lock, reason),
      onReadOnly: (readOnly) => this.onReadOnly(readOnly),
    });
    // Not awaited: a slow write must not hold up the reconnect (and a session lost meanwhile is
    // retried by connectWithRetry); the reaper's tick writes what is left.
    void this.writeUnwrittenVerdicts();
    this.armReaper();
    if (!reconnect) {
      // Until now the loop ran on this host's clock; from now on it runs on the database's.
      this.schedule = new FireSchedule(this.schedules, this.dbNow());
      for (const job of this.knownSince.keys()) {
        this.knownSince.set(job, this.dbTime(this.startedAt));
      }
      this.arm();
    }
    await this.register(!reconnect);
    this.armRegistryHeartbeat();
    void this.recover(this.dbNow());
  }

  private readOnly = false;

  private onReadOnly(readOnly: boolean): void {
    if (readOnly === this.readOnly) return;
    this.readOnly = readOnly;
    if (readOnly) {
      this.log.error(
        'the database is read-only (a demoted primary?): no fire runs until it is writable',
      );
    } else {
      this.log.warn('the database is writable again: fires run again');
    }
  }

  /**
   * The lock session died: every lock this runner held is gone, so its runs no longer exclude
   * anyone. Abort them (recorded `lost`) and reconnect.
   */
  private onLockSessionLost(lock: LockSession, reason: string): void {
    if (lock !== this.lock) return;
    // Every run, also those already being stopped: their kill grace shrinks to the lost one.
    const running = [...this.active];
    this.options.events?.lockSessionLost();
    this.log.error(
      { reason, lockConnectionId: lock.connectionId, aborting: running.map((r) => r.job) },
      'lock session lost',
    );
    for (const run of running) {
      run.control.stop(
        `lost: the runner's lock session ended (${reason}); the run was aborted because its ` +
          'lock no longer kept other runners out',
        LOST_KILL_GRACE_MS,
        'lost',
      );
    }
    // A stopping runner does not reconnect; its aborted runs' verdicts are written if the
    // database still answers the pool.
    if (!this.stopping) void this.connectWithRetry();
  }

  private async writeUnwrittenVerdicts(): Promise<void> {
    if (!this.pool) return;
    for (const [runId, outcome] of this.unwritten) {
      try {
        const wrote = await finishRun(this.pool, runId, outcome);
        this.unwritten.delete(runId);
        this.log.info({ runId, status: outcome.status, wrote }, 'late verdict written');
      } catch (err) {
        this.log.warn({ runId, err: errorMessage(err) }, 'late verdict not written yet');
        return;
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The loop

  /**
   * Sleeps until the next fire. A timer wakes up to a few milliseconds late (Node's timer clock
   * steps by whole milliseconds, and runners and the server waking together on a small machine
   * take turns), and a fire's lag starts there: so the timer is set WAKE_AHEAD_MS early and the
   * last stretch is polled on the event loop (`setImmediate`, which lets I/O through) until the
   * instant has come by the database's clock.
   */
  private arm(): void {
    this.disarm();
    if (this.stopping) return;
    const next = this.schedule.sleepMs(this.dbNow());
    // Never a poll without end: an instant that is not a number would never come.
    const sleepMs = Number.isFinite(next) ? next : MAX_SLEEP_MS;
    this.nextWakeBy = performance.now() + sleepMs;
    if (sleepMs > WAKE_AHEAD_MS) {
      this.timer = setTimeout(() => this.wake(), sleepMs - WAKE_AHEAD_MS);
    } else {
      this.polling = setImmediate(() => this.wake());
    }
  }

  private disarm(): void {
    clearTimeout(this.timer);
    clearImmediate(this.polling);
  }

  private polling: NodeJS.Immediate | undefined;

  /** When the loop planned to wake next (performance.now()), for the health check. */
  private nextWakeBy = performance.now();
  private lastWakeAt = performance.now();

  private wake(): void {
    this.lastWakeAt = performance.now();
    // Recompute from the clock at every wake: timers drift, hosts get suspended.
    this.dispatchDue(this.dbNow());
    this.arm();
  }

  private dispatchDue(now: Date): void {
    const { due, missed } = this.schedule.take(now);
    for (const m of missed) {
      this.log.warn(
        { job: m.job, firstMissed: m.first, resumedAt: m.resumedAt },
        'fires missed: the runner woke too late to run them',
      );
      this.options.events?.fireNotAttempted(m.job, 'late-wake');
    }
    // Fires of the same instant in an order of this runner's own: the runners then mostly
    // contend for different jobs first, instead of all queueing on the same lock one by one.
    for (const fire of shuffleWithinInstant(due)) this.dispatch(fire, 'schedule');
  }

  private dispatch(fire: DueFire, trigger: Trigger): void {
    const job = this.jobs.get(fire.job);
    if (!job) return;
    if (fire.lateMs > LATE_WAKE_WARN_MS && trigger === 'schedule') {
      this.log.warn(
        { job: job.name, scheduledAt: fire.scheduledAt, lateMs: fire.lateMs },
        'late wake',
      );
    }
    const previous = this.chains.get(job.name) ?? Promise.resolve();
    const next = previous.then(() => this.fire(job, fire.scheduledAt, trigger));
    this.chains.set(job.name, next);
  }

  /** Contends for one fire; resolves once contention is settled (the run may go on). */
  private async fire(job: JobDefinition, scheduledAt: Date, trigger: Trigger): Promise<void> {
    if (this.stopping) return;
    const log = this.log.child({ job: job.name, scheduledAt, trigger });
    const pool = this.pool;
    if (!this.lock?.usable || !pool) {
      // Nobody can prove it is alone: not running is the safe side. Recovery looks back later.
      log.warn('fire not run: no connection to the database to coordinate it');
      this.options.events?.fireNotAttempted(job.name, 'no-database');
      return;
    }

    const local = this.latestLocalRun(job.name);
    let runningHere: Date | null = null;
    let queueUntil: Date | null = null;
    if (job.overlap === 'skip' && local) runningHere = local.scheduledAt;
    if (job.overlap === 'queue') {
      queueUntil = this.schedules.get(job.name)?.nextAfter(scheduledAt) ?? null;
      if (local) await this.waitForLocalRun(local, queueUntil);
      const still = this.latestLocalRun(job.name);
      if (still) runningHere = still.scheduledAt;
    }
    if (this.stopping) return;

    let database: DatabaseTarget | null = null;
    try {
      if (job.target.kind === 'module') {
        database = jobDatabase(this.config, job, this.options.target);
      }
    } catch (err) {
      log.error({ err: errorMessage(err) }, 'fire not run: its database connection is unusable');
      return;
    }
    const events = this.options.events;
    // A queued fire may wait for its lock until the next fire: it must not hold a place that
    // others need meanwhile (its polls are one statement every QUEUE_POLL_MS).
    const release = job.overlap === 'queue' ? () => {} : await this.contentions.acquire();
    if (this.stopping) {
      release();
      return;
    }
    // Taken only now: a queued fire, or one that waited for its place, may have waited across
    // a reconnect.
    const lock = this.lock;
    if (!lock?.usable) {
      release();
      log.warn('fire not run: no connection to the database to coordinate it');
      this.options.events?.fireNotAttempted(job.name, 'no-database');
      return;
    }
    await new Promise<void>((settled) => {
      let active: ActiveRun | undefined;
      let startedAt = 0;
      const work = runFire(this.coordinator(lock, pool), job, scheduledAt, {
        trigger,
        database,
        withholdEnv: connectionVariables(this.config),
        overlap: job.overlap,
        // A paused job is skipped at its next fire on every runner (checked with the lock).
        pauseCheck: true,
        runningHere,
        queueUntil,
        signal: this.stopSignal.signal,
        onStart: (control, fire, contendMs) => {
          active = { job: job.name, scheduledAt, control, finished: work.then(() => {}) };
          this.active.add(active);
          startedAt = performance.now();
          const lagMs =
            trigger === 'schedule' ? this.dbNow().getTime() - scheduledAt.getTime() : null;
          events?.fireWon(job.name, job.overlap === 'queue' ? null : contendMs, lagMs);
          log.info({ runId: fire.runId, jobPid: control.pid }, 'fire won: running');
          // The session may have died between GET_LOCK and now (the claim runs on the pool):
          // its loss handler did not see this run, so it is aborted here.
          if (lock !== this.lock || !lock.usable) {
            control.stop(
              `lost: the runner's lock session ended while the run was being claimed ` +
                `(${lock.lossReason ?? 'replaced'})`,
              LOST_KILL_GRACE_MS,
              'lost',
            );
          }
          // A fire won while a stop begins is waited for like any other run: stop() lets
          // contention settle before it decides what to wait for (within the grace).
          settled();
        },
        onUnwrittenVerdict: (runId, outcome) => {
          this.unwritten.set(runId, outcome);
          log.warn({ runId, status: outcome.status }, 'verdict kept: the database did not answer');
        },
      })
        .then((outcome) => {
          if (!outcome.ran) {
            const contendMs = job.overlap === 'queue' ? null : outcome.contendMs;
            events?.fireSkipped(job.name, outcome.reason, contendMs);
            log.info({ runId: outcome.runId, reason: outcome.reason }, 'fire skipped');
            return;
          }
          const { result } = outcome;
          events?.runFinished(job.name, result.status, performance.now() - startedAt);
          log[result.status === 'done' ? 'info' : 'warn'](
            {
              runId: outcome.runId,
              status: result.status,
              exitCode: result.exitCode,
              attempts: outcome.attempts,
              error: result.error,
            },
            'run finished',
          );
        })
        .catch((err: unknown) => {
          if (err instanceof ReadOnlyDatabaseError) {
            this.onReadOnly(true);
            log.error('fire not run: the database is read-only');
            events?.fireNotAttempted(job.name, 'read-only');
            return;
          }
          if (!active && !lock.usable) {
            // The session died while this fire was being contended: like a fire that found no
            // session (the loss itself is logged once, as an error).
            log.warn(
              { err: errorMessage(err) },
              'fire not run: the lock session was lost while it was contended',
            );
            events?.fireNotAttempted(job.name, 'no-database');
            return;
          }
          // Usually the database (it cannot record or coordinate the fire); the message says.
          log.error({ err: errorMessage(err) }, 'fire not completed');
          // Only contention that failed: a run that started and lost its verdict was counted won.
          if (!active) events?.fireNotAttempted(job.name, 'error');
        })
        .finally(() => {
          if (active) this.active.delete(active);
          this.inflight.delete(work);
          settled();
        });
      this.inflight.add(work);
    }).finally(release);
  }

  private latestLocalRun(job: string): ActiveRun | undefined {
    let latest: ActiveRun | undefined;
    for (const run of this.active) {
      if (run.job === job && (!latest || run.scheduledAt > latest.scheduledAt)) latest = run;
    }
    return latest;
  }

  /** `overlap: queue`: waits for this runner's own run of the job, at most until `until`. */
  private async waitForLocalRun(run: ActiveRun, until: Date | null): Promise<void> {
    const waits: Promise<unknown>[] = [run.finished, this.stopped()];
    if (until) waits.push(this.sleep(until.getTime() - this.dbNow().getTime()));
    await Promise.race(waits);
  }

  // ---------------------------------------------------------------------------------------------
  // What the HTTP endpoint reads (src/http): read-only views, never a handle to change anything

  /**
   * For `/healthz`: the loop wakes when planned, the lock session answers its heartbeats, the
   * database takes writes, and the pool (which every fire's rows go through) answers too — it can
   * fail on its own (max_connections reached) while the long-lived lock session stays up.
   */
  async health(): Promise<RunnerHealth> {
    const problems: string[] = [];
    if (this.stopping) problems.push('the runner is stopping');
    const overdueMs = performance.now() - this.nextWakeBy;
    if (overdueMs > LOOP_STUCK_MS) {
      problems.push(`the scheduler loop is stuck: its wake is ${Math.round(overdueMs)} ms overdue`);
    }
    if (!this.coordinated) {
      problems.push(
        `no usable connection to the database: ${
          this.lock?.lossReason ?? (this.everConnected ? 'reconnecting' : 'not connected yet')
        }`,
      );
    } else if (this.readOnly) {
      problems.push('the database is read-only: no fire runs until it is writable');
    } else if (this.pool) {
      try {
        await this.pool.query('SELECT 1');
      } catch (err) {
        problems.push(`the database does not answer on the pool: ${errorMessage(err)}`);
      }
    }
    return { healthy: problems.length === 0, problems };
  }

  gauges(): RunnerGauges {
    return {
      databaseUp: this.coordinated,
      readOnly: this.readOnly,
      clockOffsetMs: this.lock?.clockOffsetMs == null ? null : -this.lock.clockOffsetMs,
      runningRuns: this.active.size,
      jobsLoaded: this.jobs.size,
      sinceLastWakeMs: performance.now() - this.lastWakeAt,
    };
  }

  /** The schedule as loaded (a reload replaces it). */
  get loadedConfig(): Config {
    return this.config;
  }

  /** The pool, while connected: for reads only. */
  get readPool(): Queryable | null {
    return this.coordinated ? this.pool : null;
  }

  /** Now by the database's clock (see dbNow). */
  databaseNow(): Date {
    return this.dbNow();
  }

  /** The job's next fire by this runner's schedule; null for a job it does not run. */
  nextFire(job: string): Date | null {
    return this.schedule.nextFire(job);
  }

  // ---------------------------------------------------------------------------------------------
  // The fleet's clock and the registry

  /**
   * Now, by the database's clock: this host's clock corrected by the offset the lock session's
   * heartbeats measure. Every runner fires by this clock, so all wake together whatever their
   * skew, and none starts a fire before its instant by the database (DESIGN.md, "Time").
   */
  private dbNow(): Date {
    const measured = this.lock?.databaseNow();
    if (measured) {
      this.offsetMs = measured.getTime() - Date.now();
      return measured;
    }
    return new Date(Date.now() + this.offsetMs);
  }

  /** A moment of this host's clock on the database's clock. */
  private dbTime(local: Date): Date {
    return new Date(local.getTime() + this.offsetMs);
  }

  /** The database's clock minus this host's; kept across reconnects. */
  private offsetMs = 0;
  private offsetWarned = false;

  private heartbeat(withSchedule = true): RunnerHeartbeat {
    return {
      namespace: this.config.namespace,
      host: this.options.host,
      pid: process.pid,
      version,
      // The registry says how far the runner is ahead of the database, the way operators ask.
      clockOffsetMs: this.lock?.clockOffsetMs == null ? null : -this.lock.clockOffsetMs,
      lockConnectionId: this.lock?.connectionId ?? null,
      schedule: withSchedule ? this.loadedJobs() : {},
    };
  }

  /** Every job of the file with its fingerprint and since when this runner runs it. */
  private loadedJobs(): Record<string, LoadedJob> {
    const prints = this.fingerprints;
    return Object.fromEntries(
      Object.entries(prints).map(([job, fp]) => [
        job,
        { fp, since: this.knownSince.get(job)?.toISOString() ?? null },
      ]),
    );
  }

  private hostClashReported = false;

  /**
   * Registers at start, refreshes afterwards. A row that another live process took over means
   * two runners share one host id — history could not tell them apart — so that is reported,
   * not fought over: the row is taken back only when its owner is gone.
   */
  private async register(fresh: boolean, withSchedule = true): Promise<void> {
    if (!this.pool) return;
    const { namespace } = this.config;
    try {
      if (fresh) {
        const owner = await registryOwner(this.pool, namespace, this.options.host);
        if (owner?.alive && owner.pid !== process.pid) this.reportHostClash(owner.pid);
        await registerRunner(this.pool, this.heartbeat());
        return;
      }
      if (await heartbeatRunner(this.pool, this.heartbeat(withSchedule), { withSchedule })) return;
      const owner = await registryOwner(this.pool, namespace, this.options.host);
      if (owner?.alive) {
        this.reportHostClash(owner.pid);
        return;
      }
      await registerRunner(this.pool, this.heartbeat());
    } catch (err) {
      this.log.warn({ err: errorMessage(err) }, 'could not register in baton_runners');
    }
  }

  private reportHostClash(otherPid: number): void {
    if (this.hostClashReported) return;
    this.hostClashReported = true;
    this.log.error(
      { otherPid },
      `another runner uses the host id "${this.options.host}" (pid ${otherPid}): give every ` +
        'runner its own --host, or history and status cannot tell them apart',
    );
  }

  private armRegistryHeartbeat(): void {
    if (this.registryTimer || this.stopping) return;
    const every = this.options.registryMs ?? DEFAULT_REGISTRY_MS;
    const tick = () => {
      if (this.stopping) return;
      this.registryTimer = setTimeout(() => {
        void this.refreshRegistry().finally(tick);
      }, every);
    };
    tick();
  }

  private async refreshRegistry(): Promise<void> {
    this.checkClockOffset();
    if (this.stopping || !this.coordinated) return;
    // The schedule only changes on reload, which registers it at once.
    await this.register(false, false);
  }

  /** Warns once when this host's clock drifts beyond the threshold, and once when it is back. */
  private checkClockOffset(): void {
    const offset = this.lock?.clockOffsetMs;
    if (offset == null) return;
    const threshold = this.options.clockWarnMs ?? DEFAULT_CLOCK_WARN_MS;
    const over = Math.abs(offset) > threshold;
    if (over && !this.offsetWarned) {
      this.log.warn(
        { clockOffsetMs: -offset, thresholdMs: threshold },
        "this host's clock is off from the database's: fires still run on database time",
      );
    } else if (!over && this.offsetWarned) {
      this.log.info({ clockOffsetMs: -offset }, "this host's clock is back within the threshold");
    }
    this.offsetWarned = over;
  }

  // ---------------------------------------------------------------------------------------------
  // Reaper and recovery

  private armReaper(): void {
    if (this.reaperTimer || this.stopping) return;
    const every = this.options.reaperMs ?? DEFAULT_REAPER_MS;
    const tick = () => {
      if (this.stopping) return;
      this.reaperTimer = setTimeout(() => {
        void this.reap().finally(tick);
      }, every);
    };
    tick();
  }

  private async reap(): Promise<void> {
    if (this.stopping || !this.coordinated || !this.pool) return;
    // Verdicts that a pool hiccup left unwritten, while the lock session stayed up.
    await this.writeUnwrittenVerdicts();
    try {
      await reapOrphanRuns(
        this.pool,
        {
          namespace: this.config.namespace,
          serverStartedBefore: this.serverStartedBefore,
          noticedBy: this.options.host,
        },
        this.log,
      );
    } catch (err) {
      this.log.warn({ err: errorMessage(err) }, 'reaper could not check running rows');
    }
  }

  /**
   * After (re)connecting: catch up the latest unrun fire where `catchUp` allows it, then record
   * the fires nobody attempted as `missed` (see recovery.ts).
   */
  private async recover(now: Date): Promise<void> {
    const pool = this.pool;
    if (!pool) return;
    const namespace = this.config.namespace;
    const plans: { job: JobDefinition; fires: Date[]; from: Date; caughtUp: Date | null }[] = [];
    try {
      const firsts = await firstFiresOf(pool, namespace, [...this.jobs.keys()]);
      for (const job of this.jobs.values()) {
        const schedule = this.schedules.get(job.name);
        if (!schedule) continue;
        const first = firsts.get(job.name) ?? null;
        const loaded = this.knownSince.get(job.name) ?? this.dbTime(this.startedAt);
        const knownSince = first && first < loaded ? first : loaded;
        const { fires, from } = lookBack(job, schedule, now, knownSince);
        if (fires.length === 0) continue;
        let caughtUp: Date | null = null;
        const latest = fires.at(-1)!;
        // Only a fire nobody attempted is caught up: one that runners skipped on purpose (the
        // previous run was still going, the job was paused) stays skipped.
        const untouched = !(await firesWithRows(pool, namespace, job.name, latest, latest)).size;
        if (job.catchUpMs != null && untouched) {
          caughtUp = latest;
          this.log.info({ job: job.name, scheduledAt: latest }, 'catching up a missed fire');
          this.dispatch({ job: job.name, scheduledAt: latest, lateMs: 0 }, 'catchup');
        }
        plans.push({ job, fires, from, caughtUp });
      }
      await this.sleep(MISSED_SETTLE_MS);
      if (this.stopping || !this.coordinated) return;
      for (const { job, fires, from, caughtUp } of plans) {
        const seen = await firesWithRows(pool, namespace, job.name, from, now);
        let recorded = 0;
        for (const at of fires) {
          if (seen.has(at.getTime()) || at.getTime() === caughtUp?.getTime()) continue;
          const attempt = {
            namespace,
            job: job.name,
            scheduledAt: at,
            trigger: 'schedule' as const,
            host: this.options.host,
            pid: process.pid,
          };
          const reason =
            'nobody attempted this fire: no runner was connected to the database at the time ' +
            `(it was down or unreachable, or the runners were starting; recorded by ${this.options.host})`;
          if (await insertMissed(pool, attempt, reason)) recorded++;
        }
        if (recorded > 0) {
          this.log.warn({ job: job.name, count: recorded }, 'missed fires recorded');
          this.options.events?.firesMissed(job.name, recorded);
        }
      }
    } catch (err) {
      this.log.warn({ err: errorMessage(err) }, 'could not look back for missed fires');
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Reload and stop

  /**
   * Replaces the schedule with `config` (SIGHUP). Fires due by now are dispatched under the old
   * schedule first, so none falls between the two. Running runs finish under the definition they
   * started with; removed jobs stop firing; new jobs fire from their next instant.
   */
  reload(config: Config): { added: string[]; removed: string[]; changed: string[] } {
    if (config.namespace !== this.config.namespace) {
      throw new BatonError(
        'RELOAD_NAMESPACE',
        `the namespace changed (${this.config.namespace} → ${config.namespace}); a namespace ` +
          'change needs a restart',
        ExitCode.Config,
      );
    }
    const now = this.dbNow();
    this.disarm();
    this.dispatchDue(now);
    const before = this.jobs;
    this.config = config;
    this.retention?.update(config.retention);
    this.applyConfig(config, now);
    this.arm();
    const added = [...this.jobs.keys()].filter((j) => !before.has(j));
    const removed = [...before.keys()].filter((j) => !this.jobs.has(j));
    // The registry shows the new schedule at once (drift warnings follow the reload).
    if (this.coordinated) void this.register(false);
    const changed = [...this.jobs.keys()].filter(
      (j) => before.has(j) && JSON.stringify(before.get(j)) !== JSON.stringify(this.jobs.get(j)),
    );
    return { added, removed, changed };
  }

  private applyConfig(config: Config, now: Date): void {
    const jobs = new Map(config.jobs.filter((j) => j.enabled).map((j) => [j.name, j]));
    const schedules = new Map<string, Schedule>();
    for (const job of jobs.values()) {
      schedules.set(job.name, parseSchedule(job.schedule, job.timezone));
    }
    // A job (or a job whose schedule changed) is known from now on: recovery never looks back
    // before this for it, unless the history knows it from earlier.
    const known = new Map<string, Date>();
    for (const job of jobs.values()) {
      const before = this.jobs.get(job.name);
      const same = before?.schedule === job.schedule && before.timezone === job.timezone;
      known.set(job.name, (same && this.knownSince.get(job.name)) || now);
    }
    // Swapped together: the loop never sees one without the other.
    this.fingerprints = scheduleFingerprint(config);
    this.knownSince = known;
    this.jobs = jobs;
    this.schedules = schedules;
    this.schedule = new FireSchedule(schedules, now);
  }

  private stopRun(run: ActiveRun, why: string, force = false): void {
    run.control.stop(`interrupted: ${why}`, force ? 0 : KILL_GRACE_MS, 'interrupted');
  }

  /**
   * Stops taking fires, waits up to the grace for running jobs, then stops them (recorded
   * `interrupted`), releases every lock and closes the connections. `force` skips the wait.
   */
  async stop(reason: string, force = false): Promise<void> {
    const first = !this.stopping;
    this.stopping = true;
    this.stopSignal.abort();
    this.disarm();
    clearTimeout(this.reaperTimer);
    clearTimeout(this.registryTimer);
    // Let contention in progress settle first: a fire that wins right now must be in `active`
    // before we decide what to wait for and what to stop. No new fire starts once stopping.
    await Promise.allSettled([...this.chains.values()]);
    if (first && !force && this.active.size > 0) {
      this.log.info(
        { running: [...this.active].map((r) => r.job), graceMs: this.options.graceMs },
        'stopping: waiting for running jobs',
      );
      let graceTimer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.inflight]),
        new Promise((r) => (graceTimer = setTimeout(r, this.options.graceMs))),
        // A second signal (stop with force) ends the wait early.
        new Promise((r) => (this.forceStop = r)),
      ]);
      // A pending timer would keep the process alive after the runner has stopped.
      clearTimeout(graceTimer);
    }
    if (force) this.forceStop?.();
    for (const run of this.active) {
      this.log.warn({ job: run.job }, 'stopping a running job');
      this.stopRun(run, `the runner stopped (${reason})`, force);
    }
    await Promise.allSettled([...this.inflight]);
    if (!first) return;
    for (const t of this.pendingTimers) clearTimeout(t);
    // A connect in flight finishes (or gives up) before the connections are closed under it.
    await this.connecting?.catch(() => {});
    await this.retention?.stop();
    await this.writeUnwrittenVerdicts();
    if (this.pool && this.everConnected) {
      await markRunnerStopped(
        this.pool,
        this.config.namespace,
        this.options.host,
        process.pid,
      ).catch(() => {});
    }
    await this.lock?.close();
    await this.pool?.end().catch(() => {});
    this.log.info('runner stopped');
  }

  private forceStop: ((value?: unknown) => void) | null = null;

  /** A sleep that the runner's stop cuts short. */
  private sleep(ms: number): Promise<void> {
    if (ms <= 0 || this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      this.pendingTimers.add(timer);
      const onStop = () => done();
      this.stopSignal.signal.addEventListener('abort', onStop, { once: true });
      const pending = this.pendingTimers;
      const signal = this.stopSignal.signal;
      function done() {
        clearTimeout(timer);
        pending.delete(timer);
        signal.removeEventListener('abort', onStop);
        resolve();
      }
    });
  }

  private stopped(): Promise<void> {
    if (this.stopping) return Promise.resolve();
    return new Promise((resolve) =>
      this.stopSignal.signal.addEventListener('abort', () => resolve(), { once: true }),
    );
  }
}

/**
 * The lock session's server-side idle timeout: the default minute, or ten heartbeat windows when
 * heartbeats are configured to be slow — the server must never end a session that is merely
 * between two heartbeats.
 */
function lockSessionIdleTimeoutSeconds(o: RunnerOptions): number {
  const window =
    (o.heartbeatMs ?? DEFAULT_HEARTBEAT_MS) +
    (o.heartbeatDeadlineMs ?? DEFAULT_HEARTBEAT_DEADLINE_MS);
  return Math.max(LOCK_SESSION_IDLE_TIMEOUT_SECONDS, Math.ceil((10 * window) / 1000));
}

/** Errors worth waiting out at start-up: the server is down or unreachable, not misconfigured. */
function isTransient(err: unknown): boolean {
  if (err instanceof StatementTimeoutError) return true;
  const cause = err instanceof Error ? err.cause : undefined;
  for (const e of [err, cause]) {
    if (!isUnreachableDbError(e) && !isRetryableDbError(e)) continue;
    const code = (e as { code?: string }).code;
    // A wrong password, a missing database or an unknown host name will not fix themselves.
    if (
      code === 'ER_ACCESS_DENIED_ERROR' ||
      code === 'ER_DBACCESS_DENIED_ERROR' ||
      code === 'ER_BAD_DB_ERROR' ||
      code === 'ENOTFOUND'
    ) {
      return false;
    }
    return true;
  }
  return false;
}
