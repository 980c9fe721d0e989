/**
 * Upserts on a unique key (seed 001): the batch that doubled the settlement became idempotent
 * with a UNIQUE key and `INSERT … ON DUPLICATE KEY UPDATE`; running it twice gives the same rows.
 *
 * The syntax for "the value this row would have inserted" differs by server: MySQL 8.0.19+ names
 * the incoming row with an alias (`VALUES (…) AS new … amount = new.amount`; `VALUES(amount)` is
 * deprecated since 8.0.20), MariaDB only knows `VALUES(amount)`. The helpers ask the server once
 * (see server-flavor.ts) and build the right one; the builders are pure and tested for both.
 *
 * Two kinds of update on a duplicate:
 * - `set` columns are replaced (`amount = new.amount`): a recomputed total. Running the batch
 *   again writes the same value — idempotent. This is what a daily settlement needs.
 * - `increment` columns are added to (`hits = hits + new.hits`): atomic under concurrency, but
 *   NOT idempotent — running the same batch twice adds twice. Pair it with a ledger (`once`).
 *
 * Before writing, the helpers check that the table has a UNIQUE/PRIMARY key on exactly `key`:
 * without it ON DUPLICATE KEY UPDATE never fires and every run inserts (unique-key.ts). Any OTHER
 * unique key on the table can fire the update too; keep one unique key per upserted table.
 */
import type { ResultSetHeader } from 'mysql2/promise';
import { retryStatement, type Db } from './connection.js';
import { fencedWork, type RunFence } from './fence.js';
import { serverInfo, type ServerInfo } from './server-flavor.js';
import { columnId, positiveInt, tableId } from './sql.js';
import { assertUniqueKey } from './unique-key.js';

/** How an upsert names the incoming row: MariaDB/older MySQL `VALUES(c)`, MySQL 8.0.19+ alias. */
export type UpsertSyntax = 'values-function' | 'row-alias';

export function upsertSyntax(info: ServerInfo): UpsertSyntax {
  return info.rowAlias ? 'row-alias' : 'values-function';
}

export interface UpsertSpec {
  table: string;
  /** The columns of the table's UNIQUE (or PRIMARY) key that identifies a row. */
  key: readonly string[];
  /** Replaced on a duplicate. Default: every column that is neither key nor increment. */
  set?: readonly string[];
  /** Added to on a duplicate (`c = c + new.c`); keep them NOT NULL. */
  increment?: readonly string[];
  /** Check that `key` is a unique key of the table first (cached per pool). Default true. */
  checkKey?: boolean;
  /** Deadlock retries of each statement (only through a pool). Default 3. */
  retries?: number;
  /**
   * The run's fence (`ctx.db.fence`; sdk/fence.ts): the rows are written only while the run still
   * holds its job — all chunks in one transaction — else none are and StaleFenceError is thrown.
   */
  fence?: RunFence;
}

export interface UpsertRowsOptions extends UpsertSpec {
  /** The rows, all with the same columns. */
  rows: readonly Readonly<Record<string, unknown>>[];
  /** Rows per statement. Default 500. Each statement is atomic; the whole call is not. */
  chunkSize?: number;
}

export interface UpsertSelectOptions extends UpsertSpec {
  /** Target columns, in the order of the select's output columns. */
  columns: readonly string[];
  /**
   * The rows to upsert, as a SELECT whose output columns are NAMED like the target columns
   * (`SELECT sale_date AS settle_date, provider_no, SUM(amount) AS amount … GROUP BY …`).
   */
  select: string;
  params?: readonly unknown[];
}

export interface UpsertResult {
  /** mysql2's affectedRows summed: 1 per inserted row, 2 per changed row, 0 or 1 per unchanged. */
  affectedRows: number;
  statements: number;
}

function aliasFor(table: string): string {
  const last = table.slice(table.lastIndexOf('.') + 1);
  return last.toLowerCase() === 'new' ? 'new_row' : 'new';
}

