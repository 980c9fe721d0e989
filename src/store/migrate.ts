/**
 * Versioned schema migrations: `src/store/migrations/NNNN_name.sql`, append-only, one statement
 * each (MySQL DDL is not transactional, so a file of two statements could stop half-applied).
 *
 * Applied under a server-wide named lock, so that several runners starting together apply each
 * migration exactly once; each applied file is recorded in `baton_migrations` with a checksum.
 * A database that has a migration this code does not know, or whose recorded checksum differs
 * from the file, is refused: the code is older than the schema, or a file was edited in place.
 */
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { DatabaseUnavailableError, dbErrorCode } from '../errors.js';
import { migrationLockName } from '../lock-names.js';
import { openConnection } from './connect.js';
import { queryWithDeadline, withStatementDeadline, type Queryable } from './deadline.js';
import type { KeepAlive } from '../keep-alive.js';
import type { DatabaseTarget } from '../config/database-url.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

/** Works from `src/store` (tests) and `dist/store` (built): both are two levels below the root. */
const MIGRATIONS_DIR = fileURLToPath(new URL('../../src/store/migrations/', import.meta.url));

const LEDGER_DDL = `CREATE TABLE IF NOT EXISTS baton_migrations (
  version    INT UNSIGNED NOT NULL PRIMARY KEY,
  name       VARCHAR(255) NOT NULL,
  checksum   CHAR(64)     NOT NULL,
  applied_at DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB`;

/** How long a starting runner waits for another one that is migrating. */
const MIGRATION_LOCK_WAIT_SECONDS = 60;
/**
 * Deadline of the statements every start (and every reconnect) makes on its way to "the schema
 * is current": the server check and the ledger read, each a moment's work. A link that goes
 * silent under one of them fails the attempt, which is tried again, rather than leave a runner
 * waiting for TCP to give up. (The migrations themselves have none: DDL on a large table takes
 * as long as it takes.)
 */
export const MIGRATION_CHECK_DEADLINE_MS = 10_000;

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((file) => {
      const text = readFileSync(`${dir}/${file}`, 'utf8');
      const sql = stripComments(text).trim().replace(/;\s*$/, '');
      if (sql.includes(';')) {
        throw new Error(`migration ${file} has more than one statement; split it into two files`);
      }
      return {
        version: Number(file.slice(0, 4)),
        name: file.replace(/\.sql$/, ''),
        sql,
        checksum: createHash('sha256').update(sql).digest('hex'),
      };
    });
}

function stripComments(text: string): string {
  return text
    .split('\n')
    .map((line) => line.replace(/--.*$/, ''))
    .join('\n');
}

interface LedgerRow extends RowDataPacket {
  version: number;
  name: string;
  checksum: string;
}

export interface MigrationResult {
  applied: string[];
}

/**
 * Applies every pending migration on `conn` (a dedicated connection: the named lock must stay on
 * the session that took it; a session that migrated is left in READ COMMITTED, see
 * readCommitted). Returns the names applied; [] when the schema was current.
 *
 * A current schema is recognised by reading the ledger alone, without the lock and without DDL,
 * so a runner whose user has only the runtime grants (no CREATE) starts on a migrated database.
 */
export async function migrate(
  conn: Connection,
  database: string,
  /** This baton's migrations; a test passes the first few of them to build an older schema. */
  migrations: readonly Migration[] = loadMigrations(),
  /** Of the ledger read and (beyond the wait itself) of the wait for the migration lock. */
  checkDeadlineMs = MIGRATION_CHECK_DEADLINE_MS,
): Promise<MigrationResult> {
  const ledger = await readLedger(withStatementDeadline(conn, checkDeadlineMs));
  if (ledger) {
    checkLedger(ledger, migrations);
    if (pending(ledger, migrations).length === 0) return { applied: [] };
  }

  const lock = migrationLockName(database);
  const [[got]] = await queryWithDeadline<RowDataPacket[]>(
    conn,
    'SELECT GET_LOCK(?, ?) AS got',
    [lock, MIGRATION_LOCK_WAIT_SECONDS],
    MIGRATION_LOCK_WAIT_SECONDS * 1000 + checkDeadlineMs,
  );
  if (got?.got !== 1) {
    throw new DatabaseUnavailableError(
      `another process kept the migration lock for ${MIGRATION_LOCK_WAIT_SECONDS}s; is a migration stuck?`,
    );
  }
  try {
    await conn.query(LEDGER_DDL);
    // Read again under the lock: another runner may have migrated while we waited.
    const rows = (await readLedger(conn)) ?? [];
    checkLedger(rows, migrations);
    await readCommitted(conn);
    const applied: string[] = [];
    for (const m of pending(rows, migrations)) {
      await conn.query(m.sql);
      await conn.query('INSERT INTO baton_migrations (version, name, checksum) VALUES (?, ?, ?)', [
        m.version,
        m.name,
        m.checksum,
      ]);
      applied.push(m.name);
    }
    return { applied };
  } finally {
    // Never let a failed release hide the error that got us here; the lock dies with the
    // connection, which the caller closes.
    await conn.query('SELECT RELEASE_LOCK(?)', [lock]).catch(() => {});
  }
}

