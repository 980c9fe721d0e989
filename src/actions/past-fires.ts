/**
 * The past fires of a job's schedule that `baton run --fire` and `baton backfill` may run: an
 * instant must be one of the schedule's own (a re-run keeps the fire's identity: its
 * `scheduled_at`, BATON_SCHEDULED_AT and `ctx.fire`), and it must have come by the database's
 * clock — a fire still to come is the schedule's to run, not an operator's. A job with no schedule
 * of its own (`after:` alone: it runs at its parents' instants) has no past fires to name: its
 * fires are its parents', and are run again through them.
 */
import type { JobDefinition } from '../config/schema.js';
import { UsageError } from '../errors.js';
import { calculatorFor } from '../schedule/cron.js';

/**
 * The job's own schedule; a UsageError (exit 64) for a job that runs only after its parents,
 * naming what to do instead. Surfaces call it before they open anything.
 */
export function ownSchedule(job: JobDefinition): string {
  if (job.schedule != null) return job.schedule;
  const parents = job.after?.jobs ?? [];
  throw new UsageError(
    `${job.name} has no schedule of its own: it runs after ${parents.join(', ')}; ` +
      `backfill ${parents[0] ?? '<parent>'} --with-dependents`,
  );
}

function cronOf(job: JobDefinition) {
  return calculatorFor(ownSchedule(job), job.timezone).cron;
}

/** Whether `at` is a fire of the job's schedule. */
export function isFireOf(job: JobDefinition, at: Date): boolean {
  const next = cronOf(job).nextRun(new Date(at.getTime() - 1));
  return next != null && next.getTime() === at.getTime();
}

/**
 * `at` when it is a past fire of the job; otherwise a usage error naming the nearest fires (the
 * one before and the one after), so that the operator can copy the right instant.
 */
export function assertPastFire(job: JobDefinition, at: Date, now: Date): Date {
  if (!isFireOf(job, at)) {
    const cron = cronOf(job);
    const before = cron.previousRuns(1, at)[0] ?? null;
    const after = cron.nextRun(at);
    const near = [before, after].filter((d): d is Date => d != null).map((d) => d.toISOString());
    throw new UsageError(
      `${at.toISOString()} is not a fire of ${job.name} ("${job.schedule}", ${job.timezone})` +
        (near.length ? `; the nearest fires are ${near.join(' and ')}` : ''),
    );
  }
  if (at.getTime() > now.getTime()) {
    throw new UsageError(
      `the fire ${at.toISOString()} of ${job.name} has not come yet (the database's clock says ` +
        `${now.toISOString()}); its schedule will run it`,
    );
  }
  return at;
}

/**
 * The fires of the job in [from, to], oldest first, at most `limit + 1` of them (so that the
 * caller can tell "more than the bound" without listing a year of every-second fires).
 */
export function firesBetween(job: JobDefinition, from: Date, to: Date, limit: number): Date[] {
  const cron = cronOf(job);
  const fires: Date[] = [];
  let at = cron.nextRun(new Date(from.getTime() - 1));
  while (at && at.getTime() <= to.getTime() && fires.length <= limit) {
    fires.push(at);
    at = cron.nextRun(at);
  }
  return fires;
}

/** Fires listed between two turns of the event loop (`firesBetweenYielding`). */
const FIRES_PER_TURN = 1_000;

/**
 * `firesBetween` for a process that must go on meanwhile (a runner: its heartbeat, its fires):
 * the same fires, listed FIRES_PER_TURN at a time with a turn of the event loop between, as a
 * long range takes croner some 100 µs a fire.
 */
export async function firesBetweenYielding(
  job: JobDefinition,
  from: Date,
  to: Date,
  limit: number,
): Promise<Date[]> {
  const fires: Date[] = [];
  let after = new Date(from.getTime() - 1);
  while (fires.length <= limit) {
    const chunk = firesBetween(job, new Date(after.getTime() + 1), to, FIRES_PER_TURN - 1);
    fires.push(...chunk);
    if (chunk.length < FIRES_PER_TURN) break;
    after = chunk.at(-1)!;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return fires.slice(0, limit + 1);
}
