/**
 * A run's soft duration limits on its `baton_runs` row (a job's `duration: {warn, min}`,
 * config/duration-limits.ts; migration 0025): its warn instant (`warn_at`), and the two flags
 * with their events — `slow_at` (`slow`) and `too_short` (`too-short`).
 *
 * Exactly once: a flag is set by an UPDATE conditional on its being unset, in the transaction
 * that enqueues its event (store/notifications.ts), so whoever sets it — the run's own timer
 * (fire/slow-watch.ts), its verdict (run-verdicts.ts `finishRun`), or a reaper that declares the
 * run lost (run-verdicts.ts `markLost`, on any runner) — is the one writer that tells it; the
 * others change no row and enqueue nothing. The outbox's unique key would fold a second telling
 * anyway; the flag is what makes the history say it once, and what a reaper judges by.
 *
 * Every judgement is the database's, on the row's own times: slow when `warn_at` has passed by
 * the end of the run (`finished_at`) or, while it runs, by `NOW(3)`; too short when `finished_at`
 * is less than `min` after `started_at` (the duration the history shows).
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { inTransaction, type Queryable } from './deadline.js';
import { enqueueNotices, type NoticeScope } from './notifications.js';

/** Whom a run's `slow` or `too-short` is told to, and which fire it is about. */
export interface LimitNotice {
  scope: NoticeScope;
  targets: readonly string[];
}

/**
 * What a `slow` or `too-short` event says (notify/event.ts reads it back), fixed when the flag is
 * set so that every try tells the same: the runner that ran it, the run's status then (`running`
 * for a slow run told while it ran), how long it had run (`ranMs`: until it was told, or its
 * whole duration once it had ended) and the limit it passed (`limitMs`: its warn, or `min`).
 */
export interface LimitDetails {
  host: string;
  status: string;
  ranMs: number;
  limitMs: number;
}

/**
 * A relative warn (`p95x3`) fixed on a running row, once the winner has computed it from the
 * job's history: `started_at` plus `warnMs`. (A fixed warn is written by the claim itself:
 * fire-writes.ts.) Not over a warn already there, nor on a row that has ended.
 */
export async function setWarn(db: Queryable, runId: number, warnMs: number): Promise<void> {
  await db.query(
    `UPDATE baton_runs SET warn_at = started_at + INTERVAL ? MICROSECOND
      WHERE id = ? AND status = 'running' AND warn_at IS NULL`,
    [Math.round(warnMs) * 1000, runId],
  );
}

/**
 * How long the job's latest successful runs took, in ms, newest first (at most `limit`): what a
 * relative warn is computed from. By fire, along `baton_runs_job_status (namespace, job, status,
 * scheduled_at)`: `limit` index entries whatever the history's length.
 */
