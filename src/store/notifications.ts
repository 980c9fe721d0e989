/**
 * `baton_notifications`, the outbox (docs/notifications.md). Its rows are written by whoever
 * records an event — in the same transaction as the event (`enqueueNotices`, called by the
 * verdict, the `missed` mark and the reaper's `lost`) — and moved along by the deliverer
 * (daemon/notifier.ts): claimed, held by the throttle, folded into a summary, sent, retried,
 * given up.
 *
 * The life of a row:
 *
 *   (insert) ──▶ pending ──claim──▶ sending ──▶ sent
 *                  ▲  │                │  └───▶ failed     (not retryable, or too many tries)
 *                  │  │                └──────▶ pending    (retry, `due_at` later)
 *                  │  └──throttle──▶ held ──▶ folded       (told in a summary or a recovery)
 *                  └── a claim that lapsed (`claim_until` passed: its deliverer died)
 *
 * The unique key `(namespace, event, subject, fire, slot, rerun, target)` is what makes an event
 * one row however many runners record it.
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { truncate } from '../text.js';
import { deleteInBatches } from './batch-delete.js';
import type { Queryable } from './deadline.js';

/** An event's kind as the outbox stores it: a job's event, or baton's own `summary` and `test`. */
export type NoticeKind =
  | 'failed'
  | 'timeout'
  | 'lost'
  | 'missed'
  | 'upstream'
  | 'recovered'
  | 'no-success'
  | 'runner-gone'
  | 'detached'
  | 'no-eligible-runner'
  | 'slow'
  | 'too-short'
  | 'blackout-started'
  | 'blackout-ended'
  | 'summary'
  | 'test';

/**
 * The events the throttle sums up: failures of one kind or another — of the run, or of the chain
 * (`upstream`: a child job its parents did not let run, docs/dependencies.md).
 */
export const FAILURE_EVENTS: readonly NoticeKind[] = [
  'failed',
  'timeout',
  'lost',
  'missed',
  'upstream',
];

export type NoticeStatus = 'pending' | 'sending' | 'sent' | 'failed' | 'held' | 'folded';

/** What an event is about: the fire (or the episode) and its subject. */
export interface NoticeScope {
  namespace: string;
  /** The job; the runner's host for `runner-gone`. */
  subject: string;
  /** The fire's instant, or when the episode began. */
  fire: Date;
  slot?: number;
  rerun?: number;
}

export interface Notice extends NoticeScope {
  event: NoticeKind;
  /** Target names; one row each. */
  targets: readonly string[];
  runId: number | null;
  details?: Record<string, unknown> | null;
  /** Already let through the throttle (a summary, a test): decided when written. */
  decided?: boolean;
}

const LAST_ERROR_MAX = 1024;

/**
 * What an `upstream` event says (notify/event.ts reads it back): the parent that did not let the
 * child run, the parent's run at the fire (null when it had none), that run's status (`failed`,
 * `missed`, `skipped`, `running` past the deadline, …; null without a run), and the reason as the
 * skip row has it.
 */
export interface UpstreamDetails {
  parent: string;
  parentRunId: number | null;
  parentStatus: string | null;
  reason: string;
}

/**
 * The `upstream` event of a child skipped because of its parents, for `enqueueNotices` in the
 * transaction that writes the skip: `scope` is the child's fire (subject: the child; `rerun`: the
 * chain's generation), `runId` the `upstream` skip row.
 */
export function upstreamNotice(
  scope: NoticeScope,
  targets: readonly string[],
  runId: number,
  details: UpstreamDetails,
): Notice {
  return { ...scope, event: 'upstream', targets, runId, details: { ...details } };
}

/**
 * Writes an event's rows, one per target; a row that exists already (another runner recorded the
 * same event) is left as it is. Returns how many rows are new.
 */
