/**
 * A blackout's two events, `blackout-started` and `blackout-ended` (docs/notifications.md), as
 * the notifier's evaluation writes them (daemon/notifier.ts): each once fleet-wide, by the
 * outbox's unique key — subject `blackout #N`, fire its start or its end (its cancel, when that
 * came first). Told to the targets of the jobs it covers that are told of the event (on by
 * default), one row per target however many jobs share it. A blackout cancelled before it began
 * covered nothing and is told nothing.
 *
 * Pure: which notices are due at `now` (the database's clock), and the next instant one will be,
 * so that the notifier looks again then rather than at its next 15 s evaluation.
 */
import type { Config } from '../config/schema.js';
import { coversJob, describeCover, endOf, takesEffect, type Blackout } from '../store/blackouts.js';
import type { Notice } from '../store/notifications.js';

/** An edge older than this is history, not news (a runner back after a long outage). */
export const BLACKOUT_NEWS_MS = 7 * 86_400_000;

export const BLACKOUT_EVENTS = ['blackout-started', 'blackout-ended'] as const;

/** The outbox's subject of a blackout's events. */
export const blackoutSubject = (b: Pick<Blackout, 'id'>): string => `blackout #${b.id}`;

/** What its events say (notify/event.ts reads them back: the same on every try). */
export function blackoutDetails(b: Blackout): Record<string, unknown> {
  return {
    blackout: b.id,
    from: b.startsAt.toISOString(),
    until: b.endsAt.toISOString(),
    endsAt: endOf(b).toISOString(),
    jobs: b.jobs,
    covers: describeCover(b),
    reason: b.reason,
    by: b.createdBy,
    cancelledBy: b.cancelledAt && b.cancelledAt < b.endsAt ? b.cancelledBy : null,
  };
}

export function blackoutNotices(
  namespace: string,
  jobs: Config['jobs'],
  blackouts: readonly Blackout[],
  now: Date,
): { notices: Notice[]; nextEdge: Date | null } {
  const notices: Notice[] = [];
  let nextEdge: Date | null = null;
  const later = (at: Date) => {
    if (at > now && (nextEdge == null || at < nextEdge)) nextEdge = at;
  };
  // Starts first: the outbox delivers in the order written, so a blackout whose start and end
  // are both found at once (created and over between two evaluations) is told in order.
  for (const event of BLACKOUT_EVENTS) {
    for (const b of blackouts) {
      if (!takesEffect(b)) continue;
      const at = event === 'blackout-started' ? b.startsAt : endOf(b);
      later(at);
      if (at > now || now.getTime() - at.getTime() > BLACKOUT_NEWS_MS) continue;
      const targets = [
        ...new Set(
          jobs
            .filter((j) => j.notify?.on.includes(event) && coversJob(b, j.name))
            .flatMap((j) => j.notify!.to),
        ),
      ];
      if (targets.length === 0) continue;
      notices.push({
        namespace,
        subject: blackoutSubject(b),
        fire: at,
        event,
        targets,
        runId: null,
        details: blackoutDetails(b),
      });
    }
  }
  return { notices, nextEdge };
}
