/**
 * What the write API's routes do (write-api.ts does the HTTP around them): run a job now, pause
 * it, resume it — each the same action as its command (`baton run`, `pause`, `resume`), taken by
 * the runner that received the request, and each recorded in `baton_audit` first (via `api`, the
 * token's name as operator, this runner as host), its outcome added once known. So an action
 * whose outcome never comes (the runner died) still shows who asked. Pause and resume are the
 * commands' own code (actions/pause.ts); here, which names this runner accepts.
 *
 * Kill is `baton kill`'s order (fire/kill-run.ts). Backfill is answered 501 until it is wired
 * (see `notInThisVersion`).
 */
import { pauseDocument } from '../actions/documents.js';
import {
  pause,
  pauseOutcomeDocument,
  resume,
  resumeOutcomeDocument,
  type Actor,
} from '../actions/pause.js';
import type { ManualStart } from '../daemon/dispatcher.js';
import { killRun } from '../fire/kill-run.js';
import { parseFireTime } from '../instants.js';
import { recordAction, setActionOutcome, type AuditAction } from '../store/audit.js';
import type { Queryable } from '../store/deadline.js';
import { findPause } from '../store/pauses.js';

/** What the write API acts on: the runner serving it. */
export interface WriteSubject {
  /** This runner's name (the audit's host). */
  host: string;
  namespace(): string;
  /** Every job of the loaded schedules file, disabled ones included. */
  jobs(): readonly string[];
  /** A pool that takes writes; null while the runner cannot coordinate. */
  pool(): Queryable | null;
  /** Runs the job now through its lock (daemon/dispatcher.ts: runNow); null: no such job. */
  runNow(job: string): Promise<ManualStart> | null;
  /** Starts `baton backfill` for the job (cli/backfill-child.ts); absent: not offered. */
  backfill?(request: BackfillRequest): Promise<BackfillStart>;
}

/** A backfill asked through the API: `baton backfill`'s options, checked. */
export interface BackfillRequest {
  job: string;
  /** Instants, parsed here: what reaches the command is their ISO form, never the body's text. */
  from: Date;
  to: Date;
  again: boolean;
  yes: boolean;
  reason: string | null;
  /** The API token's name, for the audit. */
  operator: string;
}

export type BackfillStart =
  | { status: 'started'; pid: number; fires: number; toRun: number }
  | { status: 'refused'; exitCode: number; message: string };

/**
 * POST /api/jobs/{job}/backfill: `baton backfill` started by this runner (202 with the fires it
 * will look at), after a dry run of the same command whose refusal is the answer: 400 for a bad
 * range or too many fires without `yes`, 409 when it cannot start now. `from` and `to` are
 * checked as instants here, before anything starts.
 */
export async function backfillAction(
  s: WriteSubject,
  job: string,
  body: { from: string; to: string; again?: boolean; yes?: boolean },
  r: Who,
): Promise<ApiAnswer> {
  if (!s.jobs().includes(job)) throw unknownJob(job);
  const from = instantField('from', body.from);
  const to = instantField('to', body.to);
  if (to < from) throw new ApiError(400, 'bad-request', 'the body: to: is before from');
  // The reason reaches the command by its environment, which cannot carry a NUL: said here
  // rather than failing in spawn.
  if (r.reason?.includes('\0')) {
    throw new ApiError(400, 'bad-request', 'the body: reason: contains a NUL character');
  }
  if (!s.backfill) notInThisVersion('backfill');
  usablePool(s);
  const start = await s.backfill({
    job,
    from,
    to,
    again: body.again ?? false,
    yes: body.yes ?? false,
    reason: r.reason,
    operator: r.operator,
  });
  if (start.status === 'refused') {
    const status = start.exitCode === 64 ? 400 : start.exitCode === 75 ? 409 : 500;
    const code = status === 400 ? 'bad-request' : status === 409 ? 'busy' : 'backfill-failed';
    throw new ApiError(status, code, start.message);
  }
  return {
    status: 202,
    body: {
      job,
      from: from.toISOString(),
      to: to.toISOString(),
      fires: start.fires,
      toRun: start.toRun,
      host: s.host,
      progress: `baton audit --job ${job}; baton history ${job}`,
    },
  };
}

/** An answer that is an error: `{error: {code, message, …extra}}` with this status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export interface ApiAnswer {
  status: number;
  body: Record<string, unknown>;
}

/** Who asks, and why: the token's name and the body's reason. */
export interface Who {
  operator: string;
  reason: string | null;
}

/**
 * A body's instant (`baton backfill --from`'s forms), or a 400 naming the field. The value is not
 * echoed: it is the operator's own, and the refusal is also logged.
 */
function instantField(field: 'from' | 'to', value: string): Date {
  try {
    return parseFireTime(value);
  } catch {
    throw new ApiError(
      400,
      'bad-request',
      `the body: ${field}: not an ISO-8601 instant; expected e.g. 2026-11-30T03:00:00Z, ` +
        '2026-11-30T04:00:00+01:00, or 2026-11-30 03:00:00.000 (UTC)',
    );
  }
}

