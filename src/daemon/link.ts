/**
 * The runner's link to the database: the pool (history statements) and the lock session (every
 * lock), opened together, kept up, and reopened after a loss.
 *
 * - **Unreachable** at start-up or later: the runner keeps running and does not run what it
 *   cannot coordinate; the link tries to reconnect every 0.5–1 s (RECONNECT_FIRST_MS doubling to
 *   a cap of RECONNECT_MAX_MS, each wait jittered: see `reconnectDelayMs`), so that it is back
 *   within about a second of the server answering again, and logs the outage at warn level on
 *   its first failure, on a change of error and then every RECONNECT_LOG_EVERY_MS (debug for the
 *   attempts in between). At start-up, an error that waiting cannot fix (bad credentials, an
 *   unsupported server, a schema this code does not know) is thrown instead; later it is retried
 *   like any other (an operator may fix the grants while the runner waits).
 * - **Silent** link under an attempt (a VIP moved, a firewall dropping one connection's packets:
 *   no FIN, no RST): every statement of an attempt has a deadline — the connect timeout, the
 *   check's (`poolStatementDeadlineMs`), the lock session's — so the attempt fails and the next
 *   one comes; none waits for TCP to give up (e2e/reconnect-stall.test.ts).
 * - **Lost** lock session (KILL, server restart, partition — found by the heartbeat within
 *   `heartbeatMs + heartbeatDeadlineMs`): every lock it held is gone, so every run this process
 *   has going is aborted (recorded `lost`; SIGTERM, SIGKILL after LOST_KILL_GRACE_MS), then the
 *   link reconnects.
 * - **The lost session ended**: once reconnected, the runner KILLs its lost session on the server if
 *   it is still there (a dropped link), so that its locks do not outlive it by the idle timeout.
 * - **Read-only** server (a demoted primary): no fire runs until it is writable again.
 * - **Another server** after a reconnect (a failover: a promoted replica behind the same name):
 *   found, and the run ids moved past the old primary's, by failover.ts; reported (`db:failover`)
 *   and handed to `onConnected`, so that recovery treats the fires up to the loss as in doubt
 *   (recovery.ts). Its fires are held until the fleet is seen on the new server (fleet-watch.ts:
 *   a split brain, as far as it can tell).
 * - **The runs' lease** (execution/run-lease.ts): renewed at every answered heartbeat, revoked at
 *   a loss. The spawner and the watchdogs stop the runs when it lapses, so that a runner that
 *   stalls cannot leave its jobs running beyond the bound once its session is gone.
 *
 * What the runner does once connected (its loop on database time, the registry, recovery) is
 * the runner's: it is told through `onConnected`.
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { DatabaseTarget } from '../config/database-url.js';
import type { LockCapability } from '../coordination/lock-probe.js';
import { openCoordination, POOL_STATEMENT_DEADLINE_MS } from '../coordination/open-coordination.js';
import {
  DEFAULT_HEARTBEAT_DEADLINE_MS,
  DEFAULT_HEARTBEAT_MS,
  LOCK_SESSION_IDLE_TIMEOUT_SECONDS,
  LOCK_STATEMENT_DEADLINE_MS,
  type LockSession,
} from '../coordination/lock-session.js';
import type { FireContext } from '../coordination/fire-protocol.js';
import { delay } from '../delay.js';
import { errorMessage, isTransientDbError } from '../errors.js';
import { RunLease } from '../execution/run-lease.js';
import type { LocalRuns } from '../fire/local-runs.js';
import type { Logger } from '../log.js';
import { openPool } from '../store/connect.js';
import type { KeepAlive } from '../keep-alive.js';
import { DeadlinePool } from '../store/deadline.js';
import type { RunnerEvents } from './runner-events.js';
import { FailoverWatch, type Failover } from './failover.js';
import { FleetWatch, type FleetWatchTimings } from './fleet-watch.js';

export type { Failover } from './failover.js';

/**
 * Reconnect pacing. Every fire between the server answering again and the runner's next attempt
 * is lost (`missed`), so the cap is low: a runner is back within RECONNECT_MAX_MS (plus the
 * connect itself) of the server's return, not the 30 s an uncapped doubling reaches in a long
 * outage. A low cap is affordable because an attempt against a down server is cheap: the first
 * step of `openCoordination` is a single connect, refused at once (measured on the 2-core VM:
 * 1.1 ms of the runner's time per refused attempt, 0.19 ms for a bare TCP connect), so a separate
 * probe before the full open would save ~1 ms a second per runner and cost an extra connection
 * on every attempt that succeeds. Behind a partition each attempt waits out the connect timeout
 * (5 s) instead, one at a time.
 */
