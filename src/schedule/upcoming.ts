/**
 * The instants a runner registers for each job (`baton_runners.schedule`, `next`), so that
 * `baton status` can see runners that compute different fires from one definition
 * (fleet/drift.ts). Node carries its own time-zone data (ICU): two runners on different Node
 * versions can turn one expression and zone into different instants — a zone whose rules changed
 * between their releases — and each would win a fire of its own. The definition's fingerprint
 * cannot tell: it is of the text, not of what the runtime makes of it.
 *
 * Every runner counts from the same anchor, the start of the current UTC hour by the database's
 * clock, so their lists are alike unless their sums differ; the registrar writes them again when
 * the hour changes.
 */
import type { Schedule } from './cron.js';

/** How many instants a runner registers per job. */
export const UPCOMING_COUNT = 3;
const ANCHOR_MS = 3_600_000;

/** The anchor the instants are counted from at `now`: the start of its UTC hour. */
export function upcomingAnchor(now: Date): Date {
  return new Date(Math.floor(now.getTime() / ANCHOR_MS) * ANCHOR_MS);
}

/** The first UPCOMING_COUNT fires of `schedule` strictly after `anchor`, as ISO instants. */
export function upcomingInstants(schedule: Schedule, anchor: Date): string[] {
  return schedule.nextN(UPCOMING_COUNT, anchor).map((at) => at.toISOString());
}
