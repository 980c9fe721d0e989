/**
 * Which server a helper talks to, and what that server's SQL can say. MySQL and MariaDB split
 * after 5.7/10.x: MySQL 8.0.19 added the row alias for upserts (`VALUES (…) AS new … c =
 * new.c`) and deprecated `VALUES(c)` in 8.0.20; MariaDB keeps `VALUES(c)` and has no row alias.
 * `FOR UPDATE SKIP LOCKED` came in MySQL 8.0 and MariaDB 10.6.
 *
 * Asked once per pool (or connection) with `SELECT VERSION(), @@version_comment` and cached;
 * the parsing is a pure function so both flavours are unit-tested without both servers.
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { Db } from './connection.js';
import { UnsupportedServerFeatureError } from './errors.js';

export interface ServerInfo {
  flavor: 'mysql' | 'mariadb';
  /** `VERSION()` as the server reports it. */
  version: string;
  major: number;
  minor: number;
  patch: number;
  /** `FOR UPDATE SKIP LOCKED`: MySQL ≥ 8.0, MariaDB ≥ 10.6. */
  skipLocked: boolean;
  /** `INSERT … AS new ON DUPLICATE KEY UPDATE c = new.c`: MySQL ≥ 8.0.19 only. */
  rowAlias: boolean;
  /** A binary collation without PAD SPACE, for keys where `'a'` and `'a '` must differ. */
  exactCollation: string;
}

/** Parses `VERSION()` (and `@@version_comment`): `10.11.6-MariaDB-log`, `8.0.36`, `8.0.36-28`. */
export function parseServerVersion(version: string, comment = ''): ServerInfo {
  const mariadb = /mariadb/i.test(version) || /mariadb/i.test(comment);
  // Old MariaDB replication handshakes prefix a fake "5.5.5-"; VERSION() does not, but be safe.
  const text = mariadb ? version.replace(/^5\.5\.5-/, '') : version;
  const m = /^(\d+)\.(\d+)(?:\.(\d+))?/.exec(text);
  const major = Number(m?.[1] ?? 0);
  const minor = Number(m?.[2] ?? 0);
  // An unreadable patch level (Aurora's "8.0.mysql_aurora.3.05.2") counts as 0: the older
  // feature set, which is still correct SQL.
  const patch = Number(m?.[3] ?? 0);
  const atLeast = (a: number, b: number, c: number) =>
    major !== a ? major > a : minor !== b ? minor > b : patch >= c;
  return {
    flavor: mariadb ? 'mariadb' : 'mysql',
    version,
    major,
    minor,
    patch,
    // MySQL: 8.0.1 (a milestone); every GA 8.0 (8.0.11+) has it, so 8.0 is enough.
    skipLocked: mariadb ? atLeast(10, 6, 0) : atLeast(8, 0, 0),
    rowAlias: !mariadb && atLeast(8, 0, 19),
    exactCollation: mariadb
      ? atLeast(10, 2, 0)
        ? 'utf8mb4_nopad_bin'
        : 'utf8mb4_bin'
      : atLeast(8, 0, 0)
        ? 'utf8mb4_0900_bin'
        : 'utf8mb4_bin',
  };
}

const cache = new WeakMap<object, Promise<ServerInfo>>();

/**
 * The server behind `db`, asked once and cached per pool (per underlying connection for a
 * connection: mysql2 wraps a pooled connection in a new object each time it is taken).
 */
export function serverInfo(db: Db): Promise<ServerInfo> {
  const handle = db as { pool?: object; connection?: object };
  const cacheKey = handle.pool ?? handle.connection ?? db;
  let info = cache.get(cacheKey);
  if (!info) {
    info = (async () => {
      const [rows] = await db.query<RowDataPacket[]>(
        'SELECT VERSION() AS version, @@version_comment AS comment',
      );
      const row = rows[0];
      return parseServerVersion(String(row?.version ?? ''), String(row?.comment ?? ''));
    })();
    cache.set(cacheKey, info);
    // A failed probe (connection lost) is not remembered.
    info.catch(() => cache.delete(cacheKey));
  }
  return info;
}

/** Throws a clear error on a server without SKIP LOCKED. */
export function assertSkipLocked(info: ServerInfo): void {
  if (info.skipLocked) return;
  const name = info.flavor === 'mariadb' ? 'MariaDB' : 'MySQL';
  throw new UnsupportedServerFeatureError(
    `FOR UPDATE SKIP LOCKED needs MariaDB 10.6+ or MySQL 8.0+; this server is ${name} ` +
      `${info.version}. Claim rows with claimRows instead (one UPDATE … LIMIT, works on every ` +
      'version), or upgrade the server.',
  );
}