export async function enqueueNotices(db: Queryable, notices: readonly Notice[]): Promise<number> {
  const values: unknown[][] = [];
  for (const n of notices) {
    for (const target of n.targets) {
      values.push([
        n.namespace,
        n.event,
        n.subject,
        n.fire,
        n.slot ?? 0,
        n.rerun ?? 0,
        target,
        n.runId,
        n.details == null ? null : JSON.stringify(n.details),
        n.decided ? 1 : 0,
      ]);
    }
  }
  if (values.length === 0) return 0;
  // INSERT IGNORE: the values are checked before they get here, so what it ignores is the
  // duplicate key, which is the point. (ON DUPLICATE KEY UPDATE id = id would report a row
  // affected: mysql2 connects with CLIENT_FOUND_ROWS.)
  const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, IF(? = 1, NOW(3), NULL), 'pending', NOW(3), NOW(3))`;
  const [res] = await db.query<ResultSetHeader>(
    `INSERT IGNORE INTO baton_notifications (namespace, event, subject, fire, slot, rerun, target,
       run_id, details, decided_at, status, created_at, due_at)
     VALUES ${values.map(() => row).join(', ')}`,
    values.flat(),
  );
  return res.affectedRows;
}

/**
 * How many of the job's finished runs before `runId` (by fire) failed in a row (failed, timeout, lost),
 * newest first, counted up to `limit`: what `notify: {after}` is judged by — a failure is told
 * when the `after − 1` before it failed too, a success is a recovery when the `after` before it
 * did. Read inside the verdict's transaction. Winner rows only, by fire (the fire key's order:
 * an index range of a few entries however long the history — by finish time the whole job's
 * history was read and sorted in every verdict); `killed` and
 * `interrupted` runs (an operator's, a graceful stop) neither count nor end a streak, and fires
 * nobody ran (skipped, missed) are not runs.
 */
export async function failuresInARow(
  db: Queryable,
  namespace: string,
  job: string,
  runId: number,
  limit: number,
): Promise<number> {
  if (limit < 1) return 0;
  // Only the fires before the run's own: a `lost` a reaper writes late, after the job's next
  // run has its verdict, is judged by the streak it ended, not by the success after it.
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT r.status FROM baton_runs r JOIN baton_runs me ON me.id = ?
      WHERE r.namespace = ? AND r.job = ? AND r.winner >= 1 AND r.id <> me.id
        AND r.status IN ('done', 'failed', 'timeout', 'lost')
        AND (r.scheduled_at < me.scheduled_at OR (r.scheduled_at = me.scheduled_at
          AND (r.rerun < me.rerun OR (r.rerun = me.rerun AND r.id < me.id))))
      ORDER BY r.scheduled_at DESC, r.rerun DESC, r.id DESC LIMIT ?`,
    [runId, namespace, job, limit],
  );
  const done = rows.findIndex((r) => r.status === 'done');
  return done === -1 ? rows.length : done;
}

/** A row as the deliverer works with it. */
export interface NoticeRow {
  id: number;
  event: NoticeKind;
  subject: string;
  fire: Date;
  slot: number;
  rerun: number;
  target: string;
  runId: number | null;
  status: NoticeStatus;
  createdAt: Date;
  decidedAt: Date | null;
  attempts: number;
  details: Record<string, unknown> | null;
  sentAt: Date | null;
  responseStatus: number | null;
  lastError: string | null;
  claimedBy: string | null;
  foldedInto: number | null;
}

export const ROW_COLUMNS = `id, event, subject, fire, slot, rerun, target, run_id, status, created_at,
  decided_at, attempts, details, sent_at, response_status, last_error, claimed_by, folded_into`;

export function toNoticeRow(r: RowDataPacket): NoticeRow {
  return {
    id: Number(r.id),
    event: r.event as NoticeKind,
    subject: String(r.subject),
    fire: r.fire as Date,
    slot: Number(r.slot),
    rerun: Number(r.rerun),
    target: String(r.target),
    runId: r.run_id == null ? null : Number(r.run_id),
    status: r.status as NoticeStatus,
    createdAt: r.created_at as Date,
    decidedAt: (r.decided_at as Date | null) ?? null,
    attempts: Number(r.attempts),
    details: r.details == null ? null : (JSON.parse(String(r.details)) as Record<string, unknown>),
    sentAt: (r.sent_at as Date | null) ?? null,
    responseStatus: r.response_status == null ? null : Number(r.response_status),
    lastError: (r.last_error as string | null) ?? null,
    claimedBy: (r.claimed_by as string | null) ?? null,
    foldedInto: r.folded_into == null ? null : Number(r.folded_into),
  };
}

/**
 * Whether anything is due for these targets: one indexed probe, so that a runner with nothing to
 * deliver does not take the notify lock every second.
 */
