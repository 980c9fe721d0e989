/**
 * The lock session: one dedicated MySQL connection per runner that holds all its GET_LOCKs.
 *
 * Why not the pool: a named lock belongs to the session that took it. RELEASE_LOCK on another
 * connection is a silent no-op, and a pooled connection handed back to other work would keep the
 * lock alive by accident. Why one connection for all jobs: `GET_LOCK(name, 0)` never waits, so
 * a single session serves every job cheaply, and its death frees every lock this runner held —
 * exactly the liveness signal other runners need.
 *
 * GET_LOCK is re-entrant within a session (MySQL 5.7+ and MariaDB count nested acquisitions), so
 * this class never asks the server for a name it already holds or is asking for: one RELEASE_LOCK
 * must free the lock. Such an ask is another fire of this runner meeting a run of the same job
 * here (two backfills of one range, an operator's run beside the scheduled fire): to it the lock
 * is busy, as it would be if another runner held it — and an ask that may wait waits for this
 * session to let the name go, then asks the server for what is left of its wait.
 *
 * Liveness, both ways:
 * - The session holds a lock on itself (`baton-session:<connection id>`) for as long as it lives,
 *   so anyone can check whether the runner of a `running` row is still there (the reaper).
 * - The runner watches the session (`watch`): a heartbeat at a short interval with a client-side
 *   deadline (a server behind a partition never answers and never closes the socket), plus the
 *   driver's connection events. The session's `wait_timeout` is far longer than that deadline, so
 *   a runner cut off from the server gives up its jobs long before the server would free their
 *   locks for someone else.
 *
 * The heartbeat is never starved. The driver sends one statement after another, so a heartbeat
 * handed to it behind the GET_LOCKs of many fires at once would miss its deadline on a healthy
 * server and end every run of the runner. Every statement therefore waits for its turn in the
 * session's own queue (`statement-queue.ts`), which hands the driver at most two at a time, and a
 * heartbeat goes to the front of it: it waits for those two, never for the backlog.
 *
 * Each heartbeat also reads the server's clock (`NOW(3)`). The session keeps the estimate of how
 * far that clock is from this host's (`clock-offset.ts`), so that the runner fires by the
 * database's clock and records its times on it.
 */
import { randomBytes } from 'node:crypto';
import type { Connection, QueryValues, RowDataPacket } from 'mysql2/promise';
import { BatonError } from '../errors.js';
import { HOLDS_PROCESS, type KeepAlive } from '../keep-alive.js';
import { ExitCode } from '../exit-codes.js';
import { openConnection } from '../store/connect.js';
import type { DatabaseTarget } from '../config/database-url.js';
import { queryWithDeadline, StatementTimeoutError, withDeadline } from '../store/deadline.js';
import { Batcher, type BatchResult } from '../store/batcher.js';
import { sessionLockName } from '../lock-names.js';
import { OffsetEstimator } from './clock-offset.js';
import { StatementQueue } from './statement-queue.js';

/**
 * The lock session's server-side idle timeout. The session is never idle for long — it heartbeats
 * every second or so — so this only ends sessions whose runner can no longer talk to the server:
 * a crashed host, a partition. Then the server frees the runner's locks after this long, instead
 * of after TCP keepalive gives up (two hours and more). It is far above the heartbeat deadline, so
 * a runner that is cut off has aborted its jobs long before its locks are handed to anyone else.
 */
export const LOCK_SESSION_IDLE_TIMEOUT_SECONDS = 60;
/** Time between heartbeats of a watched lock session (`baton start --heartbeat`). */
export const DEFAULT_HEARTBEAT_MS = 1_000;
/** An unanswered heartbeat means a lost session after this long (`--heartbeat-deadline`). */
export const DEFAULT_HEARTBEAT_DEADLINE_MS = 3_000;
/** Deadline of the lock session's own statements (GET_LOCK(…, 0), RELEASE_LOCK, heartbeats). */
export const LOCK_STATEMENT_DEADLINE_MS = 3_000;