/** `ON DUPLICATE KEY UPDATE …` for `columns` (pure). `target` qualifies the table's columns. */
function updateClause(
  syntax: UpsertSyntax,
  spec: UpsertSpec,
  columns: readonly string[],
  target: string,
  alias: string,
): string {
  const lower = (xs: readonly string[]) => xs.map((x) => x.toLowerCase());
  const has = new Set(lower(columns));
  const keys = new Set(lower(spec.key));
  if (spec.key.length === 0) throw new TypeError('key needs at least one column');
  for (const k of spec.key) {
    if (!has.has(k.toLowerCase())) throw new TypeError(`key column ${k} is not among the columns`);
  }
  const increment = spec.increment ?? [];
  const inc = new Set(lower(increment));
  const set =
    spec.set ?? columns.filter((c) => !keys.has(c.toLowerCase()) && !inc.has(c.toLowerCase()));
  for (const c of [...set, ...increment]) {
    if (!has.has(c.toLowerCase())) throw new TypeError(`column ${c} is not among the columns`);
    if (keys.has(c.toLowerCase())) throw new TypeError(`column ${c} is part of the key`);
  }
  for (const c of set) {
    if (inc.has(c.toLowerCase())) throw new TypeError(`column ${c} is both set and increment`);
  }
  const incoming = (c: string) =>
    syntax === 'row-alias' ? `${columnId(alias)}.${columnId(c)}` : `VALUES(${columnId(c)})`;
  const own = (c: string) => `${target}${columnId(c)}`;
  const parts = [
    ...set.map((c) => `${own(c)} = ${incoming(c)}`),
    ...increment.map((c) => `${own(c)} = ${own(c)} + ${incoming(c)}`),
  ];
  // Nothing to update (every column is key): keep the row as it is.
  const first = spec.key[0]!;
  if (parts.length === 0) parts.push(`${own(first)} = ${own(first)}`);
  return `ON DUPLICATE KEY UPDATE ${parts.join(', ')}`;
}

function rowColumns(rows: UpsertRowsOptions['rows']): string[] {
  const first = rows[0];
  if (!first) return [];
  const columns = Object.keys(first).filter((c) => first[c] !== undefined);
  rows.forEach((row, i) => {
    const cols = Object.keys(row).filter((c) => row[c] !== undefined);
    if (cols.length !== columns.length || columns.some((c) => row[c] === undefined)) {
      throw new TypeError(
        `upsert row ${i} has columns (${cols.join(', ')}), row 0 has (${columns.join(', ')})`,
      );
    }
  });
  return columns;
}

/** One multi-row upsert statement (pure). */
export function buildUpsertRows(
  syntax: UpsertSyntax,
  spec: UpsertSpec,
  rows: UpsertRowsOptions['rows'],
): { sql: string; values: unknown[] } {
  const columns = rowColumns(rows);
  if (columns.length === 0) throw new TypeError('upsert needs at least one row with columns');
  const alias = aliasFor(spec.table);
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  const sql =
    `INSERT INTO ${tableId(spec.table)} (${columns.map(columnId).join(', ')}) VALUES ` +
    rows.map(() => tuple).join(', ') +
    (syntax === 'row-alias' ? ` AS ${columnId(alias)} ` : ' ') +
    updateClause(syntax, spec, columns, '', alias);
  return { sql, values: rows.flatMap((row) => columns.map((c) => row[c])) };
}

