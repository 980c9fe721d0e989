/**
 * A database of its own for each test file, on the shared MariaDB (or BATON_TEST_DATABASE_URL's
 * server), dropped at the end. Named locks are server-wide; baton scopes lock names by database,
 * so files running in parallel never block each other.
 *
 * A database asked for `migrated` is a copy of the schema template (one database per set of
 * migrations, migrated once by global-setup.ts), not a migration of its own: copying the tables
 * takes a fraction of the time baton's 17 migrations do, and tests that make a database per test
 * pay it per test. test/unit/test-helpers.test.ts proves the copy equals a migration.
 */
import { createHash, randomBytes } from 'node:crypto';
import mysql, { type Connection, type ResultSetHeader, type RowDataPacket } from 'mysql2/promise';
import { loadMigrations, migrate } from '../../src/store/migrate.js';

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

export interface TestDatabaseOptions {
  /** The server; default the shared one. */
  serverUrl?: string;
  /**
   * Created with baton's current schema (as `baton migrate` leaves it), so that nothing migrates
   * it at start; default false: an empty database, which the first runner or CLI migrates.
   */
  migrated?: boolean;
}

export async function createTestDatabase(
  label: string,
  serverUrlOrOptions: string | TestDatabaseOptions = {},
): Promise<TestDatabase> {
  const options =
    typeof serverUrlOrOptions === 'string' ? { serverUrl: serverUrlOrOptions } : serverUrlOrOptions;
  const serverUrl = options.serverUrl ?? SERVER_URL;
  const name = `baton_t_${label.replace(/\W/g, '_')}_${randomBytes(4).toString('hex')}`.slice(
    0,
    64,
  );
  const admin = await mysql.createConnection({ uri: serverUrl });
  try {
    await admin.query('CREATE DATABASE ??', [name]);
    if (options.migrated) await copySchema(admin, await schemaTemplate(admin), name);
  } finally {
    await admin.end();
  }
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

/**
 * The template's name: one per set of migrations (their checksums), so that a template left on
 * the server by a run of other code is never copied by this one.
 */
export function schemaTemplateName(): string {
  const sums = loadMigrations().map((m) => `${m.name}:${m.checksum}`);
  return `baton_template_${createHash('sha256').update(sums.join('\n')).digest('hex').slice(0, 16)}`;
}

/**
 * The migrated template on the server of `admin`, brought up to date (baton's own migration, under
 * its server-wide lock: vitest workers and a global setup may ask at once). A no-op read of the
 * ledger once it is current.
 */
async function schemaTemplate(admin: Connection): Promise<string> {
  const template = schemaTemplateName();
  if (!migratedTemplates.has(template)) {
    await admin.query('CREATE DATABASE IF NOT EXISTS ??', [template]);
    await admin.query('USE ??', [template]);
    await migrate(admin, template);
    migratedTemplates.add(template);
  }
  return template;
}
const migratedTemplates = new Set<string>();

/** Migrates the template once for a whole test run (global-setup.ts), on the shared server. */
export async function prepareSchemaTemplate(): Promise<void> {
  const admin = await mysql.createConnection({ uri: SERVER_URL });
  try {
    await schemaTemplate(admin);
  } finally {
    await admin.end();
  }
}

/**
 * Copies every table of `from` into `to` (CREATE TABLE … LIKE keeps columns, keys, defaults and
 * options; baton's schema has no foreign keys, triggers or views) and the migration ledger's rows,
 * the only rows a migrated schema has.
 */
async function copySchema(admin: Connection, from: string, to: string): Promise<void> {
  const [tables] = await admin.query<RowDataPacket[]>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'",
    [from],
  );
  for (const { name } of tables) {
    await admin.query('CREATE TABLE ??.?? LIKE ??.??', [to, name, from, name]);
  }
  await admin.query('INSERT INTO ??.baton_migrations SELECT * FROM ??.baton_migrations', [
    to,
    from,
  ]);
}

/** A row of baton_runs as the tests read it. */
export interface RunRow {
  id: number;
  job: string;
  scheduled_at: Date;
  /** The fire's generation (0: the schedule's own; docs/history.md "Re-runs"); `SELECT *` reads it. */
  rerun?: number;
  winner: number | null;
  triggered_by: string;
  status: string;
  reason: string | null;
  reason_kind: string | null;
  host: string;
  pid: number | null;
  /** The winner's lock session (`SELECT *` reads it; a skip's is NULL). */
  lock_connection_id?: number | null;
  started_at: Date;
  finished_at: Date | null;
  exit_code: number | null;
  error: string | null;
  output_tail: string | null;
}

/** A row of baton_runs to plant, in `Run`'s words; what is left out takes the default shown. */
export interface PlantedRun {
  namespace: string;
  job: string;
  scheduledAt: Date;
  /** Default: 1 on a winner's row, 0 on a `missed` row, NULL on a `skipped` one. */
  winner?: number | null;
  /** Default `schedule`. */
  trigger?: string;
  /** The fire's generation; default 0 (the column's). */
  rerun?: number;
  /** Default `done`. */
  status?: string;
  reason?: string | null;
  /** Written only when given (the column is from migration 0006). */
  reasonKind?: string | null;
  /** Default `h1`. */
  host?: string;
  pid?: number | null;
  lockConnectionId?: number | null;
  /** Default: the fire, `scheduledAt`. */
  startedAt?: Date;
  /** Default: NULL while `running`, else `startedAt`. */
  finishedAt?: Date | null;
  exitCode?: number | null;
  /** Default: 1 on a winner's row, 0 on the others. */
  attempts?: number;
  error?: string | null;
  outputTail?: string | null;
}