export async function anythingDue(
  db: Queryable,
  namespace: string,
  targets: readonly string[],
): Promise<boolean> {
  if (targets.length === 0) return false;
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT 1 FROM baton_notifications
      WHERE namespace = ? AND target IN (?)
        AND ((status = 'pending' AND due_at <= NOW(3))
             OR (status = 'sending' AND claim_until < NOW(3))
             OR status = 'held')
      LIMIT 1`,
    [namespace, targets],
  );
  return rows.length > 0;
}

/**
 * The rows due for delivery to these targets, oldest first: pending ones whose time has come, and
 * ones whose claim lapsed (the deliverer holding them died or was cut off). Read under the notify
 * lock (daemon/notifier.ts), which is what keeps two deliverers from deciding the same rows.
 */
export async function dueNotices(
  db: Queryable,
  namespace: string,
  targets: readonly string[],
  limit: number,
): Promise<NoticeRow[]> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT ${ROW_COLUMNS} FROM baton_notifications
      WHERE namespace = ? AND target IN (?)
        AND ((status = 'pending' AND due_at <= NOW(3))
             OR (status = 'sending' AND claim_until < NOW(3)))
      ORDER BY id LIMIT ?`,
    [namespace, targets, limit],
  );
  return rows.map(toNoticeRow);
}

/**
 * When the throttle last let a failure (or a summary) of `subject` through to `target`: the start
 * of its window. Null when none was.
 */
export async function lastToldFailure(
  db: Queryable,
  namespace: string,
  subject: string,
  target: string,
): Promise<Date | null> {
  const [[row]] = await db.query<RowDataPacket[]>(
    `SELECT MAX(decided_at) AS told FROM baton_notifications
      WHERE namespace = ? AND subject = ? AND target = ?
        AND event IN (?)
        AND status IN ('pending', 'sending', 'sent', 'failed') AND decided_at IS NOT NULL`,
    [namespace, subject, target, [...FAILURE_EVENTS, 'summary']],
  );
  return (row?.told as Date | null) ?? null;
}

/** The throttle's verdict on a new row: let through (`decided_at` now), or held. */
export async function decide(db: Queryable, id: number, held: boolean): Promise<void> {
  await db.query(
    `UPDATE baton_notifications SET decided_at = NOW(3), status = IF(?, 'held', status)
      WHERE id = ? AND decided_at IS NULL`,
    [held ? 1 : 0, id],
  );
}

/** Held rows, per subject and target: what a summary would tell. */
export interface HeldGroup {
  subject: string;
  target: string;
  count: number;
  maxId: number;
  firstFire: Date;
  lastFire: Date;
  events: NoticeKind[];
}

export async function heldGroups(
  db: Queryable,
  namespace: string,
  targets: readonly string[],
): Promise<HeldGroup[]> {
  if (targets.length === 0) return [];
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT subject, target, COUNT(*) AS n, MAX(id) AS max_id, MIN(fire) AS first_fire,
            MAX(fire) AS last_fire, GROUP_CONCAT(DISTINCT event ORDER BY event) AS events
       FROM baton_notifications
      WHERE namespace = ? AND status = 'held' AND target IN (?)
      GROUP BY subject, target`,
    [namespace, targets],
  );
  return rows.map((r) => ({
    subject: String(r.subject),
    target: String(r.target),
    count: Number(r.n),
    maxId: Number(r.max_id),
    firstFire: r.first_fire as Date,
    lastFire: r.last_fire as Date,
    events: String(r.events).split(',') as NoticeKind[],
  }));
}

/** Marks held rows (up to `maxId`) as told by row `into` (a summary or a recovery). */
export async function foldHeld(
  db: Queryable,
  namespace: string,
  subject: string,
  target: string,
  maxId: number,
  into: number,
): Promise<number> {
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_notifications SET status = 'folded', folded_into = ?
      WHERE namespace = ? AND subject = ? AND target = ? AND status = 'held' AND id <= ?`,
    [into, namespace, subject, target, maxId],
  );
  return res.affectedRows;
}

/** The id of an event's row for one target (after an `enqueueNotices` that may have met it). */
export async function noticeId(
  db: Queryable,
  scope: NoticeScope & { event: NoticeKind; target: string },
): Promise<number | null> {
  const [[row]] = await db.query<RowDataPacket[]>(
    `SELECT id FROM baton_notifications
      WHERE namespace = ? AND event = ? AND subject = ? AND fire = ? AND slot = ? AND rerun = ?
        AND target = ?`,
    [
      scope.namespace,
      scope.event,
      scope.subject,
      scope.fire,
      scope.slot ?? 0,
      scope.rerun ?? 0,
      scope.target,
    ],
  );
  return row ? Number(row.id) : null;
}

