/**
 * An outbox row → the event every target is told of (types.ts). Built from the row and, for an
 * event about a run, from the run's row in the history (its verdict, exit code, duration, error
 * and the end of its output, which the history keeps masked). Built afresh at each try, from
 * rows that no longer change once final, so every try tells the same: same facts, same id.
 */
import { createHash } from 'node:crypto';
import { formatDuration } from '../config/duration.js';
import { findRun } from '../store/history-reads.js';
import type { Queryable } from '../store/deadline.js';
import type { NoticeRow } from '../store/notifications.js';
import type { Run } from '../store/runs.js';
import type { BlackoutFacts, NotificationEvent, UpstreamFacts } from './types.js';

/** The output excerpt: the end of the run's output, enough to see the error. */
export const OUTPUT_EXCERPT_CHARS = 2_000;

/**
 * The event's id: the same for every target and every try, from what makes the event one
 * (namespace, event, subject, fire, slot, re-run) — so it can be made again from the row.
 */
export function eventId(namespace: string, row: NoticeRow): string {
  const key = [namespace, row.event, row.subject, row.fire.toISOString(), row.slot, row.rerun];
  return `bt-${createHash('sha256').update(key.join('\0')).digest('hex').slice(0, 32)}`;
}

/** `db` may be null for an event about no run (`baton notify test`). */
export async function buildEvent(
  db: Queryable | null,
  namespace: string,
  row: NoticeRow,
): Promise<NotificationEvent> {
  const run = db && row.runId != null && row.event !== 'test' ? await findRun(db, row.runId) : null;
  const d = row.details ?? {};
  const blackout = row.event.startsWith('blackout-') ? blackoutFacts(d) : null;
  const isJob = !['runner-gone', 'detached', 'test'].includes(row.event) && !blackout;
  // A soft limit's event tells the run as it was when it was flagged (its details), the same on
  // every try: a slow run told while it ran has ended by a retry.
  const limit = row.event === 'slow' || row.event === 'too-short' ? limitFacts(d) : null;
  const event: NotificationEvent = {
    id: eventId(namespace, row),
    event: row.event,
    namespace,
    job: isJob ? row.subject : null,
    fire: row.event === 'test' ? null : row.fire.toISOString(),
    slot: row.slot > 1 ? row.slot : null,
    host: run?.host ?? (typeof d.host === 'string' ? d.host : null),
    status: limit?.status ?? run?.status ?? null,
    exitCode: limit?.status === 'running' ? null : (run?.exitCode ?? null),
    durationMs:
      limit?.ranMs ??
      (run?.finishedAt && run.startedAt
        ? run.finishedAt.getTime() - run.startedAt.getTime()
        : null),
    limitMs: limit?.limitMs ?? null,
    error: run?.error ?? null,
    output: run?.outputTail ? run.outputTail.slice(-OUTPUT_EXCERPT_CHARS) : null,
    runId: row.runId,
    count: typeof d.count === 'number' ? d.count : null,
    upstream: row.event === 'upstream' ? upstreamFacts(d, run) : null,
    blackout,
    text: '',
    at: row.createdAt.toISOString(),
  };
  event.text = headline(event, run, d);
  return event;
}

/** What a `slow` or `too-short` row's details say (store/duration-flags.ts `LimitDetails`). */
function limitFacts(d: Record<string, unknown>): {
  status: string | null;
  ranMs: number | null;
  limitMs: number | null;
} {
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  return {
    status: typeof d.status === 'string' && d.status !== '' ? d.status : null,
    ranMs: num(d.ranMs),
    limitMs: num(d.limitMs),
  };
}

/** The details the chain's `upstream` skip enqueued (store/notifications.ts `upstreamNotice`). */
function upstreamFacts(d: Record<string, unknown>, run: Run | null): UpstreamFacts {
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : null);
  return {
    parent: text(d.parent),
    parentRunId: typeof d.parentRunId === 'number' ? d.parentRunId : null,
    parentStatus: text(d.parentStatus),
    // The skip row's reason when the details have none.
    reason: text(d.reason) ?? run?.reason ?? null,
  };
}

/** The details a blackout's event was written with (daemon/blackout-notices.ts). */
function blackoutFacts(d: Record<string, unknown>): BlackoutFacts {
  const text = (v: unknown) => (typeof v === 'string' ? v : '');
  return {
    id: typeof d.blackout === 'number' ? d.blackout : 0,
    from: text(d.from),
    until: text(d.until),
    endsAt: text(d.endsAt) || text(d.until),
    jobs: Array.isArray(d.jobs) ? d.jobs.map(String) : null,
    reason: text(d.reason),
    by: text(d.by),
    cancelledBy: typeof d.cancelledBy === 'string' ? d.cancelledBy : null,
  };
}

/** `every job`, `job a`, `jobs a, b`. */
const covers = (b: BlackoutFacts) =>
  b.jobs == null ? 'every job' : `${b.jobs.length === 1 ? 'job' : 'jobs'} ${b.jobs.join(', ')}`;

