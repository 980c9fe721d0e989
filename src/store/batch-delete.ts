/**
 * Deleting many rows without holding many locks: read the ids of at most `batchSize` rows with a
 * plain SELECT (a consistent read, no lock), delete those by primary key, again until none is
 * left — each DELETE its own short autocommit statement (store/prune.ts explains why).
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';

export interface BatchDelete {
  /** `SELECT id FROM t WHERE … LIMIT ?`: the batch size is bound last. */
  selectSql: string;
  params: unknown[];
  /** `DELETE FROM t WHERE id IN (?) …`: the ids are bound first, then `deleteParams`. */
  deleteSql: string;
  deleteParams?: unknown[];
  /**
   * The key a found row is deleted by; default its `id`. A table keyed otherwise selects the
   * column its DELETE matches (`scheduled_at` of one job's rows: baton_dependent_fires).
   */
  keyOf?: (row: RowDataPacket) => unknown;
}

export async function deleteInBatches(
  db: Queryable,
  d: BatchDelete,
  batchSize: number,
  signal?: AbortSignal,
): Promise<{ rows: number; batches: number }> {
  let rows = 0;
  let batches = 0;
  while (!signal?.aborted) {
    const [found] = await db.query<RowDataPacket[]>(d.selectSql, [...d.params, batchSize]);
    if (found.length === 0) break;
    const ids = found.map(d.keyOf ?? ((r) => Number(r.id)));
    const [res] = await db.query<ResultSetHeader>(d.deleteSql, [ids, ...(d.deleteParams ?? [])]);
    rows += res.affectedRows;
    batches++;
  }
  return { rows, batches };
}