/** The server is read-only (a demoted primary): GET_LOCK there coordinates nobody. */
export class ReadOnlyDatabaseError extends BatonError {
  constructor() {
    super(
      'DATABASE_READ_ONLY',
      'the database is read-only (read_only = ON; a demoted primary?): baton does not run jobs ' +
        'there, because a lock on this server excludes no one; point the runners at the primary',
      ExitCode.Unavailable,
    );
  }
}

export interface WatchOptions {
  /** Time between heartbeats. */
  intervalMs: number;
  /** A heartbeat without an answer by then means the session is lost. */
  deadlineMs: number;
  /** Called once, when the session is found dead; it is destroyed by then. */
  onLost(reason: string): void;
  /** Called after every answered heartbeat: the session was alive a moment ago. */
  onAlive?: () => void;
  /** Called when `read_only` changes (and with the first heartbeat's value). */
  onReadOnly?(readOnly: boolean): void;
}

export class LockSession {
  private readonly held = new Set<string>();
  /** Every statement waits here for its turn (see the header); heartbeats go first. */
  private readonly queue = new StatementQueue(() => this.goneError());
  /** The database's clock, from the first statement and every heartbeat. */
  private readonly clock = new OffsetEstimator();
  private broken = false;
  private closing = false;
  private lostReason: string | null = null;
  private watcher: { timer: NodeJS.Timeout | undefined; options: WatchOptions } | null = null;
  private readOnly: boolean | null = null;

  /**
   * A lock this session alone holds, named with a random token: what tells this session apart
   * from a later one with the same connection id (a restarted server counts ids from 1 again),
   * also through a proxy. Its runner ends the session on the server by it after losing it
   * (daemon/link.ts).
   */
  readonly tokenLockName = `baton-token:${randomBytes(16).toString('hex')}`;

  private constructor(
    private readonly conn: Connection,
    /** `CONNECTION_ID()` of this session, recorded on winning rows so a reaper can check them. */
    readonly connectionId: number,
    /** Each statement's deadline (LOCK_STATEMENT_DEADLINE_MS unless the runner set another). */
    private readonly statementDeadlineMs: number,
    /** Whether its socket and heartbeat hold the process (its opener's root's, keep-alive.ts). */
    private readonly keepAlive: KeepAlive,
  ) {
    conn.on('error', (err: Error) => this.lose(`the connection failed: ${err.message}`));
    conn.on('end', () => this.lose('the server closed the connection'));
  }

  /**
   * Opens a session. `idleTimeoutSeconds` must stay well above the watcher's heartbeat interval
   * plus deadline (see LOCK_SESSION_IDLE_TIMEOUT_SECONDS), or the server would end a healthy
   * session between two heartbeats.
   */
  static async open(
    target: DatabaseTarget,
    idleTimeoutSeconds = LOCK_SESSION_IDLE_TIMEOUT_SECONDS,
    statementDeadlineMs = LOCK_STATEMENT_DEADLINE_MS,
    keepAlive: KeepAlive = HOLDS_PROCESS,
  ): Promise<LockSession> {
    const conn = await openConnection(target, { keepAlive });
    // Its statements have the deadline of every lock statement: a link that goes silent while
    // the session is set up fails the attempt (the caller tries again) instead of holding it.
    const query = <T>(sql: string, values: QueryValues = []) =>
      queryWithDeadline<T>(conn, sql, values, statementDeadlineMs);
    try {
      // Set explicitly: the server's default (often lowered by DBAs, or 8 hours) must not decide
      // how long a dead runner's locks outlive it.
      await query('SET SESSION wait_timeout = ?', [idleTimeoutSeconds]);
      const [[row]] = await query<RowDataPacket[]>('SELECT CONNECTION_ID() AS id');
      const id = Number(row?.id);
      const [[self]] = await query<RowDataPacket[]>('SELECT GET_LOCK(?, 0) AS got', [
        sessionLockName(id),
      ]);
      if (self?.got !== 1) throw new Error(`could not take the session lock of connection ${id}`);
      const session = new LockSession(conn, id, statementDeadlineMs, keepAlive);
      const [[token]] = await query<RowDataPacket[]>('SELECT GET_LOCK(?, 0) AS got', [
        session.tokenLockName,
      ]);
      if (token?.got !== 1) throw new Error(`could not take the token lock of connection ${id}`);
      // One clock sample before anyone uses the session: a runner must never fire by its own
      // clock, not even until the first heartbeat answers.
      const sentAt = session.clock.monotonicNow();
      const [[clock]] = await query<RowDataPacket[]>('SELECT NOW(3) AS now');
      session.clock.addSample(sentAt, session.clock.monotonicNow(), clock?.now as Date | undefined);
      return session;
    } catch (err) {
      conn.destroy();
      throw err;
    }
  }