/** Each field's column: the one place the tests name baton_runs' columns for writing. */
const PLANTED_COLUMNS = {
  namespace: 'namespace',
  job: 'job',
  scheduledAt: 'scheduled_at',
  winner: 'winner',
  trigger: 'triggered_by',
  rerun: 'rerun',
  status: 'status',
  reason: 'reason',
  reasonKind: 'reason_kind',
  host: 'host',
  pid: 'pid',
  lockConnectionId: 'lock_connection_id',
  startedAt: 'started_at',
  finishedAt: 'finished_at',
  exitCode: 'exit_code',
  attempts: 'attempts',
  error: 'error',
  outputTail: 'output_tail',
} as const satisfies Record<keyof PlantedRun, string>;

/** A database to plant rows in: the tests' TestDatabase, the bench's BenchDatabase. */
export interface PlantTarget {
  conn: Connection;
}

/**
 * Writes one row of baton_runs as a fixture, as if a runner had (the defaults make a finished
 * winner of a scheduled fire); its id. Fields left out that have no default are not written.
 */
export async function plantRun(db: PlantTarget, run: PlantedRun): Promise<number> {
  const status = run.status ?? 'done';
  const winner =
    run.winner !== undefined
      ? run.winner
      : status === 'skipped'
        ? null
        : status === 'missed'
          ? 0
          : 1;
  const startedAt = run.startedAt ?? run.scheduledAt;
  const row: PlantedRun = {
    ...run,
    winner,
    trigger: run.trigger ?? 'schedule',
    status,
    host: run.host ?? 'h1',
    startedAt,
    finishedAt:
      run.finishedAt !== undefined ? run.finishedAt : status === 'running' ? null : startedAt,
    attempts: run.attempts ?? ((winner ?? 0) >= 1 ? 1 : 0),
  };
  const fields = (Object.keys(PLANTED_COLUMNS) as (keyof PlantedRun)[]).filter(
    (f) => row[f] !== undefined,
  );
  const [res] = await db.conn.query<ResultSetHeader>(
    `INSERT INTO baton_runs (${fields.map((f) => PLANTED_COLUMNS[f]).join(', ')})
     VALUES (${fields.map(() => '?').join(', ')})`,
    fields.map((f) => row[f]),
  );
  return res.insertId;
}

/** A history row planted at an age: its fire `age` seconds before the database's now. */
export interface AgedRun {
  namespace: string;
  job: string;
  status: string;
  /** Age of the fire when the row is written, in seconds. */
  age: number;
}

/**
 * Plants `rows` at their ages (by the database's clock; each row ended when its fire came);
 * returns their ids in order. Skips have no winner, missed rows 0. The retention tests' history.
 */
export async function plantAgedRuns(db: TestDatabase, rows: readonly AgedRun[]): Promise<number[]> {
  const now = (await dbNow(db)).getTime();
  const ids: number[] = [];
  for (const { age, ...r } of rows) {
    ids.push(await plantRun(db, { ...r, scheduledAt: new Date(now - age * 1_000) }));
  }
  return ids;
}

/** The ids of a namespace's rows, oldest first. */
export async function runIdsOf(db: TestDatabase, namespace: string): Promise<number[]> {
  const rows = await db.query<{ id: number }>(
    'SELECT id FROM baton_runs WHERE namespace = ? ORDER BY id',
    [namespace],
  );
  return rows.map((r) => Number(r.id));
}

/** The fields a generated history usually sets, in this order, for `plantRunsFrom`. */
export const GENERATED_RUN_FIELDS = [
  'namespace',
  'job',
  'scheduledAt',
  'winner',
  'trigger',
  'status',
  'reason',
  'host',
  'pid',
  'startedAt',
  'finishedAt',
  'attempts',
] as const satisfies readonly (keyof PlantedRun)[];

/**
 * Plants a generated history in one statement: `select` yields the `fields`' values in that
 * order (`INSERT INTO baton_runs (…) SELECT …`), for histories of many thousands of rows.
 */
export async function plantRunsFrom(
  db: PlantTarget,
  fields: readonly (keyof PlantedRun)[],
  select: string,
  params: unknown[] = [],
): Promise<void> {
  await db.conn.query(
    `INSERT INTO baton_runs (${fields.map((f) => PLANTED_COLUMNS[f]).join(', ')}) ${select}`,
    params,
  );
}

/** The database's clock, `NOW(3)`, on the test database's connection (or on `conn`). */
export async function dbNow(db: TestDatabase | Connection): Promise<Date> {
  const conn = 'conn' in db ? db.conn : db;
  const [rows] = await conn.query<RowDataPacket[]>('SELECT NOW(3) AS now');
  return rows[0]!.now as Date;
}

/** Whether no session holds the named lock (`IS_FREE_LOCK`). */
export async function lockIsFree(db: TestDatabase, name: string): Promise<boolean> {
  const [row] = await db.query<{ free: number }>('SELECT IS_FREE_LOCK(?) AS free', [name]);
  return row!.free === 1;
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

/**
 * One query on a fresh connection, in UTC: for a private server the test stops and starts
 * (connections do not survive a stop).
 */
export async function queryFresh<T = RowDataPacket>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const conn = await mysql.createConnection({ uri: url, timezone: 'Z', connectTimeout: 5_000 });
  try {
    await conn.query("SET time_zone = '+00:00'");
    const [rows] = await conn.query(sql, params);
    return rows as T[];
  } finally {
    await conn.end().catch(() => undefined);
  }
}