/**
 * Creates the database if missing and applies pending migrations on a connection of its own
 * (closed afterwards, which also drops the migration lock if anything went wrong). `check` runs
 * first, on the same connection.
 */
export async function migrateDatabase(
  target: DatabaseTarget,
  {
    check,
    checkDeadlineMs = MIGRATION_CHECK_DEADLINE_MS,
    keepAlive,
  }: {
    /** Runs first, on the same connection; each of its statements has `checkDeadlineMs`. */
    check?: (conn: Queryable) => Promise<void>;
    /** Of the check's statements and the ledger read (MIGRATION_CHECK_DEADLINE_MS). */
    checkDeadlineMs?: number;
    keepAlive?: KeepAlive;
  } = {},
): Promise<MigrationResult> {
  const conn = await openConnection(target, keepAlive ? { keepAlive } : {});
  try {
    // A server that fails this check gets no tables (fail closed: write nothing there).
    await check?.(withStatementDeadline(conn, checkDeadlineMs));
    return await migrate(conn, target.database, loadMigrations(), checkDeadlineMs);
  } finally {
    await conn.end().catch(() => {});
  }
}

/**
 * Puts the migrating session in READ COMMITTED. A migration that updates the history (0007's
 * backfill) reads every row of it, and the fleet's runners keep claiming, skipping and writing
 * verdicts meanwhile: under the default REPEATABLE READ the UPDATE would lock every row it reads
 * and the gaps between them (new rows included) until it commits — on a large history, many
 * seconds of stalled claims. Under READ COMMITTED it keeps the locks of the rows it changes only.
 * DDL and the ledger are not affected. Not with statement-based binary logging, where InnoDB
 * refuses to write under READ COMMITTED: there the session keeps the server's level.
 */
async function readCommitted(conn: Connection): Promise<void> {
  const [[row]] = await conn.query<RowDataPacket[]>(
    'SELECT @@log_bin AS log_bin, @@binlog_format AS binlog_format',
  );
  const statementLogged =
    Number(row?.log_bin) === 1 && String(row?.binlog_format).toUpperCase() === 'STATEMENT';
  if (!statementLogged) await conn.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
}

/** The ledger's rows, or null when there is no ledger yet (a fresh database). */
async function readLedger(conn: Queryable): Promise<LedgerRow[] | null> {
  try {
    const [rows] = await conn.query<LedgerRow[]>(
      'SELECT version, name, checksum FROM baton_migrations ORDER BY version',
    );
    return rows;
  } catch (err) {
    if (dbErrorCode(err) === 'ER_NO_SUCH_TABLE') return null;
    throw err;
  }
}

function pending(rows: readonly LedgerRow[], migrations: readonly Migration[]): Migration[] {
  const done = new Set(rows.map((r) => r.version));
  return migrations.filter((m) => !done.has(m.version));
}

/** Refuses a database whose ledger this code cannot vouch for. */
export function checkLedger(rows: readonly LedgerRow[], migrations: readonly Migration[]): void {
  const known = new Map(migrations.map((m) => [m.version, m]));
  for (const row of rows) {
    const mine = known.get(row.version);
    if (!mine) {
      throw new DatabaseUnavailableError(
        `the database has migration ${row.name}, which this version of baton does not know; ` +
          'upgrade baton on this host (a newer runner has migrated the schema)',
      );
    }
    if (mine.checksum !== row.checksum) {
      throw new DatabaseUnavailableError(
        `migration ${row.name} in the database differs from this baton's copy (checksum ` +
          'mismatch); migrations are append-only, never edited',
      );
    }
  }
}