  /** False once the connection is known to be closed, failed or unresponsive. */
  get usable(): boolean {
    return !this.broken;
  }

  /** Why the session was lost, once it was. */
  get lossReason(): string | null {
    return this.lostReason;
  }

  holds(name: string): boolean {
    return this.held.has(name);
  }

  get heldCount(): number {
    return this.held.size;
  }

  /** Starts the heartbeat. Connection events report a loss at once; the heartbeat bounds it. */
  watch(options: WatchOptions): void {
    this.watcher = { timer: undefined, options };
    if (this.broken) {
      options.onLost(this.lostReason ?? 'the session was already closed');
      return;
    }
    const beat = () => {
      if (!this.watcher || this.broken) return;
      // The deadline counts from now, with the wait for a turn included: a session whose queue
      // does not move is as lost as one that does not answer.
      let sentAt = 0;
      withDeadline(
        this.queue.run(() => {
          sentAt = this.clock.monotonicNow();
          return queryWithDeadline<RowDataPacket[]>(
            this.conn,
            'SELECT @@global.read_only AS ro, NOW(3) AS now',
            [],
            options.deadlineMs,
          );
        }, 'first'),
        options.deadlineMs,
        'heartbeat',
        () => this.conn.destroy(),
      ).then(
        ([[row]]) => {
          // The round trip from when the heartbeat was sent, not queued: the clock sample's error.
          this.clock.addSample(sentAt, this.clock.monotonicNow(), row?.now as Date);
          this.noteReadOnly(Number(row?.ro) === 1);
          if (!this.watcher) return;
          options.onAlive?.();
          this.watcher.timer = this.keepAlive.background(setTimeout(beat, options.intervalMs));
        },
        (err: unknown) =>
          this.lose(`the heartbeat failed: ${err instanceof Error ? err.message : String(err)}`),
      );
    };
    beat();
  }

  /** Now by the database's clock; null before the first sample. */
  databaseNow(): Date | null {
    return this.clock.databaseNow();
  }

  /** The database's clock minus this host's wall clock, in ms; null before the first sample. */
  get clockOffsetMs(): number | null {
    return this.clock.clockOffsetMs;
  }

  /** A moment of this host's wall clock on the database's clock; null before a sample. */
  toDatabaseTime(local: Date): Date | null {
    return this.clock.toDatabaseTime(local);
  }

  private goneError(): Error {
    return new Error(`the lock session is gone (${this.lostReason ?? 'closed'})`);
  }

  /** Marks the session dead (once), drops the connection and tells the watcher. */
  private lose(reason: string): void {
    if (this.broken || this.closing) return;
    this.broken = true;
    this.lostReason = reason;
    this.held.clear();
    this.conn.destroy();
    this.queue.close();
    if (this.watcher) {
      clearTimeout(this.watcher.timer);
      const { onLost } = this.watcher.options;
      this.watcher = null;
      onLost(reason);
    }
  }

