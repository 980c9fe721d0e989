/**
 * Pausing and resuming a job: the fleet's pause switch (`baton_pauses`, store/pauses.ts), each
 * with its audit row. One implementation for every surface: `baton pause` / `baton resume`
 * (cli/commands/pause.ts) and the write API's `POST /api/jobs/{job}/pause` and `/resume`
 * (http/write-actions.ts, which the dashboard's buttons call). Each surface answers with the
 * documents made here, so a script reads the same fields whichever way it asked.
 *
 * Which names a surface accepts is the surface's to check before it calls: the command knows
 * the schedules file or the namespace's history (and has `--force`), the API its runner's file.
 *
 * The audit row is written first and its outcome once known, so that an action whose outcome
 * never comes (the database went away in between) still shows who asked.
 */
import type { Queryable } from '../store/deadline.js';
import { errorMessage } from '../errors.js';
import { truncate } from '../text.js';
import { recordAction, setActionOutcome, type AuditVia } from '../store/audit.js';
import { findPause, pauseJob, pausedReason, resumeJob, type Pause } from '../store/pauses.js';
import { pauseDocument } from './documents.js';
import { authorize, scopeDetails, type ActionScope } from './scope.js';

/** Who takes an operator's action, from where, and why. */
export interface Actor {
  /** The OS user (operator.ts) or the write API token's name. */
  operator: string;
  /** The host the action is taken on: the command's, or the runner serving the API. */
  host: string;
  via: AuditVia;
  reason: string | null;
  /**
   * A scoped write token's scope (actions/scope.ts): each action is refused, and the refusal
   * audited, outside it. Absent: every job, action and namespace (the CLI, an unscoped token).
   */
  scope?: ActionScope;
}

/** What came of a pause: the surfaces show it as `pauseOutcomeDocument`, or in words. */
export interface PauseOutcome {
  job: string;
  namespace: string;
  /** The pause there was before (then this one renewed it: the latest reason and author win). */
  before: Pause | null;
  /** The pause now; null only if a resume lifted it in between. */
  after: Pause | null;
  /** The surface paused a name it did not know (`baton pause --force`). */
  forced: boolean;
  auditId: number;
}

/** What came of a resume: `resumeOutcomeDocument`, or in words. */
export interface ResumeOutcome {
  job: string;
  namespace: string;
  /** The pause it lifted; null: it was not paused, nothing changed. */
  before: Pause | null;
  resumed: boolean;
  auditId: number;
}

/**
 * Pauses `job` on every runner from its next fire. The pause is signed `operator@host`, which
 * is what its skip rows then say.
 */
export async function pause(
  db: Queryable,
  namespace: string,
  job: string,
  by: Actor,
  { forced = false }: { forced?: boolean } = {},
): Promise<PauseOutcome> {
  await authorize(db, by, { action: 'pause', job, namespace });
  const details = { ...(forced ? { forced } : {}), ...scopeDetails(by) };
  const auditId = await recordAction(db, {
    namespace,
    action: 'pause',
    job,
    operator: by.operator,
    via: by.via,
    host: by.host,
    reason: by.reason,
    details: Object.keys(details).length > 0 ? details : null,
  });
  return completing(db, auditId, async () => {
    const before = await findPause(db, namespace, job);
    // paused_by is VARCHAR(255): a long host name is cut, never refused after the audit row.
    await pauseJob(db, namespace, job, by.reason, truncate(`${by.operator}@${by.host}`, 255));
    const after = await findPause(db, namespace, job);
    // A resume between the two statements lifted it: said so, never "paused".
    const outcome = !after
      ? 'paused, then lifted by a resume at the same time'
      : before
        ? 'renewed the pause'
        : 'paused';
    return { outcome, value: { job, namespace, before, after, forced, auditId } };
  });
}

/** Lifts `job`'s pause, if there is one (also of a job since removed from the file). */
export async function resume(
  db: Queryable,
  namespace: string,
  job: string,
  by: Actor,
): Promise<ResumeOutcome> {
  await authorize(db, by, { action: 'resume', job, namespace });
  const auditId = await recordAction(db, {
    namespace,
    action: 'resume',
    job,
    operator: by.operator,
    via: by.via,
    host: by.host,
    reason: by.reason,
    details: by.scope ? scopeDetails(by) : null,
  });
  return completing(db, auditId, async () => {
    const before = await findPause(db, namespace, job);
    const resumed = before != null && (await resumeJob(db, namespace, job));
    const outcome =
      before && resumed ? `resumed (it was ${pausedReason(before)})` : 'nothing to do: not paused';
    return {
      outcome,
      value: { job, namespace, before: resumed ? before : null, resumed, auditId },
    };
  });
}

/**
 * Runs an action recorded as `auditId` and writes its outcome — also when it fails, so that the
 * audit never keeps a row that says who asked and never what came of it.
 */
async function completing<T>(
  db: Queryable,
  auditId: number,
  act: () => Promise<{ outcome: string; value: T }>,
): Promise<T> {
  let done: { outcome: string; value: T };
  try {
    done = await act();
  } catch (err) {
    await setActionOutcome(db, auditId, `failed: ${errorMessage(err)}`).catch(() => {});
    throw err;
  }
  await setActionOutcome(db, auditId, done.outcome);
  return done.value;
}

/** `baton pause --json` and the API's answer to a pause. */
export function pauseOutcomeDocument(o: PauseOutcome) {
  return {
    job: o.job,
    namespace: o.namespace,
    // False only when a resume at the same time lifted it again (`pause` is then null).
    paused: o.after != null,
    renewed: o.before != null && o.after != null,
    forced: o.forced,
    pause: pauseDocument(o.after),
    auditId: o.auditId,
  };
}

/** `baton resume --json` and the API's answer to a resume. */
export function resumeOutcomeDocument(o: ResumeOutcome) {
  return {
    job: o.job,
    namespace: o.namespace,
    resumed: o.resumed,
    wasPaused: pauseDocument(o.before),
    auditId: o.auditId,
  };
}
