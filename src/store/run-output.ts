/**
 * `baton_run_output`: every run's whole output, as chunks (the table is documented in
 * docs/history.md#output; execution/output-capture.ts says what is kept). Written by the runner
 * that runs the job (fire/output-writer.ts), read by `baton logs` and the dashboard on any host.
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';

export interface OutputRow {
  runId: number;
  namespace: string;
  seq: number;
  attempt: number;
  /** 1 stdout, 2 stderr. */
  stream: 1 | 2;
  /** Where the chunk starts in its attempt's output; a gap before it is output dropped. */
  offset: number;
  readAt: Date;
  data: Buffer;
}

/**
 * At most this many bytes of output go into one INSERT. The statement is twice that on the wire
 * (mysql2 sends bytes as `X'…'` hex), well under the smallest default `max_allowed_packet`
 * (4 MiB, MySQL 5.7).
 */
export const INSERT_MAX_BYTES = 1024 * 1024;

/**
 * Idempotent: a retry of a statement that did commit (its answer lost to a deadline) changes
 * nothing, instead of failing on the key for ever.
 */
export async function insertOutput(db: Queryable, rows: readonly OutputRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db.query(
    `INSERT INTO baton_run_output
       (run_id, namespace, seq, attempt, stream, byte_offset, read_at, data) VALUES ?
     ON DUPLICATE KEY UPDATE seq = seq`,
    [
      rows.map((r) => [
        r.runId,
        r.namespace,
        r.seq,
        r.attempt,
        r.stream,
        r.offset,
        r.readAt,
        r.data,
      ]),
    ],
  );
}

/** The run's chunks after `afterSeq` (all: -1), in order; of one attempt, or of all. */
export async function readOutput(
  db: Queryable,
  runId: number,
  options: { afterSeq?: number; attempt?: number; limit?: number } = {},
): Promise<OutputRow[]> {
  const { afterSeq = -1, attempt, limit = 1_000 } = options;
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT namespace, seq, attempt, stream, byte_offset, read_at, data FROM baton_run_output
      WHERE run_id = ? AND seq > ? ${attempt == null ? '' : 'AND attempt = ?'}
      ORDER BY seq LIMIT ?`,
    attempt == null ? [runId, afterSeq, limit] : [runId, afterSeq, attempt, limit],
  );
  return rows.map((r) => ({
    runId,
    namespace: String(r.namespace),
    seq: Number(r.seq),
    attempt: Number(r.attempt),
    stream: Number(r.stream) as 1 | 2,
    offset: Number(r.byte_offset),
    readAt: r.read_at as Date,
    data: r.data as Buffer,
  }));
}

/** Chunks deleted per statement: each DELETE locks little, for little time. */
export const OUTPUT_DELETE_BATCH = 1_000;

/** Deletes the output of the runs `runIds`, a batch of chunks at a time; returns the chunks. */
export async function deleteOutputOf(db: Queryable, runIds: readonly number[]): Promise<number> {
  if (runIds.length === 0) return 0;
  let deleted = 0;
  for (;;) {
    const [res] = await db.query<ResultSetHeader>(
      'DELETE FROM baton_run_output WHERE run_id IN (?) LIMIT ?',
      [[...runIds], OUTPUT_DELETE_BATCH],
    );
    deleted += res.affectedRows;
    if (res.affectedRows < OUTPUT_DELETE_BATCH) return deleted;
  }
}

/**
 * Deletes the namespace's output read before `before` (`retention: {output}`), a batch at a time
 * along `baton_run_output_age`; stops between batches when `signal` is aborted.
 */
export async function deleteOutputBefore(
  db: Queryable,
  namespace: string,
  before: Date,
  signal?: AbortSignal,
): Promise<{ chunks: number; batches: number }> {
  let chunks = 0;
  let batches = 0;
  for (;;) {
    const [res] = await db.query<ResultSetHeader>(
      'DELETE FROM baton_run_output WHERE namespace = ? AND read_at < ? LIMIT ?',
      [namespace, before, OUTPUT_DELETE_BATCH],
    );
    chunks += res.affectedRows;
    batches++;
    if (res.affectedRows < OUTPUT_DELETE_BATCH || signal?.aborted) return { chunks, batches };
  }
}
