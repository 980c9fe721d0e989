/**
 * Blackouts as the views tell them (`baton blackout list`, `baton status`, the dashboard): where
 * one stands at an instant of the database's clock, its one JSON shape, and the finding `status`
 * makes of one going on. Pure: the rows are store/blackouts.ts's.
 */
import { describeCover, endOf, takesEffect, type Blackout } from '../store/blackouts.js';

export { describeCover } from '../store/blackouts.js';
import type { Warning } from './check-state.js';

/** `upcoming` → `active` → `ended`; `cancelled`: ended early, or before it began. */
export type BlackoutState = 'upcoming' | 'active' | 'ended' | 'cancelled';

export function blackoutState(b: Blackout, now: Date): BlackoutState {
  const end = endOf(b);
  if (b.cancelledAt && b.cancelledAt <= now && b.cancelledAt < b.endsAt) return 'cancelled';
  if (now < b.startsAt) return 'upcoming';
  return now < end ? 'active' : 'ended';
}

/** A blackout in every JSON document (`blackout --json`, `list --json`, `status --json`, the API). */
export function blackoutToJson(b: Blackout, now: Date) {
  return {
    id: b.id,
    state: blackoutState(b, now),
    from: b.startsAt.toISOString(),
    until: b.endsAt.toISOString(),
    /** When it ends or ended: `until`, or its cancel when that came first. */
    endsAt: endOf(b).toISOString(),
    /** null: every job of the namespace. */
    jobs: b.jobs,
    reason: b.reason,
    createdBy: b.createdBy,
    createdAt: b.createdAt.toISOString(),
    cancelledAt: b.cancelledAt?.toISOString() ?? null,
    cancelledBy: b.cancelledBy,
  };
}

export type BlackoutJson = ReturnType<typeof blackoutToJson>;

/**
 * `status`'s finding for each blackout going on (informational, as a pause is, unless
 * `--warn-paused`): its scheduled fires are skipped until it ends.
 */
export function blackoutWarnings(blackouts: readonly Blackout[], now: Date): Warning[] {
  return blackouts
    .filter((b) => takesEffect(b) && blackoutState(b, now) === 'active')
    .map((b) => ({
      kind: 'blackout' as const,
      message:
        `blackout #${b.id} by ${b.createdBy} is on until ${endOf(b).toISOString()}: the ` +
        `scheduled fires of ${describeCover(b)} are skipped (${b.reason}); ` +
        `"baton blackout cancel ${b.id}" ends it early`,
      ...(b.jobs?.length === 1 ? { job: b.jobs[0]! } : {}),
    }));
}