export async function recentDurations(
  db: Queryable,
  namespace: string,
  job: string,
  limit: number,
): Promise<number[]> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT TIMESTAMPDIFF(MICROSECOND, started_at, finished_at) DIV 1000 AS ms FROM baton_runs
      WHERE namespace = ? AND job = ? AND status = 'done' AND winner >= 1
        AND finished_at IS NOT NULL
      ORDER BY scheduled_at DESC LIMIT ?`,
    [namespace, job, limit],
  );
  return rows.map((r) => Number(r.ms));
}

/**
 * Flags the run slow when it is past its warn — by its end once it has ended, by now while it
 * runs — and it is not flagged yet; with `told`, enqueues its `slow` event in the same
 * statement's transaction (the caller's `tx` must be one when `told` has targets). Returns
 * whether this call flagged it.
 */
export async function flagSlow(
  tx: Queryable,
  runId: number,
  told: LimitNotice | undefined,
): Promise<boolean> {
  const [res] = await tx.query<ResultSetHeader>(
    `UPDATE baton_runs SET slow_at = NOW(3)
      WHERE id = ? AND slow_at IS NULL AND warn_at IS NOT NULL
        AND warn_at <= COALESCE(finished_at, NOW(3))`,
    [runId],
  );
  if (res.affectedRows !== 1) return false;
  if (told && told.targets.length > 0) {
    const details = await limitDetails(
      tx,
      runId,
      'TIMESTAMPDIFF(MICROSECOND, started_at, COALESCE(finished_at, slow_at))',
      'TIMESTAMPDIFF(MICROSECOND, started_at, warn_at)',
    );
    await enqueueNotices(tx, [
      { ...told.scope, event: 'slow', targets: told.targets, runId, details: { ...details } },
    ]);
  }
  return true;
}

/** What the run's own timer learned (fire/slow-watch.ts). */
export type SlowMark =
  /** This call flagged it (and enqueued its event). */
  | { flagged: true }
  /**
   * Not flagged by this call: already flagged, ended, or without a warn (`dueInMs` null: nothing
   * to wait for); or not due yet by the database's clock (`dueInMs`: how long until it is).
   */
  | { flagged: false; dueInMs: number | null };

/**
 * The run's own timer at its warn: flags it slow (and enqueues its event) if it is due by the
 * database's clock; if the timer came early (it is armed from this runner's measure, before the
 * claim), says how long until it is due.
 */
export async function markSlow(
  db: Queryable,
  runId: number,
  told: LimitNotice | undefined,
): Promise<SlowMark> {
  const flagged =
    told && told.targets.length > 0
      ? await inTransaction(db, (tx) => flagSlow(tx, runId, told))
      : await flagSlow(db, runId, undefined);
  if (flagged) return { flagged: true };
  const [[row]] = await db.query<RowDataPacket[]>(
    `SELECT TIMESTAMPDIFF(MICROSECOND, NOW(3), warn_at) DIV 1000 AS due_ms FROM baton_runs
      WHERE id = ? AND status = 'running' AND slow_at IS NULL AND warn_at IS NOT NULL`,
    [runId],
  );
  // Not found: flagged by someone else, ended (its verdict judged it), or no warn. Found with
  // its warn passed a moment after the UPDATE: due now.
  return { flagged: false, dueInMs: row ? Math.max(0, Number(row.due_ms)) : null };
}

/**
 * Flags a `done` run shorter than `minMs` (`finished_at` less than that after `started_at`) and,
 * with `told`, enqueues its `too-short` event; in the verdict's transaction (run-verdicts.ts).
 * Returns whether this call flagged it.
 */
export async function flagTooShort(
  tx: Queryable,
  runId: number,
  minMs: number,
  told: LimitNotice | undefined,
): Promise<boolean> {
  const [res] = await tx.query<ResultSetHeader>(
    `UPDATE baton_runs SET too_short = 1
      WHERE id = ? AND status = 'done' AND too_short = 0
        AND finished_at < started_at + INTERVAL ? MICROSECOND`,
    [runId, Math.round(minMs) * 1000],
  );
  if (res.affectedRows !== 1) return false;
  if (told && told.targets.length > 0) {
    const details = await limitDetails(
      tx,
      runId,
      'TIMESTAMPDIFF(MICROSECOND, started_at, finished_at)',
      String(Math.round(minMs) * 1000),
    );
    await enqueueNotices(tx, [
      { ...told.scope, event: 'too-short', targets: told.targets, runId, details: { ...details } },
    ]);
  }
  return true;
}

/** The facts of a flag's event, read from the row in the flag's transaction. */
async function limitDetails(
  tx: Queryable,
  runId: number,
  ranMicrosSql: string,
  limitMicrosSql: string,
): Promise<LimitDetails> {
  const [[row]] = await tx.query<RowDataPacket[]>(
    `SELECT host, status, ${ranMicrosSql} DIV 1000 AS ran_ms, ${limitMicrosSql} DIV 1000 AS limit_ms
       FROM baton_runs WHERE id = ?`,
    [runId],
  );
  return {
    host: String(row?.host ?? ''),
    status: String(row?.status ?? ''),
    ranMs: Number(row?.ran_ms ?? 0),
    limitMs: Number(row?.limit_ms ?? 0),
  };
}
