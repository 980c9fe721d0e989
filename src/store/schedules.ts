/**
 * `baton_schedules` and `baton_schedule_revisions`, the owner: library mode's schedules created at
 * run time (docs/library-mode.md, "Schedules created at run time"; migrations 0027 and 0028).
 *
 * Every change of a namespace's schedules — a new key, a changed definition, a removal — moves
 * the namespace's revision up by one, in the change's own transaction, and stamps the row with it.
 * The writer takes the revision row's lock first (`SELECT … FOR UPDATE`) and holds it to its
 * commit, so revisions commit in the order they are given: a replica that has read every row up
 * to revision R (`schedulesAfter`) never meets a later commit at or below R, and one cheap read
 * of the revision row (store/replica-inbox.ts) says whether anything changed.
 *
 * An upsert is idempotent: the same key twice is one row (UNIQUE (namespace, job, schedule_key),
 * written by INSERT … ON DUPLICATE KEY UPDATE), and a definition equal to the live one writes
 * nothing and leaves the revision where it was — so an application that upserts every tenant's
 * schedule at each start, on every replica, costs one read per key and wakes nobody. The equality
 * is read first without a lock; a change is read again under the revision's lock, so two
 * replicas upserting one key at once give one row, one revision, and the second finds it equal.
 *
 * A removal keeps the row (`removed_at`, a new revision) so that every replica reads it; rows
 * removed before the runs' retention bound are pruned (store/prune.ts).
 */
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { deleteInBatches } from './batch-delete.js';
import { dbErrorCategory } from '../errors.js';
import { inTransaction, type Queryable } from './deadline.js';

/** What a schedule is: its timing and the parameters its runs get. */
export interface ScheduleDefinition {
  /** The cron expression (checked by the caller as schedules.yaml's are). */
  schedule: string;
  /** An IANA time zone. */
  timezone: string;
  /** Given to each run as `ctx.params`, recorded on its row; `{}` for none. */
  params: Readonly<Record<string, string>>;
}

/** One row of baton_schedules. */
export interface StoredSchedule extends ScheduleDefinition {
  job: string;
  key: string;
  /** The namespace's revision at the row's last change. */
  revision: number;
  createdAt: Date;
  /** Its definition's last change, or its return after a removal. */
  updatedAt: Date;
  /** null while the schedule is live. */
  removedAt: Date | null;
}

export type UpsertStatus = 'created' | 'changed' | 'unchanged';

export interface UpsertOutcome {
  status: UpsertStatus;
  /** The row's revision after the upsert. */
  revision: number;
}

const COLUMNS =
  'job, schedule_key, schedule, timezone, params, revision, created_at, updated_at, removed_at';

interface ScheduleRow extends RowDataPacket {
  job: string;
  schedule_key: string;
  schedule: string;
  timezone: string;
  params: string | null;
  revision: number | string;
  created_at: Date;
  updated_at: Date;
  removed_at: Date | null;
}

/**
 * A row as stored. Its params are parsed here; a value that is not an object of strings (a row
 * someone wrote by hand) is kept as the text it is, for the reader to refuse (`paramsOf`).
 */
function toSchedule(r: ScheduleRow): StoredSchedule & { paramsText: string | null } {
  return {
    job: String(r.job),
    key: String(r.schedule_key),
    schedule: String(r.schedule),
    timezone: String(r.timezone),
    params: paramsOf(r.params) ?? {},
    paramsText: r.params == null ? null : String(r.params),
    revision: Number(r.revision),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    removedAt: r.removed_at,
  };
}

/** The stored params as an object of strings; null when the text is not one. */
export function paramsOf(text: string | null): Record<string, string> | null {
  if (text == null) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (value == null || typeof value !== 'object' || Array.isArray(value)) return null;
  const entries = Object.entries(value as Record<string, unknown>);
  if (!entries.every(([, v]) => typeof v === 'string')) return null;
  return Object.fromEntries(entries) as Record<string, string>;
}

/** The params as stored: JSON with the names sorted (so equal params are equal text); null: none. */
export function storedParams(params: Readonly<Record<string, string>>): string | null {
  const names = Object.keys(params).sort();
  if (names.length === 0) return null;
  return JSON.stringify(Object.fromEntries(names.map((n) => [n, params[n]])));
}

function sameDefinition(
  row: StoredSchedule & { paramsText: string | null },
  d: ScheduleDefinition,
) {
  return (
    row.removedAt == null &&
    row.schedule === d.schedule &&
    row.timezone === d.timezone &&
    row.paramsText === storedParams(d.params)
  );
}

