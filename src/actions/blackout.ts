/**
 * Blackouts: a fleet-wide pause that starts and ends by itself (`baton_blackouts`,
 * store/blackouts.ts). Creating one and cancelling one, each with its audit row, once for every
 * surface (`baton blackout`, cli/commands/blackout.ts). Every runner skips a scheduled fire whose
 * instant is inside one of its job as `paused` (coordination/fire-batches.ts); the notifier tells
 * its start and its end (daemon/notifier.ts); an operator's `baton run` still runs.
 *
 * The request is checked against the database's clock before anything is written: a refused
 * blackout leaves no audit row and no blackout. Which job names are accepted is the surface's to
 * check (the command knows the schedules file, or the namespace's history, and has `--force`).
 */
import { formatDuration } from '../config/duration.js';
import { errorMessage, UsageError } from '../errors.js';
import { hasControlCharacter, REASON_MAX } from '../operator.js';
import { characterCount, truncate } from '../text.js';
import { recordAction, setActionOutcome } from '../store/audit.js';
import {
  cancelBlackout as cancelRow,
  endOf,
  findBlackout,
  insertBlackout,
  type Blackout,
} from '../store/blackouts.js';
import type { Queryable } from '../store/deadline.js';
import { databaseNow } from '../store/fire-reads.js';
import { blackoutState, blackoutToJson, describeCover } from '../fleet/blackouts.js';
import type { Actor } from './pause.js';

/**
 * The longest blackout: a quarter of a year. Longer is a mistake (a year typed for a month) or
 * a job that should be disabled in the schedules file instead, where the change is reviewed.
 */
export const MAX_BLACKOUT_MS = 90 * 86_400_000;

export interface BlackoutRequest {
  /** Inclusive. */
  from: Date;
  /** Exclusive. */
  until: Date;
  /** null: every job of the namespace (`--all`). */
  jobs: readonly string[] | null;
  reason: string;
}

/**
 * What is wrong with a request at `now` (the database's clock), in words naming the option; null
 * when nothing is. Pure, so that every surface refuses the same requests.
 */
export function blackoutProblem(r: BlackoutRequest, now: Date): string | null {
  const iso = (d: Date) => d.toISOString();
  if (Number.isNaN(r.from.getTime())) return '--from is not an instant';
  if (Number.isNaN(r.until.getTime())) return '--until is not an instant';
  if (r.until <= r.from) {
    return `--until ${iso(r.until)} is not after --from ${iso(r.from)}: a blackout covers [from, until)`;
  }
  if (r.until <= now) {
    return `--until ${iso(r.until)} is in the past (the database's clock says ${iso(now)}): it would cover no fire to come`;
  }
  const length = r.until.getTime() - r.from.getTime();
  if (length > MAX_BLACKOUT_MS) {
    return (
      `--from ${iso(r.from)} to --until ${iso(r.until)} is ${formatDuration(length, 'brief')}, ` +
      `longer than a blackout may last (${formatDuration(MAX_BLACKOUT_MS, 'brief')}); ` +
      'disable the job in the schedules file instead'
    );
  }
  if (r.jobs != null && r.jobs.length === 0) return 'no job named: give --job J (or --all)';
  const reason = r.reason.trim();
  if (reason === '') return '--reason is empty: say why, for the skip rows and the audit';
  if (characterCount(reason) > REASON_MAX) {
    return `--reason is ${characterCount(reason)} characters long, more than ${REASON_MAX}: say it shorter`;
  }
  if (hasControlCharacter(reason)) {
    return '--reason contains a control character (a newline, an escape…): say it on one line';
  }
  return null;
}

export interface BlackoutOutcome {
  namespace: string;
  blackout: Blackout;
  /** The database's clock when it was recorded. */
  now: Date;
  /** The surface accepted a job name it did not know (`--force`). */
  forced: boolean;
  auditId: number;
}

/**
 * Records a blackout, signed `operator@host` (what its skip rows and notifications then say),
 * with its audit row. Refuses (UsageError) what `blackoutProblem` refuses, writing nothing.
 */
