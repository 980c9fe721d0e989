/**
 * The unique key an upsert stands on (seed 001). `INSERT … ON DUPLICATE KEY UPDATE` only updates
 * when a UNIQUE or PRIMARY key says the row is a duplicate; without that key it inserts, and the
 * "idempotent" batch doubles its data on the second run — silently. So `upsertRows`/`upsertSelect`
 * check that the key exists before writing.
 *
 * Adding the key to a table that already holds duplicates fails (ER_DUP_ENTRY), so the order is:
 * find the duplicates, keep one row per key (after copying the table), then add the key.
 * `addUniqueKey` refuses while duplicates exist and names them.
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { Db } from './connection.js';
import { DuplicateRowsError, MissingUniqueKeyError, type Duplicate } from './errors.js';
import { columnId, positiveInt, tableId } from './sql.js';

function splitTable(table: string): { schema: string | null; name: string } {
  const dot = table.indexOf('.');
  return dot < 0
    ? { schema: null, name: table }
    : { schema: table.slice(0, dot), name: table.slice(dot + 1) };
}

/** The unique keys (PRIMARY included) of a table: name → columns in order. */
export async function uniqueKeys(db: Db, table: string): Promise<Map<string, string[]>> {
  const { schema, name } = splitTable(table);
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT INDEX_NAME AS name, COLUMN_NAME AS col FROM information_schema.STATISTICS
     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND NON_UNIQUE = 0
     ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
    [schema, name],
  );
  const keys = new Map<string, string[]>();
  for (const row of rows) {
    const key = String(row.name);
    keys.set(key, [...(keys.get(key) ?? []), String(row.col)]);
  }
  return keys;
}

function sameColumns(a: readonly string[], b: readonly string[]): boolean {
  const lower = (xs: readonly string[]) => new Set(xs.map((x) => x.toLowerCase()));
  const sa = lower(a);
  const sb = lower(b);
  return sa.size === sb.size && [...sa].every((x) => sb.has(x));
}

async function tableExists(db: Db, table: string): Promise<boolean> {
  const { schema, name } = splitTable(table);
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT 1 FROM information_schema.TABLES
     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`,
    [schema, name],
  );
  return rows.length > 0;
}

/** Verified (pool or connection → "table|cols") pairs; only successes are remembered. */
const verified = new WeakMap<object, Set<string>>();

/**
 * Throws MissingUniqueKeyError unless a UNIQUE/PRIMARY key of `table` has exactly `columns` (in
 * any order). A table that does not exist passes: the statement itself then fails, clearly.
 * Remembered per pool once it passed.
 */
export async function assertUniqueKey(db: Db, table: string, columns: readonly string[]) {
  if (columns.length === 0) throw new TypeError('the unique key needs at least one column');
  const handle = db as { pool?: object; connection?: object };
  const cacheKey = handle.pool ?? handle.connection ?? db;
  const id = `${table}|${columns
    .map((c) => c.toLowerCase())
    .sort()
    .join(',')}`;
  if (verified.get(cacheKey)?.has(id)) return;
  const keys = await uniqueKeys(db, table);
  const found = [...keys.values()].some((cols) => sameColumns(cols, columns));
  if (!found && (keys.size > 0 || (await tableExists(db, table)))) {
    throw new MissingUniqueKeyError(table, columns);
  }
  if (!found) return;
  let set = verified.get(cacheKey);
  if (!set) verified.set(cacheKey, (set = new Set()));
  set.add(id);
}

export interface DuplicatesOptions {
  table: string;
  /** The would-be unique key. */
  columns: readonly string[];
  /** At most this many key values are returned. Default 20. */
  limit?: number;
}

/**
 * Key values that occur more than once, the most repeated first. Rows with a NULL in the key are
 * left out: a unique key allows any number of them.
 */
export async function findDuplicates(db: Db, options: DuplicatesOptions): Promise<Duplicate[]> {
  if (options.columns.length === 0) throw new TypeError('columns needs at least one column');
  const cols = options.columns.map(columnId);
  const limit = positiveInt('limit', options.limit ?? 20);
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT ${cols.join(', ')}, COUNT(*) AS \`count\` FROM ${tableId(options.table)} ` +
      `WHERE ${cols.map((c) => `${c} IS NOT NULL`).join(' AND ')} ` +
      `GROUP BY ${cols.join(', ')} HAVING COUNT(*) > 1 ORDER BY \`count\` DESC LIMIT ?`,
    [limit],
  );
  return rows.map((row) => ({
    values: Object.fromEntries(options.columns.map((c) => [c, row[c]])),
    count: Number(row.count),
  }));
}

export interface AddUniqueKeyOptions {
  table: string;
  columns: readonly string[];
  /** Default `uk_<columns>` (cut to 64 characters). */
  name?: string;
}

/**
 * Adds a UNIQUE key on `columns` unless one exists. Refuses with DuplicateRowsError (changing
 * nothing) while rows already repeat a key value. Returns whether it added the key.
 */
export async function addUniqueKey(db: Db, options: AddUniqueKeyOptions): Promise<boolean> {
  const { table, columns } = options;
  if (columns.length === 0) throw new TypeError('columns needs at least one column');
  const keys = await uniqueKeys(db, table);
  if ([...keys.values()].some((cols) => sameColumns(cols, columns))) return false;
  const duplicates = await findDuplicates(db, { table, columns });
  if (duplicates.length > 0) throw new DuplicateRowsError(table, columns, duplicates);
  const name = options.name ?? `uk_${columns.join('_')}`.slice(0, 64);
  // Rows that sneak in between the check and the ALTER still make it fail (ER_DUP_ENTRY).
  await db.query(
    `ALTER TABLE ${tableId(table)} ADD UNIQUE KEY ${columnId(name)} (${columns.map(columnId).join(', ')})`,
  );
  return true;
}
