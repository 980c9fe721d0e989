/**
 * How many rows a statement really reads, by MariaDB's `ANALYZE FORMAT=JSON`: for every table
 * access its r_rows (rows per loop) times r_loops, summed — a join's inner table counts once per
 * outer row. Tests of read paths that must stay cheap on a long history assert on it rather than
 * on time.
 */
import type { TestDatabase } from './db.js';

export async function rowsRead(db: TestDatabase, sql: string, params: unknown[]): Promise<number> {
  const [row] = await db.query<Record<string, string>>(`ANALYZE FORMAT=JSON ${sql}`, params);
  let total = 0;
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object') {
      const { r_rows: rows, r_loops: loops } = node as { r_rows?: unknown; r_loops?: unknown };
      if (typeof rows === 'number') total += rows * (typeof loops === 'number' ? loops : 1);
      for (const [key, value] of Object.entries(node)) if (key !== 'r_rows') walk(value);
    }
  };
  walk(JSON.parse(Object.values(row!)[0]!));
  return total;
}
