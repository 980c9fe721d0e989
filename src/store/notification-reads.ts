/**
 * The outbox as operators read it: `baton notifications` (rows, newest first), and the state per
 * target that `/metrics` and `baton status` show. Read-only; the writes are notifications.ts's.
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';
import { ROW_COLUMNS, toNoticeRow, type NoticeRow, type NoticeStatus } from './notifications.js';

/** Rows as `baton notifications` lists them, newest first. */
export interface NoticeFilter {
  namespace: string;
  subjects?: readonly string[];
  statuses?: readonly NoticeStatus[];
  since?: Date | null;
  limit: number;
}

export async function listNotices(db: Queryable, f: NoticeFilter): Promise<NoticeRow[]> {
  const where = ['namespace = ?'];
  const params: unknown[] = [f.namespace];
  const add = (sql: string, value: unknown) => {
    where.push(sql);
    params.push(value);
  };
  if (f.subjects?.length) add('subject IN (?)', f.subjects);
  if (f.statuses?.length) add('status IN (?)', f.statuses);
  if (f.since) add('created_at >= ?', f.since);
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT ${ROW_COLUMNS} FROM baton_notifications WHERE ${where.join(' AND ')}
      ORDER BY id DESC LIMIT ?`,
    [...params, f.limit],
  );
  return rows.map(toNoticeRow);
}

/** The outbox at a glance, for `/metrics` and `baton status`. */
export interface OutboxState {
  /** Rows waiting to be sent (pending or being sent), per target. */
  pending: Map<string, number>;
  /** Age in seconds of the oldest row waiting, per target. */
  oldestPendingSeconds: Map<string, number>;
  /** Rows given up on since `since`, per target. */
  failedRecently: Map<string, number>;
  /** Rows that are waiting and have failed at least once, per target. */
  retrying: Map<string, number>;
}

export async function outboxState(
  db: Queryable,
  namespace: string,
  since: Date,
): Promise<OutboxState> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT target,
            SUM(status IN ('pending', 'sending')) AS pending,
            SUM(status IN ('pending', 'sending') AND attempts > 0) AS retrying,
            TIMESTAMPDIFF(MICROSECOND, MIN(IF(status IN ('pending', 'sending'), created_at, NULL)),
                          NOW(3)) / 1e6 AS oldest,
            SUM(status = 'failed' AND created_at >= ?) AS failed_recently
       FROM baton_notifications
      WHERE namespace = ? AND (status IN ('pending', 'sending') OR (status = 'failed' AND created_at >= ?))
      GROUP BY target`,
    [since, namespace, since],
  );
  const state: OutboxState = {
    pending: new Map(),
    oldestPendingSeconds: new Map(),
    failedRecently: new Map(),
    retrying: new Map(),
  };
  for (const r of rows) {
    const target = String(r.target);
    state.pending.set(target, Number(r.pending));
    state.retrying.set(target, Number(r.retrying));
    if (r.oldest != null) state.oldestPendingSeconds.set(target, Number(r.oldest));
    state.failedRecently.set(target, Number(r.failed_recently));
  }
  return state;
}