const RECONNECT_FIRST_MS = 200;
const RECONNECT_MAX_MS = 1_000;
/** A long outage is logged at warn level at most this often (and on a change of error). */
const RECONNECT_LOG_EVERY_MS = 30_000;
/**
 * The longest a lost session is left alone for its aborted runs to end (they get SIGKILL after
 * LOST_KILL_GRACE_MS; their verdicts may wait on the pool's deadline).
 */
const LOST_SESSION_WAIT_MS = 15_000;

/** The link's pace; the runner sets it (timings.ts), these are the defaults. */
export interface LinkTimings {
  /** Time between lock-session heartbeats (`baton start --heartbeat`). */
  heartbeatMs: number;
  /** A heartbeat unanswered this long means the session is lost (`--heartbeat-deadline`). */
  heartbeatDeadlineMs: number;
  /** RECONNECT_FIRST_MS and RECONNECT_MAX_MS: the reconnect's back-off (reconnectDelayMs). */
  reconnectFirstMs: number;
  reconnectMaxMs: number;
  /** RECONNECT_LOG_EVERY_MS: a long outage is logged at warn level at most this often. */
  reconnectLogEveryMs: number;
  /** LOST_SESSION_WAIT_MS: a lost session's aborted runs are waited for at most this long. */
  lostSessionWaitMs: number;
  /**
   * POOL_STATEMENT_DEADLINE_MS (coordination/open-coordination.ts): each pool statement, and each
   * of a connect's server check and ledger read.
   */
  poolStatementDeadlineMs: number;
  /** LOCK_STATEMENT_DEADLINE_MS (coordination/lock-session.ts): each lock-session statement. */
  lockStatementDeadlineMs: number;
}

export const LINK_TIMINGS: Readonly<LinkTimings> = {
  heartbeatMs: DEFAULT_HEARTBEAT_MS,
  heartbeatDeadlineMs: DEFAULT_HEARTBEAT_DEADLINE_MS,
  reconnectFirstMs: RECONNECT_FIRST_MS,
  reconnectMaxMs: RECONNECT_MAX_MS,
  reconnectLogEveryMs: RECONNECT_LOG_EVERY_MS,
  lostSessionWaitMs: LOST_SESSION_WAIT_MS,
  poolStatementDeadlineMs: POOL_STATEMENT_DEADLINE_MS,
  lockStatementDeadlineMs: LOCK_STATEMENT_DEADLINE_MS,
};

/**
 * The wait before reconnect attempt `attempt + 1` (0: after the first failure): "equal jitter",
 * a random point in the upper half of the doubling, capped base — [100, 200] ms, then [200, 400],
 * [400, 800], then [500, 1000] ms for as long as the outage lasts.
 *
 * Jitter, because a server restart ends every runner's lock session at the same instant: without
 * it the whole fleet would retry, and reconnect (migrations check, server check, lock session,
 * recovery), in lockstep. Equal rather than "full" jitter (a random point in [0, base]): full
 * jitter may wait ~0 ms, so a runner's attempt rate against a refusing server has no floor,
 * while equal jitter keeps each runner at ≤ 2 attempts a second at the cap and still spreads the
 * fleet's attempts over half the interval — and a few attempts in, their phases are scattered
 * across the whole of it.
 */
export function reconnectDelayMs(
  attempt: number,
  random: () => number = Math.random,
  t: Pick<LinkTimings, 'reconnectFirstMs' | 'reconnectMaxMs'> = LINK_TIMINGS,
): number {
  const base = Math.min(t.reconnectFirstMs * 2 ** Math.min(attempt, 20), t.reconnectMaxMs);
  return Math.round(base / 2 + random() * (base / 2));
}

export interface LinkOptions {
  target: DatabaseTarget;
  /** This runner's host id and namespace: its fleet in the registry (fleet-watch.ts). */
  host: string;
  namespace: () => string;
  log: Logger;
  events: RunnerEvents;
  /** This process's runs: a lost lock session aborts them all. */
  runs: LocalRuns;
  /** The runner stopping: no reconnect, no more waiting. */
  signal: AbortSignal;
  /** LINK_TIMINGS when not given. */
  timings?: LinkTimings;
  /** The fleet watch's pace (fleet-watch.ts: FLEET_WATCH_TIMINGS when not given). */
  fleetTimings?: FleetWatchTimings;
  /** Whether its connections, heartbeat and sleeps hold the process (keep-alive.ts). */
  keepAlive?: KeepAlive;
  /**
   * Called after each connect, before the link counts as up (`first`: the runner's first;
   * `failover`: the last failover this runner lived through, from the connect that reached the
   * new server on — a link that drops again before the recovery after the failover wrote its
   * in-doubt rows comes back to the same server, and those fires must still not be caught up).
   */
  onConnected: (first: boolean, failover: Failover | null) => Promise<void>;
}

