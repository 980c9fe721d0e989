/**
 * The past fires of a job's schedule that `baton run --fire` and `baton backfill` may run: an
 * instant must be one of the schedule's own (a re-run keeps the fire's identity: its
 * `scheduled_at`, BATON_SCHEDULED_AT and `ctx.fire`), and it must have come by the database's
 * clock — a fire still to come is the schedule's to run, not an operator's. A job with no schedule
 * of its own (`after:` alone: it runs at its parents' instants) has no past fires to name: its
 * fires are its parents', and are run again through them.
 *
 * The schedule is the fleet's: each instant by the timing version in force then
 * (`baton_timings`, schedule/timing-switch.ts), given as `timings` — a past day is run again as
 * the fleet ran it, whichever file this host has.
 */
import type { JobDefinition } from '../config/schema.js';
import { orEmpty, UsageError } from '../errors.js';
import { parseSchedule, type Schedule } from '../schedule/cron.js';
import { lastFireAtOrBefore } from '../schedule/dead-man.js';
import { scheduleByVersions } from '../schedule/timing-switch.js';
import { versionInForce } from '../fleet/timing-status.js';
import { readTimings, type TimingRecord } from '../store/timings.js';
import type { OperatorFires } from '../fire/operator-fire.js';

type Versions = readonly TimingRecord[];

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

/** The job's fires as the fleet fires them: by the timing version in force at each instant. */
function scheduleOf(job: JobDefinition, timings: Versions): Schedule {
  return scheduleByVersions(parseSchedule(ownSchedule(job), job.timezone), timings);
}

/** Whether `at` is a fire of the job's schedule. */
export function isFireOf(job: JobDefinition, at: Date, timings: Versions = []): boolean {
  const next = scheduleOf(job, timings).nextAfter(new Date(at.getTime() - 1));
  return next != null && next.getTime() === at.getTime();
}

/**
 * `at` when it is a past fire of the job; otherwise a usage error naming the nearest fires (the
 * one before and the one after), so that the operator can copy the right instant.
 */
export function assertPastFire(
  job: JobDefinition,
  at: Date,
  now: Date,
  timings: Versions = [],
): Date {
  if (!isFireOf(job, at, timings)) {
    const schedule = scheduleOf(job, timings);
    const before = lastFireAtOrBefore(schedule, new Date(at.getTime() - 1));
    const after = schedule.nextAfter(at);
    const near = [before, after].filter((d): d is Date => d != null).map((d) => d.toISOString());
    // The timing the fleet had there, where it is not this file's.
    const inForce = versionInForce(timings, at);
    const timing =
      inForce && (inForce.schedule !== job.schedule || inForce.timezone !== job.timezone)
        ? `timing version ${inForce.version}, "${inForce.schedule}", ${inForce.timezone}`
        : `"${job.schedule}", ${job.timezone}`;
    throw new UsageError(
      `${at.toISOString()} is not a fire of ${job.name} (${timing})` +
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
export function firesBetween(
  job: JobDefinition,
  from: Date,
  to: Date,
  limit: number,
  timings: Versions = [],
): Date[] {
  const schedule = scheduleOf(job, timings);
  const fires: Date[] = [];
  let at = schedule.nextAfter(new Date(from.getTime() - 1));
  while (at && at.getTime() <= to.getTime() && fires.length <= limit) {
    fires.push(at);
    at = schedule.nextAfter(at);
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
  timings: Versions = [],
): Promise<Date[]> {
  const fires: Date[] = [];
  let after = new Date(from.getTime() - 1);
  while (fires.length <= limit) {
    const chunk = firesBetween(job, new Date(after.getTime() + 1), to, FIRES_PER_TURN - 1, timings);
    fires.push(...chunk);
    if (chunk.length < FIRES_PER_TURN) break;
    after = chunk.at(-1)!;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return fires.slice(0, limit + 1);
}

/** The job's timing versions (none on a database from before them, migration 0026). */
export async function timingsOf(fires: OperatorFires, job: string): Promise<TimingRecord[]> {
  return (await orEmpty(readTimings(fires.pool, fires.namespace, [job]), new Map())).get(job) ?? [];
}