async function readSchedule(
  db: Queryable,
  namespace: string,
  job: string,
  key: string,
): Promise<(StoredSchedule & { paramsText: string | null }) | null> {
  const [rows] = await db.query<ScheduleRow[]>(
    `SELECT ${COLUMNS} FROM baton_schedules WHERE namespace = ? AND job = ? AND schedule_key = ?`,
    [namespace, job, key],
  );
  return rows[0] ? toSchedule(rows[0]) : null;
}

/**
 * Runs `change` holding the namespace's revision lock, with the revision as it stands; `change`
 * returns the new revision it wrote, or null when it changed nothing (the revision stays). The
 * revision row is created first if the namespace has none (INSERT IGNORE, outside the
 * transaction: two first writers would otherwise deadlock on their gap locks).
 */
async function underRevision<T>(
  db: Queryable,
  namespace: string,
  change: (tx: Queryable, revision: number) => Promise<{ value: T; revision: number | null }>,
): Promise<T> {
  let created = false;
  for (let attempt = 1; ; attempt++) {
    let done: { value: T } | null;
    try {
      done = await inTransaction(db, (tx) => changeUnderLock(tx, namespace, change));
    } catch (err) {
      // Writers of one namespace queue on its revision row and never deadlock each other; the
      // inserts of two namespaces may (their gaps of the unique key meet): tried again.
      if (dbErrorCategory(err) !== 'lock-conflict' || attempt >= LOCK_CONFLICT_TRIES) throw err;
      continue;
    }
    if (done) return done.value;
    if (created) throw new Error(`no revision row for namespace ${namespace}`);
    await db.query(
      'INSERT IGNORE INTO baton_schedule_revisions (namespace, revision) VALUES (?, 0)',
      [namespace],
    );
    created = true;
  }
}

/** How often a change that met a deadlock or a lock wait timeout is tried. */
const LOCK_CONFLICT_TRIES = 3;

/** One try of `underRevision`: null when the namespace has no revision row yet. */
async function changeUnderLock<T>(
  tx: Queryable,
  namespace: string,
  change: (tx: Queryable, revision: number) => Promise<{ value: T; revision: number | null }>,
): Promise<{ value: T } | null> {
  const [[row]] = await tx.query<RowDataPacket[]>(
    'SELECT revision FROM baton_schedule_revisions WHERE namespace = ? FOR UPDATE',
    [namespace],
  );
  if (!row) return null;
  const { value, revision } = await change(tx, Number(row.revision));
  if (revision != null) {
    await tx.query('UPDATE baton_schedule_revisions SET revision = ? WHERE namespace = ?', [
      revision,
      namespace,
    ]);
  }
  return { value };
}

/**
 * Creates the schedule `key` of `job`, or changes it; an equal definition (live) writes nothing.
 * `db` must be a pool or a connection outside a transaction (the change is a transaction).
 */
export async function upsertSchedule(
  db: Queryable,
  namespace: string,
  job: string,
  key: string,
  d: ScheduleDefinition,
): Promise<UpsertOutcome> {
  const seen = await readSchedule(db, namespace, job, key);
  if (seen && sameDefinition(seen, d)) return { status: 'unchanged', revision: seen.revision };
  return underRevision<UpsertOutcome>(db, namespace, async (tx, current) => {
    // Read again under the lock: another replica may have written this very definition. A
    // plain read: its snapshot is taken now, after the lock, so it sees every earlier writer's
    // commit; a locking one would hold a gap of the unique key that another namespace's insert
    // may need.
    const now = await readSchedule(tx, namespace, job, key);
    if (now && sameDefinition(now, d)) {
      return { value: { status: 'unchanged', revision: now.revision }, revision: null };
    }
    const revision = current + 1;
    await tx.query<ResultSetHeader>(
      `INSERT INTO baton_schedules
         (namespace, job, schedule_key, schedule, timezone, params, revision, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, NOW(3), NOW(3))
       ON DUPLICATE KEY UPDATE schedule = VALUES(schedule), timezone = VALUES(timezone),
         params = VALUES(params), revision = VALUES(revision), updated_at = VALUES(updated_at),
         removed_at = NULL`,
      [namespace, job, key, d.schedule, d.timezone, storedParams(d.params), revision],
    );
    const status: UpsertStatus = now && now.removedAt == null ? 'changed' : 'created';
    return { value: { status, revision }, revision };
  });
}

/** Removes the schedule `key` of `job`; false when there was no live one (nothing changes). */
export async function removeSchedule(
  db: Queryable,
  namespace: string,
  job: string,
  key: string,
): Promise<boolean> {
  const seen = await readSchedule(db, namespace, job, key);
  if (!seen || seen.removedAt != null) return false;
  return underRevision(db, namespace, async (tx, current) => {
    const [res] = await tx.query<ResultSetHeader>(
      `UPDATE baton_schedules SET removed_at = NOW(3), revision = ?
        WHERE namespace = ? AND job = ? AND schedule_key = ? AND removed_at IS NULL`,
      [current + 1, namespace, job, key],
    );
    const removed = res.affectedRows === 1;
    return { value: removed, revision: removed ? current + 1 : null };
  });
}