/** Adds facts to a row (a recovery's count of failures it tells of). */
export async function mergeDetails(
  db: Queryable,
  id: number,
  details: Record<string, unknown>,
): Promise<void> {
  await db.query(
    `UPDATE baton_notifications
        SET details = JSON_MERGE_PATCH(COALESCE(details, '{}'), ?) WHERE id = ?`,
    [JSON.stringify(details), id],
  );
}

/**
 * Claims rows for delivery by `claimant` until `claim_until`: conditional on each still being due
 * (pending or lapsed), so a row is claimed once. Returns the ids claimed.
 */
export async function claimNotices(
  db: Queryable,
  ids: readonly number[],
  claimant: string,
  claimMs: number,
): Promise<number[]> {
  if (ids.length === 0) return [];
  await db.query(
    `UPDATE baton_notifications
        SET status = 'sending', claimed_by = ?,
            claim_until = NOW(3) + INTERVAL ? MICROSECOND
      WHERE id IN (?) AND ((status = 'pending' AND due_at <= NOW(3))
                           OR (status = 'sending' AND claim_until < NOW(3)))`,
    [claimant, claimMs * 1000, ids],
  );
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT id FROM baton_notifications WHERE id IN (?) AND claimed_by = ? AND status = 'sending'`,
    [ids, claimant],
  );
  return rows.map((r) => Number(r.id));
}

/** How a delivery ended, as the row records it. */
export type DeliveryRecord =
  | { outcome: 'sent'; responseStatus: number | null }
  | {
      outcome: 'retry';
      responseStatus: number | null;
      error: string;
      /** From now. */
      retryInMs: number;
    }
  | { outcome: 'failed'; responseStatus: number | null; error: string };

/**
 * Records a delivery's outcome — only while `claimant` still holds the row: a claim that lapsed
 * and was taken over belongs to the new deliverer now.
 */
export async function recordDelivery(
  db: Queryable,
  id: number,
  claimant: string,
  d: DeliveryRecord,
): Promise<boolean> {
  const error = d.outcome === 'sent' ? null : truncate(d.error, LAST_ERROR_MAX);
  const [res] = await db.query<ResultSetHeader>(
    `UPDATE baton_notifications
        SET status = ?, attempts = attempts + 1, response_status = ?, last_error = ?,
            sent_at = IF(? = 'sent', NOW(3), sent_at),
            due_at = IF(? = 'pending', NOW(3) + INTERVAL ? MICROSECOND, due_at),
            claimed_by = NULL, claim_until = NULL
      WHERE id = ? AND claimed_by = ? AND status = 'sending'`,
    [
      d.outcome === 'retry' ? 'pending' : d.outcome,
      d.responseStatus,
      error,
      d.outcome,
      d.outcome === 'retry' ? 'pending' : d.outcome,
      d.outcome === 'retry' ? d.retryInMs * 1000 : 0,
      id,
      claimant,
    ],
  );
  return res.affectedRows === 1;
}

/** The outbox's rows that are over: told, given up, or told by a summary. */
const FINISHED_NOTICES: readonly NoticeStatus[] = ['sent', 'failed', 'folded'];

/**
 * Deletes finished rows last tried before `before` (retention's `runs` bound, store/prune.ts), in
 * batches by primary key: the read is an index range of `(namespace, status, due_at)`. Rows still
 * to be told (pending, sending, held) are never deleted. Returns the rows and statements.
 */
export async function deleteNoticesBefore(
  db: Queryable,
  namespace: string,
  before: Date,
  batchSize: number,
  signal?: AbortSignal,
): Promise<{ rows: number; batches: number }> {
  const total = { rows: 0, batches: 0 };
  for (const status of FINISHED_NOTICES) {
    const done = await deleteInBatches(
      db,
      {
        selectSql: `SELECT id FROM baton_notifications
                     WHERE namespace = ? AND status = ? AND due_at < ? LIMIT ?`,
        params: [namespace, status, before],
        deleteSql: 'DELETE FROM baton_notifications WHERE id IN (?) AND status = ?',
        deleteParams: [status],
      },
      batchSize,
      signal,
    );
    total.rows += done.rows;
    total.batches += done.batches;
  }
  return total;
}
