/**
 * The audit as the commands show it: `baton audit`'s table and JSON, and the operators' actions
 * tied to a run (a kill, a manual run, a re-run: any action recorded with a `run_id`) beside that
 * run in `history`, `show` and `explain`. Read by run id, whatever the action, so a new kind of
 * action shows up there without a change here.
 */
import type { DatabaseTarget } from '../config/database-url.js';
import { DatabaseUnavailableError, isMissingSchemaError } from '../errors.js';
import { listActions, type AuditRecord } from '../store/audit.js';
import type { Queryable } from '../store/deadline.js';
import { formatInstant, oneLine } from '../text.js';

/**
 * Runs `body`; a database without the audit table (never migrated to 0010, or no baton at all)
 * is a clear 69 that says what to do, not a driver error.
 */
export async function withAuditTable<T>(
  target: DatabaseTarget,
  body: () => Promise<T>,
): Promise<T> {
  try {
    return await body();
  } catch (err) {
    if (!isMissingSchemaError(err)) throw err;
    throw new DatabaseUnavailableError(
      `the database at ${target.display} has no baton tables (or not all of them) yet: run ` +
        '`baton migrate` (or start a runner, which migrates) first',
      { cause: err },
    );
  }
}

/** The actions tied to these runs, by run id, newest first (none without the audit table). */
export async function actionsByRun(
  db: Queryable,
  namespace: string,
  runIds: readonly number[],
): Promise<Map<number, AuditRecord[]>> {
  const byRun = new Map<number, AuditRecord[]>();
  if (runIds.length === 0) return byRun;
  let actions: AuditRecord[];
  try {
    actions = await listActions(db, { namespace, runIds, limit: 10_000 });
  } catch (err) {
    if (isMissingSchemaError(err)) return byRun;
    throw err;
  }
  for (const a of actions) {
    if (a.runId == null) continue;
    const list = byRun.get(a.runId) ?? [];
    list.push(a);
    byRun.set(a.runId, list);
  }
  return byRun;
}

/** `kill by alice on web-1: stuck on a lock` — who did what to the run, and why. */
export function actionWords(a: AuditRecord): string {
  const via = a.via === 'api' ? ' (api)' : '';
  return `${a.action} by ${a.operator} on ${a.host}${via}${a.reason ? `: ${a.reason}` : ''}`;
}

/** One line of `show` and `explain`: when, who and why, and what came of it. */
export function actionLine(a: AuditRecord): string {
  const outcome = a.outcome ? ` → ${oneLine(a.outcome, 120)}` : '';
  return `${formatInstant(a.at)} UTC  ${actionWords(a)}${outcome}`;
}

/** The stable JSON shape of one action (`baton audit --json`, and `actions` beside a run). */
export function actionToJson(a: AuditRecord) {
  return {
    id: a.id,
    at: a.at.toISOString(),
    action: a.action,
    namespace: a.namespace,
    job: a.job,
    runId: a.runId,
    fire: a.fire?.toISOString() ?? null,
    operator: a.operator,
    via: a.via,
    host: a.host,
    reason: a.reason,
    details: a.details,
    outcome: a.outcome,
  };
}
