/**
 * `baton_audit`, the record of operators' actions (a manual run, a re-run, a backfill, a kill, a
 * pause, a resume, a job's timing recorded or moved): who, from where, why, with what parameters,
 * and what came of it. Written by
 * the command or the API handler that takes the action, on whichever host; read by `baton audit`
 * and shown beside the runs it touched (`history`, `show`, `explain`).
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { truncate } from '../text.js';
import { deleteInBatches } from './batch-delete.js';
import type { Queryable } from './deadline.js';

export const AUDIT_ACTIONS = [
  'run',
  'rerun',
  'backfill',
  'kill',
  'pause',
  'resume',
  // baton definitions apply: a timing version recorded, a pending one's instant moved.
  'timing',
  'retime',
  // baton blackout: one recorded, one ended early.
  'blackout',
  'blackout-cancel',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Where the action came from: a command on some host, or the write API of a runner. */
export type AuditVia = 'cli' | 'api';

/** `baton_audit.reason` and `.outcome` are VARCHAR(512). */
const TEXT_MAX = 512;

export interface AuditEntry {
  namespace: string;
  action: AuditAction;
  job?: string | null;
  runId?: number | null;
  /** The fire the action is about (a re-run, a backfill step). */
  fire?: Date | null;
  /** The OS user (src/operator.ts) or the API token's name. */
  operator: string;
  via: AuditVia;
  /** The host the action was taken on. */
  host: string;
  reason?: string | null;
  /** Parameters, a range, a grace: stored as JSON. Mask secrets before they get here. */
  details?: Record<string, unknown> | null;
  outcome?: string | null;
}

export interface AuditRecord extends Required<Omit<AuditEntry, 'details'>> {
  id: number;
  at: Date;
  details: Record<string, unknown> | null;
}

/** Records an action; returns its id (for `setActionOutcome`). */
export async function recordAction(db: Queryable, e: AuditEntry): Promise<number> {
  const [res] = await db.query<ResultSetHeader>(
    `INSERT INTO baton_audit (namespace, at, action, job, run_id, fire, operator, via, host,
       reason, details, outcome)
     VALUES (?, NOW(3), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      e.namespace,
      e.action,
      e.job ?? null,
      e.runId ?? null,
      e.fire ?? null,
      truncate(e.operator, 255),
      e.via,
      truncate(e.host, 255),
      e.reason == null ? null : truncate(e.reason, TEXT_MAX),
      e.details == null ? null : JSON.stringify(e.details),
      e.outcome == null ? null : truncate(e.outcome, TEXT_MAX),
    ],
  );
  return res.insertId;
}

/** Says what came of an action recorded before its outcome was known. */
export async function setActionOutcome(
  db: Queryable,
  id: number,
  outcome: string,
  runId?: number | null,
): Promise<void> {
  await db.query(`UPDATE baton_audit SET outcome = ?, run_id = COALESCE(?, run_id) WHERE id = ?`, [
    truncate(outcome, TEXT_MAX),
    runId ?? null,
    id,
  ]);
}

/**
 * Replaces an action's details while it goes on: a backfill's progress (its last fire done), so
 * that a backfill started again with the same range resumes after it (cli/commands/backfill.ts).
 */
export async function setActionDetails(
  db: Queryable,
  id: number,
  details: Record<string, unknown>,
): Promise<void> {
  await db.query('UPDATE baton_audit SET details = ? WHERE id = ?', [JSON.stringify(details), id]);
}

export interface AuditFilter {
  namespace: string;
  since?: Date | null;
  jobs?: readonly string[];
  runIds?: readonly number[];
  limit: number;
}

interface AuditRow extends RowDataPacket {
  id: number;
  namespace: string;
  at: Date;
  action: AuditAction;
  job: string | null;
  run_id: number | null;
  fire: Date | null;
  operator: string;
  via: AuditVia;
  host: string;
  reason: string | null;
  details: string | null;
  outcome: string | null;
}

/** The newest actions first. */
export async function listActions(db: Queryable, f: AuditFilter): Promise<AuditRecord[]> {
  const where = ['namespace = ?'];
  const params: unknown[] = [f.namespace];
  const add = (sql: string, value: unknown) => {
    where.push(sql);
    params.push(value);
  };
  if (f.since) add('at >= ?', f.since);
  if (f.jobs?.length) add('job IN (?)', f.jobs);
  if (f.runIds?.length) add('run_id IN (?)', f.runIds);
  const [rows] = await db.query<AuditRow[]>(
    `SELECT * FROM baton_audit WHERE ${where.join(' AND ')} ORDER BY at DESC, id DESC LIMIT ?`,
    [...params, f.limit],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    namespace: r.namespace,
    at: r.at,
    action: r.action,
    job: r.job,
    runId: r.run_id == null ? null : Number(r.run_id),
    fire: r.fire,
    operator: r.operator,
    via: r.via,
    host: r.host,
    reason: r.reason,
    details: r.details == null ? null : (JSON.parse(r.details) as Record<string, unknown>),
    outcome: r.outcome,
  }));
}

/**
 * Deletes actions taken before `before` (retention's `runs` bound, store/prune.ts), in batches by
 * primary key read from the `(namespace, at)` index. Returns the rows and statements.
 */
export function deleteActionsBefore(
  db: Queryable,
  namespace: string,
  before: Date,
  batchSize: number,
  signal?: AbortSignal,
): Promise<{ rows: number; batches: number }> {
  const batch = {
    selectSql: 'SELECT id FROM baton_audit WHERE namespace = ? AND at < ? LIMIT ?',
    params: [namespace, before],
    deleteSql: 'DELETE FROM baton_audit WHERE id IN (?)',
  };
  return deleteInBatches(db, batch, batchSize, signal);
}
