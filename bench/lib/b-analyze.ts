/**
 * Server-side cost of a statement on MariaDB: `ANALYZE FORMAT=JSON <select>` runs it and reports
 * its optimisation and execution time (`query_optimization.r_total_time_ms`,
 * `query_block.r_total_time_ms`) and, per table access, the plan (access type, key) and the
 * rows it really read (`r_rows` per loop × `r_loops`). Used by the history-scale scenario on the
 * statements a CLI command was captured sending (b-sql-capture.ts).
 */
import type { Connection, RowDataPacket } from 'mysql2/promise';

export interface TableAccess {
  table: string;
  access: string;
  key: string | null;
  /** Rows read over every loop (r_rows × r_loops). */
  rowsRead: number;
  /** What the optimiser expected per loop. */
  rowsEstimate: number;
  /** "Select tables optimized away" and the like. */
  message?: string;
}

export interface StatementCost {
  sql: string;
  /** Optimisation + execution, ms (server time). */
  serverMs: number;
  tables: TableAccess[];
  /** The rows were sorted (a filesort), not read in index order. */
  filesort: boolean;
  /** Σ rowsRead over the table accesses. */
  rowsRead: number;
  /** One line: `baton_runs range baton_runs_fire (read 50); filesort`. */
  plan: string;
  /**
   * A whole table read (`ALL`), or a whole index walked (`index`) for more than 1,000 rows (an
   * `index` walk stopped early by a LIMIT is an ordered read, not a scan).
   */
  fullScan: boolean;
}

type Json = Record<string, unknown>;

function walk(node: unknown, visit: (key: string, value: Json) => void): void {
  if (Array.isArray(node)) {
    for (const v of node) walk(v, visit);
    return;
  }
  if (node == null || typeof node !== 'object') return;
  for (const [k, v] of Object.entries(node as Json)) {
    if (v != null && typeof v === 'object' && !Array.isArray(v)) visit(k, v as Json);
    walk(v, visit);
  }
}

/** Parses MariaDB's ANALYZE FORMAT=JSON output. */
export function parseAnalyze(sql: string, text: string): StatementCost {
  const doc = JSON.parse(text) as Json;
  const opt = Number((doc.query_optimization as Json | undefined)?.r_total_time_ms ?? 0);
  const exec = Number((doc.query_block as Json | undefined)?.r_total_time_ms ?? 0);
  const tables: TableAccess[] = [];
  let filesort = false;
  walk(doc, (key, value) => {
    if (key === 'table' && ('table_name' in value || 'message' in value)) {
      const loops = Number(value.r_loops ?? 1);
      const rows = Number(value.r_rows ?? 0);
      tables.push({
        table: String(value.table_name ?? ''),
        access: String(value.access_type ?? ''),
        key: value.key == null ? null : String(value.key),
        rowsRead: Math.round(rows * loops),
        rowsEstimate: Number(value.rows ?? 0),
        ...(value.message != null ? { message: String(value.message) } : {}),
      });
    }
    if (key === 'filesort') filesort = true;
  });
  const rowsRead = tables.reduce((s, t) => s + t.rowsRead, 0);
  const fullScan = tables.some(
    (t) => t.access === 'ALL' || (t.access === 'index' && t.rowsRead > 1_000),
  );
  const plan = [
    ...tables.map((t) =>
      t.message
        ? t.message
        : `${t.table} ${t.access}${t.key ? ` ${t.key}` : ''} (read ${t.rowsRead})`,
    ),
    ...(filesort ? ['filesort'] : []),
  ].join('; ');
  return { sql, serverMs: opt + exec, tables, filesort, rowsRead, plan, fullScan };
}

/** Runs `ANALYZE FORMAT=JSON` on a SELECT `times` times and keeps the median run. */
export async function analyze(conn: Connection, sql: string, times = 3): Promise<StatementCost> {
  const runs: StatementCost[] = [];
  for (let i = 0; i < times; i++) {
    const [rows] = await conn.query<RowDataPacket[]>(`ANALYZE FORMAT=JSON ${sql}`);
    const text = Object.values(rows[0] ?? {})[0];
    runs.push(parseAnalyze(sql, String(text)));
  }
  runs.sort((a, b) => a.serverMs - b.serverMs);
  return runs[Math.floor(runs.length / 2)]!;
}

/** The statement with its literals replaced by `?` (to group the same query with other values). */
export function shapeOf(sql: string): string {
  return sql
    .replace(/'(?:[^'\\]|\\.)*'/g, '?')
    .replace(/\b\d+(\.\d+)?\b/g, '?')
    .replace(/\s+/g, ' ')
    .trim();
}
