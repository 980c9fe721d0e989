/**
 * The graph of `after:` edges between a file's jobs (docs/dependencies.md): who runs after whom.
 * Plain data over validated job definitions; the runner, the commands and the dashboard read it.
 * Types only from schema.ts: the daemon imports this module, and must not load zod
 * (config/defaults.ts says why). The checks of the edges are in dependency-checks.ts.
 */
import { shortTiming } from '../schedule/calendar.js';
import type { JobAfter, JobDefinition } from './schema.js';

/** The jobs that run after `parent` (its children), in the file's order. */
export function childrenOf(jobs: readonly JobDefinition[], parent: string): JobDefinition[] {
  return jobs.filter((j) => j.after?.jobs.includes(parent));
}

/**
 * A job's `after:` where a schedule would be shown: `after settle`, `after settle, import (on
 * failure)`, `after settle (always)`. The default (`on: success`) is not said.
 */
export function describeAfter(after: Pick<JobAfter, 'jobs' | 'on'>): string {
  const on =
    after.on === 'success' ? '' : after.on === 'always' ? ' (always)' : ` (on ${after.on})`;
  return `after ${after.jobs.join(', ')}${on}`;
}

/**
 * What stands for a job's schedule in a listing: its expression, or `after settle` for a job with
 * no schedule of its own (it runs only after its parents).
 */
export function scheduleText(job: {
  schedule: string | null;
  after?: Pick<JobAfter, 'jobs' | 'on'> | null;
}): string {
  if (job.schedule != null) return shortTiming(job.schedule);
  return job.after ? describeAfter(job.after) : '';
}

/**
 * The job whose schedule gives `name` its instants: the job itself when it has a schedule; for a
 * job that runs only after its parents, its first parent's source, up the chain (a child's fire
 * is its parents' instant). Null when there is none: an unknown job or parent, or a cycle (both
 * refused by validation). For what needs a period without a fire of its own: the dead-man's
 * default window of a child.
 */
export function instantSource(jobs: readonly JobDefinition[], name: string): JobDefinition | null {
  const seen = new Set<string>();
  let job = jobs.find((j) => j.name === name);
  while (job && job.schedule == null) {
    if (seen.has(job.name)) return null;
    seen.add(job.name);
    const parent = job.after?.jobs[0];
    job = parent == null ? undefined : jobs.find((j) => j.name === parent);
  }
  return job ?? null;
}

/**
 * The job whose schedule counts a job's dead-man's default window (`expect:` not given): its
 * `instantSource` — but none for a child that does not run at every one of those instants by
 * design (`on: failure`, `on: always` after a parent that may not run, anywhere up its chain):
 * a child that runs only after failures would be "no success for two periods" whenever its
 * parents are healthy. Such a child is watched only with an `expect:` of its own.
 */
export function deadManSource(jobs: readonly JobDefinition[], name: string): JobDefinition | null {
  const seen = new Set<string>();
  let job = jobs.find((j) => j.name === name);
  while (job && job.schedule == null) {
    if (seen.has(job.name) || job.after?.on !== 'success') return null;
    seen.add(job.name);
    const parent = job.after.jobs[0];
    job = parent == null ? undefined : jobs.find((j) => j.name === parent);
  }
  return job ?? null;
}

/**
 * The jobs whose own schedules give a child its fires (its parents' instants): its first parent
 * when that one has a schedule, and — when that parent runs after others too — their sources, up
 * the chain (every parent of a child fires at the same instants: config/dependency-checks.ts).
 * Empty for a job without `after:`, or an unknown or disabled parent.
 */
export function chainSources(jobs: readonly JobDefinition[], name: string): JobDefinition[] {
  const sources: JobDefinition[] = [];
  const seen = new Set<string>([name]);
  let child = jobs.find((j) => j.name === name);
  for (;;) {
    const parent = jobs.find((j) => j.name === child?.after?.jobs[0]);
    // A disabled parent never runs: its instants give its children nothing.
    if (!parent || !parent.enabled || seen.has(parent.name)) return sources;
    seen.add(parent.name);
    if (parent.schedule != null) sources.push(parent);
    child = parent;
  }
}