/** An `INSERT … SELECT … ON DUPLICATE KEY UPDATE` (pure). */
export function buildUpsertSelect(
  syntax: UpsertSyntax,
  spec: UpsertSpec & Pick<UpsertSelectOptions, 'columns' | 'select' | 'params'>,
): { sql: string; values: unknown[] } {
  const select = spec.select.trim().replace(/;\s*$/, '');
  if (!/^(select|with|\()/i.test(select)) {
    throw new TypeError('upsertSelect: select must be a SELECT statement');
  }
  if (spec.columns.length === 0) throw new TypeError('upsertSelect needs columns');
  const alias = aliasFor(spec.table);
  const table = tableId(spec.table);
  // The table's own columns are qualified: the select may have columns of the same names.
  // MySQL 8.0.19+ refers to the incoming row through a derived table named like the row alias
  // (its column names are the select's output names); MariaDB through VALUES(c).
  const source =
    syntax === 'row-alias' ? `SELECT * FROM (${select}) AS ${columnId(alias)}` : select;
  return {
    sql:
      `INSERT INTO ${table} (${spec.columns.map(columnId).join(', ')}) ${source} ` +
      updateClause(syntax, spec, spec.columns, `${table}.`, alias),
    values: [...(spec.params ?? [])],
  };
}

/**
 * Inserts `rows`, updating the ones whose key exists: `set` columns replaced, `increment` columns
 * added to. Rows go in statements of `chunkSize`.
 *
 *     await upsertRows(ctx.db, { table: 'settle_daily', key: ['settle_date', 'provider_no'],
 *       rows: totals });   // amount replaced: running it again changes nothing
 */
export async function upsertRows(db: Db, options: UpsertRowsOptions): Promise<UpsertResult> {
  if (options.rows.length === 0) return { affectedRows: 0, statements: 0 };
  const chunkSize = positiveInt('chunkSize', options.chunkSize ?? 500);
  const syntax = upsertSyntax(await serverInfo(db));
  // Build (and validate) every statement before the first one is sent.
  const statements: { sql: string; values: unknown[] }[] = [];
  for (let i = 0; i < options.rows.length; i += chunkSize) {
    statements.push(buildUpsertRows(syntax, options, options.rows.slice(i, i + chunkSize)));
  }
  if (options.checkKey !== false) await assertUniqueKey(db, options.table, options.key);
  if (options.fence) {
    // Fenced: every chunk in one transaction, committed only while the run holds its job.
    const affectedRows = await fencedWork(db, options.fence, options.retries ?? 3, async (conn) => {
      let n = 0;
      for (const { sql, values } of statements) {
        n += (await conn.query<ResultSetHeader>(sql, values))[0].affectedRows;
      }
      return n;
    });
    return { affectedRows, statements: statements.length };
  }
  let affectedRows = 0;
  for (const { sql, values } of statements) {
    const [result] = await retryStatement(db, options.retries ?? 3, () =>
      db.query<ResultSetHeader>(sql, values),
    );
    affectedRows += result.affectedRows;
  }
  return { affectedRows, statements: statements.length };
}

/**
 * `INSERT INTO table (columns) <select> ON DUPLICATE KEY UPDATE …` in one statement: seed 001's
 * settlement, recomputed from the source rows and written over the previous totals.
 *
 *     await upsertSelect(ctx.db, {
 *       table: 'settle_daily', key: ['settle_date', 'provider_no'],
 *       columns: ['settle_date', 'provider_no', 'amount'],
 *       select: `SELECT DATE(paid_at) AS settle_date, provider_no, SUM(amount) AS amount
 *                FROM payment WHERE paid_at >= ? AND paid_at < ? GROUP BY 1, 2`,
 *       params: [day, nextDay] });
 */
export async function upsertSelect(db: Db, options: UpsertSelectOptions): Promise<UpsertResult> {
  const syntax = upsertSyntax(await serverInfo(db));
  const { sql, values } = buildUpsertSelect(syntax, options);
  if (options.checkKey !== false) await assertUniqueKey(db, options.table, options.key);
  const [result] = await (options.fence
    ? fencedWork(db, options.fence, options.retries ?? 3, (conn) =>
        conn.query<ResultSetHeader>(sql, values),
      )
    : retryStatement(db, options.retries ?? 3, () => db.query<ResultSetHeader>(sql, values)));
  return { affectedRows: result.affectedRows, statements: 1 };
}