/** What became of a parent's run, for the `upstream` headline: `failed (run 123)`. */
export function parentOutcome(u: UpstreamFacts): string {
  const words: Record<string, string> = {
    done: 'succeeded',
    failed: 'failed',
    timeout: 'timed out',
    lost: 'was lost',
    killed: 'was killed',
    interrupted: 'was interrupted',
    missed: 'did not run (missed)',
    skipped: 'was skipped',
    running: 'had not finished in time',
  };
  const what =
    u.parentStatus == null
      ? 'had no run of it in time'
      : (words[u.parentStatus] ?? `ended ${u.parentStatus}`);
  return `${what}${u.parentRunId != null ? ` (run ${u.parentRunId})` : ''}`;
}

const minute = (iso: string | null) => (iso ? `${iso.slice(0, 19).replace('T', ' ')} UTC` : '');
const brief = (ms: number | null | undefined) => (ms == null ? '?' : formatDuration(ms, 'brief'));

/** One line for people, the subject of a mail and the first line of a chat message. */
function headline(e: NotificationEvent, run: Run | null, d: Record<string, unknown>): string {
  const on = e.host ? ` on ${e.host}` : '';
  const fire = e.fire ? `, fire of ${minute(e.fire)}` : '';
  const exit = e.exitCode != null ? ` (exit ${e.exitCode})` : '';
  switch (e.event) {
    case 'failed':
      return `${e.job} failed${on}${exit}${fire}`;
    case 'timeout':
      return `${e.job} timed out${on}${fire}`;
    case 'lost':
      return `${e.job} was lost${on}: its runner went away${fire}`;
    case 'missed':
      return `${e.job} did not run: nobody attempted the fire of ${minute(e.fire)}`;
    case 'upstream': {
      const u = e.upstream;
      const why = u?.parent
        ? `its parent ${u.parent} ${parentOutcome(u)}`
        : (u?.reason ?? 'its parents did not let it run');
      return `${e.job} did not run: ${why}${fire}`;
    }
    case 'recovered': {
      const folded = typeof d.folded === 'number' && d.folded > 0 ? d.folded : 0;
      const more = folded > 0 ? ` (after ${folded} more failure${folded === 1 ? '' : 's'})` : '';
      return `${e.job} recovered${on}${fire}${more}`;
    }
    case 'no-success': {
      const last = typeof d.lastSuccessAt === 'string' ? minute(d.lastSuccessAt) : null;
      return last
        ? `${e.job} has not succeeded since ${last}`
        : `${e.job} has never succeeded (expected by ${minute(String(d.overdueAt ?? ''))})`;
    }
    case 'runner-gone':
      return `runner ${d.host ?? e.host ?? '?'} is gone: no heartbeat since ${minute(String(d.lastSeenAt ?? ''))}`;
    case 'detached':
      return `runner ${d.host ?? e.host ?? '?'} is detached from the fleet after a failover: it holds its fires`;
    case 'slow': {
      const run = e.runId != null ? `run ${e.runId}` : 'its run';
      const limit = `its warn of ${brief(e.limitMs)}`;
      return e.status === 'running' || e.status == null
        ? `${e.job} is slow${on}: ${run} has been running for ${brief(e.durationMs)}, past ${limit}${fire}`
        : `${e.job} was slow${on}: ${run} ran ${brief(e.durationMs)}, past ${limit}, and ended ${e.status}${fire}`;
    }
    case 'too-short': {
      const run = e.runId != null ? `run ${e.runId}` : 'its run';
      return `${e.job} finished too soon${on}: ${run} took ${brief(e.durationMs)}, less than its min of ${brief(e.limitMs)}${fire}`;
    }
    case 'no-eligible-runner': {
      const why = typeof d.reason === 'string' && d.reason !== '' ? `: ${d.reason}` : '';
      return `${e.job} does not run: no live runner may run it, from the fire of ${minute(e.fire)}${why}`;
    }
    case 'summary': {
      const n = e.count ?? 0;
      const since = typeof d.since === 'string' ? ` since ${minute(d.since)}` : '';
      return `${e.job} failed ${n} more time${n === 1 ? '' : 's'}${since}`;
    }
    case 'blackout-started': {
      const b = e.blackout!;
      return (
        `blackout #${b.id} began: the scheduled fires of ${covers(b)} are skipped until ` +
        `${minute(b.endsAt)} (${b.by}: ${b.reason})`
      );
    }
    case 'blackout-ended': {
      const b = e.blackout!;
      const early = b.cancelledBy ? `, ended early by ${b.cancelledBy}` : '';
      return `blackout #${b.id} ended${early}: the scheduled fires of ${covers(b)} run again (${b.by}: ${b.reason})`;
    }
    case 'test':
      return `test notification from baton${typeof d.by === 'string' ? ` (sent by ${d.by})` : ''}`;
    default:
      return `${e.job ?? ''} ${String(e.event)}${on}${run ? ` (${run.status})` : ''}`;
  }
}
