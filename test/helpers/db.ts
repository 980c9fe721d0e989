/**
 * A database of its own for each test file, on the shared MariaDB (or BATON_TEST_DATABASE_URL's
 * server), dropped at the end. Named locks are server-wide; baton scopes lock names by database,
 * so files running in parallel never block each other.
 */
import { randomBytes } from 'node:crypto';
import mysql, { type Connection, type RowDataPacket } from 'mysql2/promise';

const SERVER_URL = process.env.BATON_TEST_SERVER_URL ?? 'mysql://root@127.0.0.1:3306';

/** The shared test server's address, for a proxy in front of it. */
export function sharedServerAddress(): { host: string; port: number } {
  const url = new URL(SERVER_URL);
  return { host: url.hostname, port: Number(url.port || 3306) };
}

export interface TestDatabase {
  name: string;
  /** `--database-url` for baton. */
  url: string;
  /** A connection to the test database, in UTC. */
  conn: Connection;
  query<T = RowDataPacket>(sql: string, params?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

export async function createTestDatabase(
  label: string,
  serverUrl = SERVER_URL,
): Promise<TestDatabase> {
  const name = `baton_t_${label.replace(/\W/g, '_')}_${randomBytes(4).toString('hex')}`.slice(
    0,
    64,
  );
  const admin = await mysql.createConnection({ uri: serverUrl });
  await admin.query('CREATE DATABASE ??', [name]);
  await admin.end();
  const url = `${serverUrl.replace(/\/$/, '')}/${name}`;
  const conn = await mysql.createConnection({ uri: url, timezone: 'Z' });
  await conn.query("SET time_zone = '+00:00'");
  return {
    name,
    url,
    conn,
    async query<T>(sql: string, params: unknown[] = []) {
      const [rows] = await conn.query(sql, params);
      return rows as T[];
    },
    async drop() {
      await conn.query('DROP DATABASE IF EXISTS ??', [name]);
      await conn.end();
    },
  };
}

/** A row of baton_runs as the tests read it. */
export interface RunRow {
  id: number;
  job: string;
  scheduled_at: Date;
  winner: number | null;
  triggered_by: string;
  status: string;
  reason: string | null;
  host: string;
  pid: number | null;
  started_at: Date;
  finished_at: Date | null;
  exit_code: number | null;
  error: string | null;
  output_tail: string | null;
}

/**
 * The attempts of a job (or of all jobs): every row but `missed` ones. A runner records a fire
 * that came while every runner was still connecting as `missed`; tests about contention look at
 * the fires that were attempted. Tests about missed fires use `allRuns`.
 */
export async function runs(db: TestDatabase, job?: string): Promise<RunRow[]> {
  return (await allRuns(db, job)).filter((r) => r.status !== 'missed');
}

/** Every row of a job (or of all jobs), `missed` ones included. */
export function allRuns(db: TestDatabase, job?: string): Promise<RunRow[]> {
  return job == null
    ? db.query<RunRow>('SELECT * FROM baton_runs ORDER BY scheduled_at, id')
    : db.query<RunRow>('SELECT * FROM baton_runs WHERE job = ? ORDER BY scheduled_at, id', [job]);
}

/** Rows grouped by fire instant (ms since epoch), in order. */
export function byFire(rows: RunRow[]): Map<number, RunRow[]> {
  const fires = new Map<number, RunRow[]>();
  for (const row of rows) {
    const key = row.scheduled_at.getTime();
    fires.set(key, [...(fires.get(key) ?? []), row]);
  }
  return fires;
}

/**
 * The next instant of an `everyMs` grid (10_000: the instants of a job every ten seconds) at least
 * `marginMs` away by the database's clock, with the database's now — both in ms since the epoch.
 */
export async function nextGridInstant(
  db: TestDatabase,
  everyMs: number,
  marginMs: number,
): Promise<{ instant: number; now: number }> {
  const [row] = await db.query<{ now: number }>('SELECT UNIX_TIMESTAMP(NOW(3)) * 1000 AS now');
  const now = Number(row!.now);
  let instant = Math.ceil(now / everyMs) * everyMs;
  if (instant - now < marginMs) instant += everyMs;
  return { instant, now };
}