  /** A statement on the session with a deadline; a missed deadline loses the session. */
  private async query<T>(
    sql: string,
    values: QueryValues,
    deadlineMs = this.statementDeadlineMs,
  ): Promise<T> {
    try {
      // The deadline starts when the statement is handed to the driver: time spent waiting for
      // a turn is this runner's own backlog, which the heartbeat's deadline already bounds.
      const [rows] = await this.queue.run(() =>
        queryWithDeadline<T>(this.conn, sql, values, deadlineMs),
      );
      return rows;
    } catch (err) {
      if (err instanceof StatementTimeoutError) this.lose(err.message);
      throw err;
    }
  }

  /**
   * `GET_LOCK(name, waitSeconds)`: true when acquired, false when another session holds it.
   * GET_LOCK returns NULL only on an error (killed session, out of memory): that is thrown, never
   * taken for "someone else holds it". On a read-only server the lock is not even asked for
   * (ReadOnlyDatabaseError): it would exclude nobody.
   *
   * Asks that do not wait (every scheduled fire) made in the same turn of the event loop go to
   * the server as one statement (batcher.ts): 500 jobs on one second are a handful of statements
   * on this session instead of 500, and the heartbeat never queues behind them.
   */
  async tryAcquire(name: string, waitSeconds = 0): Promise<boolean> {
    const deadline = Date.now() + waitSeconds * 1000;
    // Held or asked for here: busy, never nested (see the header). The wait, if any, is for
    // this session to let it go; another local ask may take it first, so the check loops.
    while (this.isThisSessions(name)) {
      if (!(await this.untilLetGoHere(name, deadline))) return false;
    }
    const left = waitSeconds > 0 ? Math.max(0, (deadline - Date.now()) / 1000) : 0;
    this.asking.add(name);
    try {
      return left > 0 ? await this.acquireWaiting(name, left) : await this.acquires.load(name);
    } finally {
      this.asking.delete(name);
      if (!this.isThisSessions(name)) this.letGo(name);
    }
  }

  /** Held, asked for or being released by this session: the server must not be asked for it. */
  private isThisSessions(name: string): boolean {
    return this.held.has(name) || this.asking.has(name) || this.releasing.has(name);
  }

  /** Names whose RELEASE_LOCK is sent and not answered yet. */
  private readonly releasing = new Set<string>();

  /** Local asks waiting for this session to let a name go (`untilLetGoHere`), by name. */
  private readonly localWaiters = new Map<string, Set<() => void>>();