export async function createBlackout(
  db: Queryable,
  namespace: string,
  request: BlackoutRequest,
  by: Actor,
  { forced = false }: { forced?: boolean } = {},
): Promise<BlackoutOutcome> {
  const now = await databaseNow(db);
  const problem = blackoutProblem(request, now);
  if (problem) throw new UsageError(`${problem}; no blackout was recorded`);
  const jobs = request.jobs == null ? null : [...new Set(request.jobs)].sort();
  const reason = request.reason.trim();
  const auditId = await recordAction(db, {
    namespace,
    action: 'blackout',
    job: jobs?.length === 1 ? jobs[0] : null,
    operator: by.operator,
    via: by.via,
    host: by.host,
    reason,
    details: {
      from: request.from.toISOString(),
      until: request.until.toISOString(),
      jobs,
      ...(forced ? { forced } : {}),
    },
  });
  try {
    const id = await insertBlackout(db, namespace, {
      startsAt: request.from,
      endsAt: request.until,
      jobs,
      reason,
      // created_by is VARCHAR(255): a long host name is cut, never refused after the audit row.
      createdBy: truncate(`${by.operator}@${by.host}`, 255),
    });
    const blackout = (await findBlackout(db, namespace, id))!;
    await setActionOutcome(
      db,
      auditId,
      `blackout #${id}: ${describeCover(blackout)} from ${request.from.toISOString()} until ` +
        request.until.toISOString(),
    );
    return { namespace, blackout, now, forced, auditId };
  } catch (err) {
    await setActionOutcome(db, auditId, `failed: ${errorMessage(err)}`).catch(() => {});
    throw err;
  }
}

export interface CancelOutcome {
  namespace: string;
  /** The blackout as it is now (cancelled, or as it was when there was nothing to cancel). */
  blackout: Blackout;
  /** False: it was over already (ended, or cancelled before); nothing changed. */
  cancelled: boolean;
  now: Date;
  auditId: number;
}

/**
 * Ends blackout `id` now: fires from now on run again, and its end is told now. One that is
 * over already is left as it is (said so, and audited); an id the namespace does not have is
 * refused, writing nothing.
 */
export async function cancelBlackout(
  db: Queryable,
  namespace: string,
  id: number,
  by: Actor,
): Promise<CancelOutcome> {
  const before = await findBlackout(db, namespace, id);
  if (!before) {
    throw new UsageError(
      `there is no blackout #${id} in namespace "${namespace}" (baton blackout list shows them)`,
    );
  }
  const auditId = await recordAction(db, {
    namespace,
    action: 'blackout-cancel',
    job: before.jobs?.length === 1 ? before.jobs[0] : null,
    operator: by.operator,
    via: by.via,
    host: by.host,
    reason: by.reason,
    details: { blackout: id },
  });
  try {
    const cancelled = await cancelRow(
      db,
      namespace,
      id,
      truncate(`${by.operator}@${by.host}`, 255),
    );
    const after = (await findBlackout(db, namespace, id)) ?? before;
    const now = await databaseNow(db);
    const outcome = cancelled
      ? `cancelled blackout #${id}` +
        (after.cancelledAt! <= after.startsAt
          ? ' before it began'
          : `: it ended at ${endOf(after).toISOString()} instead of ${after.endsAt.toISOString()}`)
      : `nothing to do: blackout #${id} is ${blackoutState(after, now)} (${endOf(after).toISOString()})`;
    await setActionOutcome(db, auditId, outcome);
    return { namespace, blackout: after, cancelled, now, auditId };
  } catch (err) {
    await setActionOutcome(db, auditId, `failed: ${errorMessage(err)}`).catch(() => {});
    throw err;
  }
}

/** `baton blackout --json` (and any other surface's answer to a new blackout). */
export function blackoutOutcomeDocument(o: BlackoutOutcome) {
  return {
    namespace: o.namespace,
    now: o.now.toISOString(),
    forced: o.forced,
    blackout: blackoutToJson(o.blackout, o.now),
    auditId: o.auditId,
  };
}

/** `baton blackout cancel --json`. */
export function cancelOutcomeDocument(o: CancelOutcome) {
  return {
    namespace: o.namespace,
    now: o.now.toISOString(),
    cancelled: o.cancelled,
    blackout: blackoutToJson(o.blackout, o.now),
    auditId: o.auditId,
  };
}
