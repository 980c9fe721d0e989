/**
 * Opening connections to the baton database: the pool for history reads and writes, and single
 * connections for the lock session and migrations (a named lock belongs to the session that took
 * it, so lock statements never run on the pool — see `src/coordination/lock-session.ts`).
 *
 * Every session runs in UTC (`time_zone = '+00:00'`) and mysql2 reads DATETIME(3) as UTC, so an
 * instant is the same on every host whatever its local zone.
 */
import mysql, { type Connection, type ConnectionOptions, type Pool } from 'mysql2/promise';
import { DatabaseUnavailableError, dbErrorCode, errorMessage } from '../errors.js';
import type { DatabaseTarget } from '../config/database-url.js';
import { HOLDS_PROCESS, type KeepAlive } from '../keep-alive.js';
import { queryWithDeadline } from './deadline.js';

/**
 * How long a connection may take to open: the handshake (mysql2's `connectTimeout`) and, for a
 * single connection, its session set-up. A link that goes silent in between would otherwise keep
 * the opener waiting until TCP gives up, a quarter of an hour.
 */
export const CONNECT_TIMEOUT_MS = 5_000;

const COMMON: ConnectionOptions = {
  timezone: 'Z',
  dateStrings: false,
  supportBigNumbers: true,
  bigNumberStrings: false,
  charset: 'utf8mb4_unicode_ci',
  connectTimeout: CONNECT_TIMEOUT_MS,
  multipleStatements: false,
};

const SESSION_SETUP = "SET time_zone = '+00:00'";

function options(target: DatabaseTarget, withDatabase = true): ConnectionOptions {
  return {
    ...COMMON,
    ...target.connection,
    ...(withDatabase ? { database: target.database } : {}),
  };
}

/** Turns a driver error into a message that names the server (never its password). */
export function unavailable(target: DatabaseTarget, err: unknown): DatabaseUnavailableError {
  const code = dbErrorCode(err);
  const detail = errorMessage(err) || code || 'unknown error';
  return new DatabaseUnavailableError(`cannot use the database at ${target.display}: ${detail}`, {
    cause: err,
  });
}

/**
 * A single connection in UTC. Creates the database when it is missing (unless `create` is false:
 * read-only commands then get ER_BAD_DB_ERROR as a DatabaseUnavailableError). Throws
 * DatabaseUnavailableError when it cannot connect. Its socket holds the process as `keepAlive`
 * (its opener's root's policy, keep-alive.ts) says.
 */
export async function openConnection(
  target: DatabaseTarget,
  { create = true, keepAlive = HOLDS_PROCESS }: { create?: boolean; keepAlive?: KeepAlive } = {},
): Promise<Connection> {
  let conn: Connection;
  try {
    conn = await mysql.createConnection(options(target));
  } catch (err) {
    if (create && dbErrorCode(err) === 'ER_BAD_DB_ERROR') {
      await createDatabase(target);
      return openConnection(target, { create: false, keepAlive });
    }
    throw unavailable(target, err);
  }
  // A connection error after connect (server restart, KILL) must not crash the process as an
  // unhandled 'error' event; callers notice through failing queries.
  conn.on('error', () => {});
  backgroundSocket((conn as unknown as { connection: RawConnection }).connection, keepAlive);
  try {
    await queryWithDeadline(conn, SESSION_SETUP, [], CONNECT_TIMEOUT_MS);
  } catch (err) {
    conn.destroy();
    throw err;
  }
  return conn;
}

/** mysql2's callback connection under a promise one, and its socket: not in mysql2's types. */
type RawConnection = { stream?: { unref(): unknown } };

/** The connection's socket is background work (keep-alive.ts): unref'd when the app decides. */
function backgroundSocket(conn: RawConnection, keepAlive: KeepAlive): void {
  if (conn.stream) keepAlive.background(conn.stream);
}

/**
 * The pool for everything that is not a named lock. Every new connection is set to UTC; its
 * socket holds the process as `keepAlive` says.
 */
export function openPool(
  target: DatabaseTarget,
  size = 4,
  { keepAlive = HOLDS_PROCESS }: { keepAlive?: KeepAlive } = {},
): Pool {
  const pool = mysql.createPool({
    ...options(target),
    connectionLimit: size,
    maxIdle: size,
    idleTimeout: 60_000,
    enableKeepAlive: true,
  });
  pool.pool.on('connection', (conn) => {
    backgroundSocket(conn as unknown as RawConnection, keepAlive);
    // Queued before any query the pool hands this connection out for.
    conn.query(SESSION_SETUP, () => {});
  });
  return pool;
}

/**
 * `CREATE DATABASE IF NOT EXISTS`, for a fresh server. Needs the CREATE privilege; a user
 * without it gets a clear "cannot use the database" error and should have the DBA create it.
 */
async function createDatabase(target: DatabaseTarget): Promise<void> {
  let conn: Connection | undefined;
  try {
    conn = await mysql.createConnection(options(target, false));
    await conn.query(
      'CREATE DATABASE IF NOT EXISTS ?? CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci',
      [target.database],
    );
  } catch (err) {
    throw unavailable(target, err);
  } finally {
    await conn?.end().catch(() => {});
  }
}