export class DatabaseLink {
  private pool: DeadlinePool | null = null;
  private session: LockSession | null = null;
  private connecting: Promise<boolean> | null = null;
  private everConnectedOnce = false;
  private readOnlyNow = false;
  /** When the connected server started (rounded early): the reaper's test for old rows. */
  private serverStarted = new Date(0);
  /** The session lost last, until it is ended on the server (see `endLostSession`). */
  private lostSession: {
    connectionId: number;
    tokenLock: string;
    runsOver: Promise<unknown>;
  } | null = null;
  /** What the current server's named locks can do (coordination/lock-probe.ts). */
  private lockCapability: LockCapability | null = null;
  /** Which server this is, and the failovers between servers (failover.ts). */
  private readonly failovers: FailoverWatch;
  /** The lease this runner's runs go on under (see the header). */
  readonly lease: RunLease;
  /** After a failover: is the fleet on this server too (fleet-watch.ts)? */
  readonly fleet: FleetWatch;

  private readonly t: LinkTimings;

  constructor(private readonly o: LinkOptions) {
    this.t = o.timings ?? LINK_TIMINGS;
    this.fleet = new FleetWatch({
      ...o,
      pool: () => (this.usable ? this.pool : null),
      readOnly: () => this.readOnlyNow,
      timings: o.fleetTimings,
    });
    this.lease = new RunLease(this.t.heartbeatMs + this.t.heartbeatDeadlineMs);
    this.failovers = new FailoverWatch({
      database: o.target.database,
      host: o.host,
      log: o.log,
      heartbeatMs: this.t.heartbeatMs,
      heartbeatDeadlineMs: this.t.heartbeatDeadlineMs,
      ...(o.keepAlive ? { keepAlive: o.keepAlive } : {}),
    });
  }

  /** True while the lock session is up: fires can be coordinated. */
  get usable(): boolean {
    return this.session?.usable === true;
  }

  get lock(): LockSession | null {
    return this.session;
  }

  /** The pool, once opened (it outlives reconnects); for statements that need no lock. */
  get anyPool(): DeadlinePool | null {
    return this.pool;
  }

  get everConnected(): boolean {
    return this.everConnectedOnce;
  }

  get readOnly(): boolean {
    return this.readOnlyNow;
  }

  /** Which server the runner talks (or last talked) to: `ServerFacts.identity`. */
  get serverIdentity(): string | null {
    return this.failovers.serverIdentity;
  }

  /** What the connected server's named locks can do; null before the first connect. */
  get locks(): LockCapability | null {
    return this.lockCapability;
  }

  get serverStartedBefore(): Date {
    return this.serverStarted;
  }

  /** Why there is no usable lock session, for `/healthz`. */
  get downReason(): string {
    return (
      this.session?.lossReason ?? (this.everConnectedOnce ? 'reconnecting' : 'not connected yet')
    );
  }

  /** Handles on the database for one fire; null while there is no usable lock session. */
  fireContext(who: Omit<FireContext, 'pool' | 'lock'>): FireContext | null {
    const lock = this.session;
    // Held after a failover until the fleet is seen on this server (fleet-watch.ts).
    if (!lock?.usable || !this.pool || this.fleet.state !== 'with-fleet') return null;
    return { ...who, pool: this.pool, lock };
  }

