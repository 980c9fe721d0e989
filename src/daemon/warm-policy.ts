/**
 * Which module jobs get warm hosts (src/execution/warm-hosts.ts): those that fire often.
 *
 * A warm host takes a module job's start-up (100–300 ms of Node, baton's host and tsx on a
 * 2-core machine) off the fire's path, and costs its runner two waiting Node processes per kind
 * of job, 50–80 MiB resident each (bench/README.md, "Module jobs: warm hosts"), all day. For a job
 * that fires every second that is the difference between a 25 ms and a 130 ms call lag; for an
 * hourly or a nightly batch the start-up is a rounding error of its run, and the memory would be
 * held for nothing. So a job is warmed when its fires come at least every WARM_PERIOD_MS (by the
 * median gap between its next fires: an expression like `*\/5 9-17 * * *` counts as frequent
 * though its night gap is long), and starts cold otherwise — as every module job did before warm
 * hosts. Manual runs of a job that is not warmed start cold too.
 */
import type { JobDefinition } from '../config/schema.js';
import type { Schedule } from '../schedule/cron.js';

/** A job whose fires come at least this often is warmed. */
export const WARM_PERIOD_MS = 10 * 60_000;
/** Fires looked at to judge a job's period (gaps: one fewer). */
const FIRES_JUDGED = 5;

/** The jobs of `jobs` worth keeping warm hosts for, judged from `now`. */
export function jobsWorthWarming(
  jobs: Iterable<JobDefinition>,
  schedules: ReadonlyMap<string, Schedule>,
  now: Date,
): JobDefinition[] {
  return [...jobs].filter((job) => {
    if (job.target.kind !== 'module') return false;
    const schedule = schedules.get(job.name);
    return schedule != null && firesOften(schedule, now);
  });
}

function firesOften(schedule: Schedule, now: Date): boolean {
  const fires = schedule.nextN(FIRES_JUDGED, now).map((d) => d.getTime());
  if (fires.length < 2) return false;
  const gaps = fires.slice(1).map((t, i) => t - fires[i]!);
  gaps.sort((a, b) => a - b);
  return gaps[Math.floor(gaps.length / 2)]! <= WARM_PERIOD_MS;
}