function usablePool(s: WriteSubject): Queryable {
  const pool = s.pool();
  if (!pool) {
    throw new ApiError(
      503,
      'unavailable',
      'this runner cannot reach the database (or it is read-only) right now; try again or ask ' +
        'another runner',
    );
  }
  return pool;
}

function unknownJob(job: string): ApiError {
  return new ApiError(404, 'not-found', `no job "${job}" in this runner's schedules file`);
}

/** The token's name as operator, this runner as host. */
function actor(s: WriteSubject, r: Who): Actor {
  return { operator: r.operator, host: s.host, via: 'api', reason: r.reason };
}

/** Records the action (outcome to follow) and returns its audit id. */
function audit(
  s: WriteSubject,
  pool: Queryable,
  action: AuditAction,
  job: string,
  r: Who,
): Promise<number> {
  return recordAction(pool, {
    namespace: s.namespace(),
    action,
    job,
    operator: r.operator,
    via: 'api',
    host: s.host,
    reason: r.reason,
  });
}

/** POST /api/jobs/{job}/run: 202 once the run holds the lock, 409 naming who holds it. */
export async function runAction(s: WriteSubject, job: string, r: Who): Promise<ApiAnswer> {
  if (!s.jobs().includes(job)) throw unknownJob(job);
  const pool = usablePool(s);
  const auditId = await audit(s, pool, 'run', job, r);
  // A pause stops the schedule, not an operator (as `baton run`): the answer says it was paused.
  const pause = await findPause(pool, s.namespace(), job);
  const start: ManualStart = (await s.runNow(job)) ?? {
    status: 'not-run',
    reason: 'the job was removed by a reload',
  };
  switch (start.status) {
    case 'started':
      await setActionOutcome(pool, auditId, `started run ${start.runId}`, start.runId);
      return {
        status: 202,
        body: {
          job,
          runId: start.runId,
          scheduledAt: start.scheduledAt.toISOString(),
          host: s.host,
          paused: pauseDocument(pause),
          auditId,
        },
      };
    case 'busy':
      await setActionOutcome(pool, auditId, `refused: ${start.reason}`);
      throw new ApiError(409, 'busy', `${job} not run: ${start.reason}`, { runId: start.runId });
    default:
      await setActionOutcome(pool, auditId, `not run: ${start.reason}`).catch(() => {});
      throw new ApiError(503, 'not-run', `${job} not run: ${start.reason}`);
  }
}

/** POST /api/jobs/{job}/pause: 200 with the pause (renewed when there was one). */
export async function pauseAction(s: WriteSubject, job: string, r: Who): Promise<ApiAnswer> {
  if (!s.jobs().includes(job)) throw unknownJob(job);
  const outcome = await pause(usablePool(s), s.namespace(), job, actor(s, r));
  return { status: 200, body: pauseOutcomeDocument(outcome) };
}

/** POST /api/jobs/{job}/resume: 200, `resumed: false` when it was not paused. */
export async function resumeAction(s: WriteSubject, job: string, r: Who): Promise<ApiAnswer> {
  const pool = usablePool(s);
  // Any pause there is can be lifted (also of a job since removed from the file), as `resume`.
  if (!s.jobs().includes(job) && !(await findPause(pool, s.namespace(), job))) {
    throw unknownJob(job);
  }
  const outcome = await resume(pool, s.namespace(), job, actor(s, r));
  return { status: 200, body: resumeOutcomeDocument(outcome) };
}

/** The grace `kill` gives a run before SIGKILL when the body names none (as `baton kill`). */
export const DEFAULT_KILL_GRACE_MS = 10_000;

/**
 * POST /api/runs/{id}/kill: the same order as `baton kill` (fire/kill-run.ts), given by this
 * runner for whichever runner owns the run, answered once its outcome is known: 200 killed,
 * already finished or declared lost; 202 when the owner has not acted within the grace (the
 * request stays on the row); 404 no such run (in this namespace).
 */
export async function killAction(
  s: WriteSubject,
  runId: number,
  graceMs: number,
  r: Who,
): Promise<ApiAnswer> {
  const pool = usablePool(s);
  const namespace = s.namespace();
  // The order is for this runner's namespace only: killRun reads (and changes) the run in it, so
  // another namespace's run is not found before anything is written.
  const outcome = await killRun(pool, {
    runId,
    namespace,
    operator: r.operator,
    host: s.host,
    via: 'api',
    reason: r.reason,
    graceMs,
  });
  if (outcome.kind === 'not-found') {
    throw new ApiError(404, 'not-found', `no run with id ${runId} in namespace "${namespace}"`);
  }
  const run = outcome.run;
  return {
    status: outcome.kind === 'pending' ? 202 : 200,
    body: {
      runId,
      job: run.job,
      outcome: outcome.kind,
      status: run.status,
      host: run.host,
      tookMs: outcome.tookMs,
      alreadyRequested: outcome.alreadyRequested,
      error: run.error,
    },
  };
}

/**
 * The routes of actions whose commands are not in this version (`POST /api/runs/{id}/kill`,
 * `POST /api/jobs/{job}/backfill`). Authenticated, rate-limited and their bodies read like the
 * others, so wiring one is replacing this call with the action (and its audit row).
 */
export function notInThisVersion(action: 'backfill'): never {
  throw new ApiError(501, 'not-implemented', `${action}: not in this version`);
}