  /**
   * Connects (single-flight), retrying every 0.5–1 s (`reconnectDelayMs`). At start-up
   * (`firstStart`) errors that a retry cannot fix are thrown; later they are logged and retried
   * too (an operator may fix the grants or the server while the runner waits). Resolves false
   * when stopped first.
   */
  connect(firstStart = false): Promise<boolean> {
    const { signal, log } = this.o;
    this.connecting ??= (async () => {
      const since = performance.now();
      let warnedAt = -Infinity;
      let lastError: string | null = null;
      for (let attempt = 0; !signal.aborted; attempt++) {
        try {
          await this.open({ attempts: attempt + 1, downMs: Math.round(performance.now() - since) });
          // The new session may already have died (a flapping network): then try again, or
          // nobody would — a loss reported meanwhile found this reconnect still in flight.
          if (signal.aborted || this.session?.usable) return !signal.aborted;
          throw new Error(this.session?.lossReason ?? 'the new lock session was lost at once');
        } catch (err) {
          if (signal.aborted) return false;
          if (firstStart && !isTransientDbError(err)) throw err;
          const retryInMs = reconnectDelayMs(attempt, Math.random, this.t);
          // A warn line for the first failure, for a different error (digits aside: ports,
          // connection ids), and every RECONNECT_LOG_EVERY_MS of a long outage; the attempts in
          // between at debug level — at ~1.5 attempts a second, a warn each would flood the
          // journal (some 5,000 lines an hour per runner).
          const message = errorMessage(err);
          const kind = message.replace(/\d+/g, 'N');
          const now = performance.now();
          const loud = kind !== lastError || now - warnedAt >= this.t.reconnectLogEveryMs;
          lastError = kind;
          if (loud) warnedAt = now;
          log[loud ? 'warn' : 'debug'](
            {
              err: message,
              attempt: attempt + 1,
              downMs: Math.round(now - since),
              retryInMs,
            },
            this.everConnectedOnce
              ? 'database unavailable: reconnecting'
              : 'database unavailable: waiting for it',
          );
          await delay(retryInMs, signal, this.o.keepAlive);
        }
      }
      return false;
    })().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  /** `attempts`, `downMs`: of this connect so far, for the "reopened" line. */
  private async open(tries: { attempts: number; downMs: number }): Promise<void> {
    const { target, log } = this.o;
    this.pool ??= new DeadlinePool(
      openPool(target, undefined, this.o.keepAlive ? { keepAlive: this.o.keepAlive } : {}),
      this.t.poolStatementDeadlineMs,
    );
    const { lock, facts, locks, applied } = await openCoordination(target, this.pool, {
      idleTimeoutSeconds: lockSessionIdleTimeoutSeconds(this.t),
      lockStatementDeadlineMs: this.t.lockStatementDeadlineMs,
      checkDeadlineMs: this.t.poolStatementDeadlineMs,
      ...(this.o.keepAlive ? { keepAlive: this.o.keepAlive } : {}),
    });
    if (applied.length > 0) log.info({ applied }, 'migrations applied');
    // Told at the first connect, and again when a reconnect finds a server that differs.
    const told = this.lockCapability?.warnings.join('\n').replace(/\d+/g, 'N');
    this.lockCapability = locks;
    if (locks.warnings.join('\n').replace(/\d+/g, 'N') !== told) {
      for (const warning of locks.warnings) {
        log.warn({ server: locks.engine, warning }, 'database server: coordination degraded');
      }
    }
    const serverStartedBefore = await lock.serverStartedBefore().catch((err: unknown) => {
      void lock.close();
      throw err;
    });
    // A stop that came while connecting owns the shutdown: this session must not outlive it.
    if (this.o.signal.aborted) {
      await lock.close();
      return;
    }
    // Another server than the last session's: a failover (a promoted replica behind the name).
    // Before this runner contends for anything on the new server, no run id that the old primary
    // may have handed out can be handed out again (failover.ts). Until that is done the runner is
    // not connected, and tries again like any connect.
    let failedOverFrom: string | null;
    try {
      failedOverFrom = await this.failovers.prepare(lock, this.pool, facts);
    } catch (err) {
      await lock.close();
      throw err;
    }
    this.serverStarted = serverStartedBefore;
    this.session = lock;
    const lost = this.lostSession;
    this.lostSession = null;
    if (lost) void this.endLostSession(lost);
    const first = !this.everConnectedOnce;
    this.everConnectedOnce = true;
    const failover: Failover | null = this.failovers.arrived(failedOverFrom, facts);
    this.fleet.start();
    const beatMs = this.t.heartbeatMs;
    const current = () => this.session === lock && lock.usable;
    await this.failovers.watchSemiSync(this.pool, facts.identity, current, this.o.signal);
    if (first) {
      log.debug(
        { server: facts.version, serverIdentity: facts.identity, gtid: facts.gtidPosition },
        'database server checked',
      );
    } else {
      log.warn({ lockConnectionId: lock.connectionId, ...tries }, 'lock session reopened');
    }
    if (failover) {
      this.o.events.emit('db:failover', failover);
      this.fleet.arrived(failover.from, failover.to, failover.lostAt);
    }
    if (facts.readOnly) this.noteReadOnly(true);
    lock.watch({
      intervalMs: beatMs,
      deadlineMs: this.t.heartbeatDeadlineMs,
      onLost: (reason) => this.lost(lock, reason),
      onAlive: () => {
        if (lock === this.session) this.lease.renew();
      },
      onReadOnly: (readOnly) => this.noteReadOnly(readOnly),
    });
    await this.o.onConnected(first, this.failovers.last);
  }

  /**
   * The database is read-only (or writable again), as the server check, a heartbeat or a refused
   * GET_LOCK found: told once per change.
   */
  private noteReadOnly(readOnly: boolean): void {
    if (readOnly === this.readOnlyNow) return;
    this.readOnlyNow = readOnly;
    this.o.events.emit('db:readOnly', { readOnly });
  }

  /**
   * The lock session died: every lock this runner held is gone, so its runs no longer exclude
   * anyone. Abort them (recorded `lost`) and reconnect.
   */
  private lost(lock: LockSession, reason: string): void {
    if (lock !== this.session) return;
    this.failovers.sessionLost();
    // Every run, also those already being stopped: their kill grace shrinks to the lost one.
    const running = [...this.o.runs];
    this.o.events.emit('lock:lost', {
      reason,
      lockConnectionId: lock.connectionId,
      aborting: running.map((r) => r.job),
    });
    this.o.runs.abortAll(
      `lost: the runner's lock session ended (${reason}); the run was aborted because its ` +
        'lock no longer kept other runners out',
    );
    // After the abort, so that the runs are recorded with the loss's reason, not the lease's.
    this.lease.revoke();
    this.lostSession = {
      connectionId: lock.connectionId,
      tokenLock: lock.tokenLockName,
      runsOver: Promise.allSettled(running.map((r) => r.finished)),
    };
    // A stopping runner does not reconnect; its aborted runs' verdicts are written if the
    // database still answers the pool.
    if (!this.o.signal.aborted) void this.connect();
  }

  /**
   * Ends the lost session on the server, once this runner is back. A session lost to a dropped
   * link (no FIN, no RST) lives on on the server, and with it every lock it held, until its idle
   * timeout — a minute of fires that every runner skips for a run that was aborted long ago. The
   * runner knows that session is dead: once its aborted runs are over (never before, or the lock
   * would be freed under a job still in its kill grace), it KILLs it. A user may KILL its own
   * connections without any privilege. It is identified by the token lock only it held
   * (`LockSession.tokenLockName`), never by its connection id alone, which a restarted server
   * may have given to another runner's session.
   */
  private async endLostSession(lost: NonNullable<DatabaseLink['lostSession']>): Promise<void> {
    const { log } = this.o;
    await Promise.race([
      lost.runsOver,
      delay(this.t.lostSessionWaitMs, this.o.signal, this.o.keepAlive),
    ]).catch(() => {});
    const pool = this.pool;
    if (!pool || this.o.signal.aborted) return;
    try {
      const [[row]] = await pool.query<RowDataPacket[]>('SELECT IS_USED_LOCK(?) AS holder', [
        lost.tokenLock,
      ]);
      if (Number(row?.holder) !== lost.connectionId) return;
      await pool.query('KILL CONNECTION ?', [lost.connectionId]);
      log.info({ lockConnectionId: lost.connectionId }, 'lost lock session ended on the server');
    } catch (err) {
      // Gone meanwhile, or no such privilege on this server: its idle timeout ends it.
      log.debug({ err: errorMessage(err) }, 'lost lock session not ended');
    }
  }

  /** Waits for a connect in flight: it finishes (or gives up) before the link is closed. */
  async settle(): Promise<void> {
    await this.connecting?.catch(() => {});
  }

  async closeSession(): Promise<void> {
    await this.session?.close();
  }

  async closePool(): Promise<void> {
    await this.pool?.end().catch(() => {});
  }
}

/**
 * The lock session's server-side idle timeout: the default minute, or ten heartbeat windows when
 * heartbeats are configured to be slow — the server must never end a session that is merely
 * between two heartbeats.
 */
function lockSessionIdleTimeoutSeconds(t: LinkTimings): number {
  const window = t.heartbeatMs + t.heartbeatDeadlineMs;
  return Math.max(LOCK_SESSION_IDLE_TIMEOUT_SECONDS, Math.ceil((10 * window) / 1000));
}