  /**
   * Resolves true when this session no longer holds or asks for `name` (its release, or an ask
   * that did not get it), false at `deadline` (epoch ms) or at once when that has passed.
   */
  private untilLetGoHere(name: string, deadline: number): Promise<boolean> {
    const waitMs = deadline - Date.now();
    if (waitMs <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiters = this.localWaiters.get(name) ?? new Set<() => void>();
      this.localWaiters.set(name, waiters);
      const done = (letGo: boolean) => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (waiters.size === 0 && this.localWaiters.get(name) === waiters) {
          this.localWaiters.delete(name);
        }
        resolve(letGo);
      };
      const wake = () => done(true);
      const timer = setTimeout(() => done(false), waitMs);
      waiters.add(wake);
    });
  }

  /** Wakes the local asks waiting for `name` (each checks again: one of them may take it). */
  private letGo(name: string): void {
    for (const wake of [...(this.localWaiters.get(name) ?? [])]) wake();
  }

  /**
   * The first of `names` (a pool's slots, coordination/pool-slots.ts) that this session can
   * lock, taken; null when every one is held. One statement: a CASE asks for each in turn and
   * stops at the first it gets, so it never takes two. Each GET_LOCK is guarded by IS_FREE_LOCK,
   * which is 0 for a lock this very session holds: a slot another run of this runner holds is not
   * nested into (GET_LOCK would count it twice and hand it out again) — also between the asks of
   * several runs batched into one statement, whose columns the server evaluates in order. Names
   * this session is known to hold are not even sent.
   */
  async tryAcquireFirst(names: readonly string[]): Promise<string | null> {
    const candidates = names.filter((n) => !this.held.has(n));
    if (candidates.length === 0) return null;
    return this.firstAcquires.load(candidates);
  }

  /** Names asked for and not answered yet: asking twice would nest as surely as holding. */
  private readonly asking = new Set<string>();

  /** Asks of `tryAcquireFirst` made in the same turn, as one statement: a CASE column each. */
  private readonly firstAcquires = new Batcher<readonly string[], string | null>(async (asks) => {
    const columns = asks.map((names, i) => {
      const each = names
        .map((_, k) => `WHEN IS_FREE_LOCK(?) = 1 AND GET_LOCK(?, 0) = 1 THEN ${k + 1}`)
        .join(' ');
      return `CASE WHEN @@global.read_only THEN -1 ${each} ELSE 0 END AS f${i}`;
    });
    const values = asks.flatMap((names) => names.flatMap((n) => [n, n]));
    const [row] = await this.query<RowDataPacket[]>(`SELECT ${columns.join(', ')}`, values);
    const got = asks.map((_, i) => Number(row?.[`f${i}`] ?? 0));
    const taken = asks.map((names, i) => (got[i]! > 0 ? names[got[i]! - 1]! : null));
    for (const name of taken) if (name != null) this.held.add(name);
    if (got.includes(-1)) {
      await Promise.all(taken.flatMap((n) => (n == null ? [] : [this.release(n).catch(() => {})])));
      this.noteReadOnly(true);
      return asks.map(() => ({ error: new ReadOnlyDatabaseError() }));
    }
    return taken.map((value) => ({ value }));
  });

  /** A GET_LOCK that waits (`baton run --wait`), alone: it gets its wait on top of the deadline. */
  private async acquireWaiting(name: string, waitSeconds: number): Promise<boolean> {
    const sql = 'SELECT CASE WHEN @@global.read_only THEN -1 ELSE GET_LOCK(?, ?) END AS got';
    const [row] = await this.query<RowDataPacket[]>(
      sql,
      [name, waitSeconds],
      this.statementDeadlineMs + waitSeconds * 1000,
    );
    const [result] = await this.settleAcquired([name], [row?.got]);
    if ('error' in result!) throw result.error;
    return result!.value;
  }

  private readonly acquires = new Batcher<string, boolean>(async (names) => {
    const columns = names.map(
      (_, i) => `CASE WHEN @@global.read_only THEN -1 ELSE GET_LOCK(?, 0) END AS g${i}`,
    );
    const [row] = await this.query<RowDataPacket[]>(`SELECT ${columns.join(', ')}`, names);
    return this.settleAcquired(
      names,
      names.map((_, i) => row?.[`g${i}`]),
    );
  });

  /**
   * Turns GET_LOCK answers into results: 1 held (recorded), 0 busy, -1 read-only, NULL an error.
   * Read-only fails every ask of the statement, and gives back any lock it still took (the flag
   * flipped while the statement ran).
   */
  private async settleAcquired(
    names: string[],
    answers: unknown[],
  ): Promise<BatchResult<boolean>[]> {
    const got = answers.map((a) => (a == null ? null : Number(a)));
    for (const [i, g] of got.entries()) if (g === 1) this.held.add(names[i]!);
    if (got.includes(-1)) {
      const taken = names.filter((_, i) => got[i] === 1);
      await Promise.all(taken.map((n) => this.release(n).catch(() => {})));
      this.noteReadOnly(true);
      return names.map(() => ({ error: new ReadOnlyDatabaseError() }));
    }
    return names.map((n, i) =>
      got[i] == null
        ? { error: new Error(`GET_LOCK(${n}) returned NULL: the lock session failed`) }
        : { value: got[i] === 1 },
    );
  }
  /** Throws ReadOnlyDatabaseError on a read-only server (for fires that take no job lock). */
  async assertWritable(): Promise<void> {
    const [row] = await this.query<RowDataPacket[]>('SELECT @@global.read_only AS ro', []);
    if (Number(row?.ro) === 1) {
      this.noteReadOnly(true);
      throw new ReadOnlyDatabaseError();
    }
  }

  /**
   * What the session found out about the server's mode, by heartbeat or by a refused GET_LOCK:
   * the watcher hears of each change once, before any fire that met it reports it.
   */
  private noteReadOnly(readOnly: boolean): void {
    if (readOnly === this.readOnly) return;
    this.readOnly = readOnly;
    this.watcher?.options.onReadOnly?.(readOnly);
  }

  /**
   * `RELEASE_LOCK(name)`; true when this session held it. If the release fails while the session
   * lives on (a killed query, a timeout), the lock might still be held — and forgetting it would
   * let the next GET_LOCK nest. So a failed release ends the session: the server then frees
   * every lock it held, and the runner opens a new one.
   */
  async release(name: string): Promise<boolean> {
    this.held.delete(name);
    // Until the server has answered, the name is still this session's: a GET_LOCK sent before
    // this RELEASE_LOCK (a waiting one goes out at once, unbatched) would nest.
    this.releasing.add(name);
    return this.releases.load(name).finally(() => {
      this.releasing.delete(name);
      this.letGo(name);
    });
  }

  /** Releases of the same turn of the event loop, as one statement (see tryAcquire). */
  private readonly releases = new Batcher<string, boolean>(async (names) => {
    try {
      const columns = names.map((_, i) => `RELEASE_LOCK(?) AS r${i}`);
      const [row] = await this.query<RowDataPacket[]>(`SELECT ${columns.join(', ')}`, names);
      return names.map((_, i) => ({ value: row?.[`r${i}`] === 1 }));
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const what = names.length === 1 ? names[0] : `${names[0]} and ${names.length - 1} more`;
      this.lose(`releasing ${what} failed: ${message}`);
      throw err;
    }
  });

  /**
   * Cancels the statement this session is running (a GET_LOCK that waits), from a connection of
   * its own: `KILL QUERY` makes the wait end at once instead of acquiring the lock later.
   */
  async interruptQuery(target: DatabaseTarget): Promise<void> {
    const killer = await openConnection(target, { create: false, keepAlive: this.keepAlive });
    try {
      await killer.query('KILL QUERY ?', [this.connectionId]);
    } finally {
      await killer.end().catch(() => {});
    }
  }

  /** The database's clock, `NOW(3)` in UTC. */
  async now(): Promise<Date> {
    const [row] = await this.query<RowDataPacket[]>('SELECT NOW(3) AS now', []);
    return row?.now as Date;
  }

  /**
   * When the server started, rounded a second early (uptime has whole seconds). Rows that started
   * before it belong to sessions of an earlier server life, whatever their connection ids say.
   */
  async serverStartedBefore(): Promise<Date> {
    const [status] = await this.query<RowDataPacket[]>("SHOW GLOBAL STATUS LIKE 'Uptime'", []);
    const now = await this.now();
    const uptimeSeconds = Number(status?.Value ?? 0);
    return new Date(now.getTime() - (uptimeSeconds + 1) * 1000);
  }

  /** Drops the connection at once; the server frees its locks. Not reported as a loss. */
  destroy(): void {
    this.closing = true;
    this.stopWatching();
    this.broken = true;
    this.held.clear();
    this.conn.destroy();
    // Every statement not answered yet fails at once (see statement-queue.ts).
    this.queue.close();
  }

  private stopWatching(): void {
    if (this.watcher) clearTimeout(this.watcher.timer);
    this.watcher = null;
  }

  /** Releases everything and closes; safe to call on a broken session. Not reported as a loss. */
  async close(): Promise<void> {
    this.stopWatching();
    this.closing = true;
    if (!this.broken) {
      await withDeadline(
        this.conn.query('SELECT RELEASE_ALL_LOCKS()'),
        this.statementDeadlineMs,
        'release',
        () => {},
      ).catch(() => {});
      await withDeadline(this.conn.end(), this.statementDeadlineMs, 'close', () => {}).catch(
        () => {},
      );
    }
    this.destroy();
  }
}