/** The live schedules of the namespace (of `job` only, when given), by job and key. */
export async function listSchedules(
  db: Queryable,
  namespace: string,
  job?: string,
): Promise<StoredSchedule[]> {
  const [rows] = await db.query<ScheduleRow[]>(
    `SELECT ${COLUMNS} FROM baton_schedules
      WHERE namespace = ?${job != null ? ' AND job = ?' : ''} AND removed_at IS NULL
      ORDER BY job, schedule_key`,
    job != null ? [namespace, job] : [namespace],
  );
  return rows.map(toSchedule).map(({ paramsText: _, ...s }) => s);
}

/** One schedule's row, live or removed (`baton explain --key`); null when it never existed. */
export async function findSchedule(
  db: Queryable,
  namespace: string,
  job: string,
  key: string,
): Promise<StoredSchedule | null> {
  const row = await readSchedule(db, namespace, job, key);
  if (!row) return null;
  const { paramsText: _, ...s } = row;
  return s;
}

/** How many live schedules each job of the namespace has (`baton status`, `baton list`). */
export async function countSchedules(
  db: Queryable,
  namespace: string,
): Promise<Map<string, number>> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT job, COUNT(*) AS n FROM baton_schedules
      WHERE namespace = ? AND removed_at IS NULL GROUP BY job`,
    [namespace],
  );
  return new Map(rows.map((r) => [String(r.job), Number(r.n)]));
}

/** The namespace's revision: 0 before its first schedule. */
export async function schedulesRevision(db: Queryable, namespace: string): Promise<number> {
  const [[row]] = await db.query<RowDataPacket[]>(
    'SELECT revision FROM baton_schedule_revisions WHERE namespace = ?',
    [namespace],
  );
  return row ? Number(row.revision) : 0;
}

/** A row as a replica reads it: its params kept as text too, for the reader's own check. */
export type ReadSchedule = StoredSchedule & { paramsText: string | null };

/**
 * Everything a replica starts from: the namespace's revision, then its live rows (read after it:
 * a change committed between the two reads is among the rows or past the revision, read next).
 */
export async function readAllSchedules(
  db: Queryable,
  namespace: string,
): Promise<{ revision: number; rows: ReadSchedule[] }> {
  const revision = await schedulesRevision(db, namespace);
  const [rows] = await db.query<ScheduleRow[]>(
    `SELECT ${COLUMNS} FROM baton_schedules WHERE namespace = ? AND removed_at IS NULL`,
    [namespace],
  );
  const read = rows.map(toSchedule);
  return { revision: read.reduce((most, r) => Math.max(most, r.revision), revision), rows: read };
}

/** The rows changed after `revision` (removals included), oldest change first. */
export async function schedulesAfter(
  db: Queryable,
  namespace: string,
  revision: number,
): Promise<ReadSchedule[]> {
  const [rows] = await db.query<ScheduleRow[]>(
    `SELECT ${COLUMNS} FROM baton_schedules
      WHERE namespace = ? AND revision > ? ORDER BY revision`,
    [namespace, revision],
  );
  return rows.map(toSchedule);
}

/** Prunes the rows of schedules removed before `before` (the runs' bound, store/prune.ts). */
export function deleteRemovedSchedulesBefore(
  db: Queryable,
  namespace: string,
  before: Date,
  batchSize: number,
  signal?: AbortSignal,
): Promise<{ rows: number; batches: number }> {
  const batch = {
    selectSql: 'SELECT id FROM baton_schedules WHERE namespace = ? AND removed_at < ? LIMIT ?',
    params: [namespace, before],
    // Only while still removed: a schedule upserted again meanwhile is live.
    deleteSql: 'DELETE FROM baton_schedules WHERE id IN (?) AND removed_at IS NOT NULL',
  };
  return deleteInBatches(db, batch, batchSize, signal);
}

/** How many removed rows `deleteRemovedSchedulesBefore` would prune (a dry run). */
export async function countRemovedSchedulesBefore(
  db: Queryable,
  namespace: string,
  before: Date,
): Promise<number> {
  const [[row]] = await db.query<RowDataPacket[]>(
    'SELECT COUNT(*) AS n FROM baton_schedules WHERE namespace = ? AND removed_at < ?',
    [namespace, before],
  );
  return Number(row?.n ?? 0);
}
