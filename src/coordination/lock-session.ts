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
 * this class refuses to acquire a name it already holds: one RELEASE_LOCK must free the lock.
 */
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { BatonError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import { openConnection } from '../store/connect.js';
import type { DatabaseTarget } from '../store/database-url.js';

/** Seven days: longer than any batch; a dead runner's session still ends at once (socket closed). */
export const LOCK_SESSION_WAIT_TIMEOUT_SECONDS = 7 * 24 * 3600;

export class LockSession {
  private readonly held = new Set<string>();
  private broken = false;

  private constructor(
    private readonly conn: Connection,
    /** `CONNECTION_ID()` of this session, recorded on winning rows so a reaper can check them. */
    readonly connectionId: number,
  ) {
    const markBroken = () => {
      this.broken = true;
    };
    conn.on('error', markBroken);
    conn.on('end', markBroken);
  }

  static async open(target: DatabaseTarget): Promise<LockSession> {
    const conn = await openConnection(target);
    // The session sits idle while a long job runs (a daily-only runner issues nothing for a day).
    // A server-side idle timeout (wait_timeout, often lowered by DBAs) would end it and free the
    // job's lock under the running job. Losing the session must mean the runner is gone, not
    // that it was quiet.
    await conn.query('SET SESSION wait_timeout = ?', [LOCK_SESSION_WAIT_TIMEOUT_SECONDS]);
    const [[row]] = await conn.query<RowDataPacket[]>('SELECT CONNECTION_ID() AS id');
    return new LockSession(conn, Number(row?.id));
  }

  /** False once the driver reported the connection closed or failed. */
  get usable(): boolean {
    return !this.broken;
  }

  holds(name: string): boolean {
    return this.held.has(name);
  }

  get heldCount(): number {
    return this.held.size;
  }

  /**
   * `GET_LOCK(name, waitSeconds)`: true when acquired, false when another session holds it.
   * GET_LOCK returns NULL only on an error (killed session, out of memory): that is thrown, never
   * taken for "someone else holds it".
   */
  async tryAcquire(name: string, waitSeconds = 0): Promise<boolean> {
    if (this.held.has(name)) {
      throw new BatonError(
        'LOCK_REENTRY',
        `internal error: lock ${name} is already held by this session (GET_LOCK would nest)`,
        ExitCode.Software,
      );
    }
    const [[row]] = await this.conn.query<RowDataPacket[]>('SELECT GET_LOCK(?, ?) AS got', [
      name,
      waitSeconds,
    ]);
    const got = row?.got as number | null | undefined;
    if (got == null) throw new Error(`GET_LOCK(${name}) returned NULL: the lock session failed`);
    if (got === 1) this.held.add(name);
    return got === 1;
  }

  /**
   * `RELEASE_LOCK(name)`; true when this session held it. If the release fails while the session
   * lives on (a killed query, a timeout), the lock might still be held — and forgetting it would
   * let the next GET_LOCK nest. So a failed release ends the session: the server then frees
   * every lock it held, and the runner opens a new one.
   */
  async release(name: string): Promise<boolean> {
    this.held.delete(name);
    try {
      const [[row]] = await this.conn.query<RowDataPacket[]>('SELECT RELEASE_LOCK(?) AS released', [
        name,
      ]);
      return row?.released === 1;
    } catch (err) {
      this.destroy();
      throw err;
    }
  }

  /** Drops the connection at once; the server frees its locks. */
  destroy(): void {
    this.broken = true;
    this.held.clear();
    this.conn.destroy();
  }

  /** The connection id holding `name` on the server, or null when it is free. */
  async holderOf(name: string): Promise<number | null> {
    const [[row]] = await this.conn.query<RowDataPacket[]>('SELECT IS_USED_LOCK(?) AS holder', [
      name,
    ]);
    return row?.holder == null ? null : Number(row.holder);
  }

  /**
   * Cancels the statement this session is running (a GET_LOCK that waits), from a connection of
   * its own: `KILL QUERY` makes the wait end at once instead of acquiring the lock later.
   */
  async interruptQuery(target: DatabaseTarget): Promise<void> {
    const killer = await openConnection(target, { create: false });
    try {
      await killer.query('KILL QUERY ?', [this.connectionId]);
    } finally {
      await killer.end().catch(() => {});
    }
  }

  /** The database's clock, `NOW(3)` in UTC. */
  async now(): Promise<Date> {
    const [[row]] = await this.conn.query<RowDataPacket[]>('SELECT NOW(3) AS now');
    return row?.now as Date;
  }

  /** Releases everything and closes; safe to call on a broken session. */
  async close(): Promise<void> {
    if (!this.broken) {
      await this.conn.query('SELECT RELEASE_ALL_LOCKS()').catch(() => {});
      await this.conn.end().catch(() => {});
    }
    this.destroy();
  }
}
