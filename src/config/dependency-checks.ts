/**
 * The checks of a schedules file's `after:` edges (docs/dependencies.md, "Configuring"), run once
 * every job is built — by `config/load.ts` for a file, and by `library/job-options.ts` on the
 * code's jobs merged with a file's. Every problem is reported at the child's `after:` (or the
 * parent's item in its list), never at the parent: the edge is written on the child.
 *
 * Refused:
 * - a parent that is not a job of this file: a name no job has, or one that cannot be a job's
 *   name at all (`other/settle`, `other:settle`: another namespace's jobs are not parents);
 * - a job after itself, and every cycle (`a → b → a`): none of its jobs would ever run;
 * - a fan-out job (`workers` > 1) as a parent or a child: which of its slots' runs would decide,
 *   and which slot a child's run would be, is not defined yet;
 * - parents that do not fire at the same instants: a child runs at an instant all its parents
 *   share (its fire is their instant), so parents whose instants differ would leave it waiting,
 *   then skipped as `upstream`, at every instant only some of them have;
 * - a child whose own `schedule:` fires at an instant of its parents': its own fire of that
 *   instant would run at the instant, before its parents, and take the fire key the chain's run
 *   needs (the fire is one, whoever starts it).
 */
import type { ConfigProblem } from '../errors.js';
import { parseSchedule } from '../schedule/cron.js';
import { closest } from '../text.js';
import { describeAfter } from './dependencies.js';
import { JOB_NAME_PATTERN, type JobDefinition } from './schema.js';

/**
 * Where on a child a problem is reported: its `after:`, its `after.jobs` list, or the item of the
 * list naming `parent`.
 */
export type AfterPlace = 'after' | 'jobs' | { parent: string };

export interface DependencyCheck {
  /** The namespace the jobs are in, for the message about another namespace's jobs. */
  namespace: string;
  /**
   * Every job name written, built or not: a parent whose own definition has a problem is not
   * "unknown" (its problem is reported where it is), its edges are just not checked further.
   */
  declared: ReadonlySet<string>;
  locate: (job: string, place: AfterPlace, message: string) => ConfigProblem;
}

/** Instants compared per parent (from INSTANTS_ANCHOR) to tell whether fan-in parents agree. */
export const INSTANTS_COMPARED = 50;
/** A fixed anchor, so that a file's verdict (and its message) is the same on every day. */
export const INSTANTS_ANCHOR = new Date('2026-01-01T00:00:00Z');
/** Job names listed in an "unknown job" message before the rest are counted. */
const NAMES_LISTED = 20;

/** Every problem of the jobs' `after:` edges, in the jobs' order. */
export function dependencyProblems(
  jobs: readonly JobDefinition[],
  check: DependencyCheck,
): ConfigProblem[] {
  const byName = new Map(jobs.map((j) => [j.name, j]));
  const instants = new Map<string, Instants | null>();
  const problems: ConfigProblem[] = [];
  for (const job of jobs) {
    if (!job.after) continue;
    const at = (place: AfterPlace, message: string) =>
      problems.push(check.locate(job.name, place, message));
    let parentsKnown = true;
    for (const parent of job.after.jobs) {
      const problem = parentProblem(job, parent, byName, check);
      if (problem) {
        at({ parent }, problem);
        parentsKnown = false;
      } else if (!byName.has(parent)) {
        parentsKnown = false;
      }
    }
    if (job.workers > 1) at('after', fanOut(job));
    if (parentsKnown && job.after.jobs.length > 1) {
      const disagreement = instantsDisagree(job, byName, instants);
      if (disagreement) at('jobs', disagreement);
    }
    if (parentsKnown && job.schedule != null) {
      const shared = ownInstantShared(job, byName, instants);
      if (shared) at('after', shared);
    }
  }
  for (const cycle of cyclesOf(jobs, byName)) {
    // Once per cycle at each of its jobs, read from that job: `b → a → b` at b.
    for (let i = 0; i < cycle.length; i++) {
      const from = [...cycle.slice(i), ...cycle.slice(0, i)];
      const words = [...from, from[0]].join(' → ');
      problems.push(
        check.locate(
          from[0]!,
          'after',
          `a cycle: ${words} (each runs after the next): none of them would ever run`,
        ),
      );
    }
  }
  return problems;
}

function parentProblem(
  job: JobDefinition,
  parent: string,
  byName: ReadonlyMap<string, JobDefinition>,
  check: DependencyCheck,
): string | null {
  if (!JOB_NAME_PATTERN.test(parent)) {
    const other = /^([^/:]+)[/:](.+)$/.exec(parent);
    return (
      `"${parent}" is not a job of this file: parents must be jobs of this file's namespace ` +
      `("${check.namespace}"), named as under \`jobs:\`` +
      (other ? ` (a job of namespace "${other[1]}" cannot be a parent)` : '')
    );
  }
  if (parent === job.name) return `${job.name} cannot run after itself`;
  if (!check.declared.has(parent)) {
    const names = [...check.declared].filter((n) => n !== job.name);
    const listed =
      names.length > NAMES_LISTED
        ? `${names.slice(0, NAMES_LISTED).join(', ')}, … (${names.length} in all)`
        : names.join(', ') || 'none other';
    const meant = closest(parent, names);
    return (
      `unknown job "${parent}" (jobs: ${listed})` + (meant ? `; did you mean "${meant}"?` : '')
    );
  }
  const definition = byName.get(parent);
  if (definition && definition.workers > 1) return fanOut(definition);
  if (definition?.every) {
    return (
      `cannot be honoured: ${definition.name} runs on every runner (\`every: true\`), once per ` +
      'runner and instant; such a job cannot be a parent in `after:`'
    );
  }
  return null;
}

function fanOut(job: JobDefinition): string {
  return (
    `cannot be honoured: ${job.name} is a fan-out job (\`workers: ${job.workers}\`); a fan-out ` +
    'job (`workers` > 1) cannot be a parent or a child in `after:` yet'
  );
}

/**
 * The cycles of the graph (child → parent), each once, as the list of its jobs from the one met
 * first in the file's order. A job after itself is its own problem (parentProblem), not a cycle.
 */
function cyclesOf(
  jobs: readonly JobDefinition[],
  byName: ReadonlyMap<string, JobDefinition>,
): string[][] {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const seen = new Set<string>();
  const visit = (name: string) => {
    state.set(name, 'open');
    stack.push(name);
    for (const parent of byName.get(name)?.after?.jobs ?? []) {
      if (parent === name || !byName.has(parent)) continue;
      if (state.get(parent) === 'open') {
        const cycle = stack.slice(stack.indexOf(parent));
        // The same cycle is met from each of its jobs' back edges only once in one walk, but
        // keyed anyway by its rotation that starts at its smallest name.
        const key = rotationKey(cycle);
        if (!seen.has(key)) {
          seen.add(key);
          cycles.push(cycle);
        }
      } else if (!state.has(parent)) {
        visit(parent);
      }
    }
    stack.pop();
    state.set(name, 'done');
  };
  for (const job of jobs) if (!state.has(job.name)) visit(job.name);
  return cycles;
}

function rotationKey(cycle: string[]): string {
  const start = cycle.indexOf([...cycle].sort()[0]!);
  return [...cycle.slice(start), ...cycle.slice(0, start)].join('\u0000');
}

/**
 * A job's first instants after the anchor, complete up to `horizon` (the last one when the
 * schedule has more; Infinity when the list holds every one it has).
 */
interface Instants {
  at: number[];
  horizon: number;
}

/**
 * Why the child's parents do not share their instants, or null when they do (as far as the
 * first INSTANTS_COMPARED of each tell). A parent that runs only after its own parents has
 * theirs; one with a schedule and `after:` has both.
 */
function instantsDisagree(
  child: JobDefinition,
  byName: ReadonlyMap<string, JobDefinition>,
  memo: Map<string, Instants | null>,
): string | null {
  const parents = child.after!.jobs;
  const lists = parents.map((p) => instantsOf(p, byName, memo, new Set()));
  // A parent whose instants cannot be told (a cycle, a bad parent further up) has its own problem.
  if (lists.some((l) => l == null)) return null;
  const witness = firstUnshared(lists as Instants[]);
  if (witness == null) return null;
  const has = parents.filter((_, i) => lists[i]!.at.includes(witness));
  const lacks = parents.filter((_, i) => !lists[i]!.at.includes(witness));
  const labels = parents.map((p) => `${p}: ${scheduleLabel(byName.get(p)!)}`);
  return (
    `the parents of ${child.name} do not fire at the same instants (${labels.join(', ')}; ` +
    `${iso(witness)} is a fire of ${has.join(', ')}, not of ${lacks.join(', ')}): a child ` +
    'runs at an instant all its parents share'
  );
}

/**
 * Why the child's own schedule may not be what it has (it fires at an instant of its parents'),
 * or null.
 */
function ownInstantShared(
  child: JobDefinition,
  byName: ReadonlyMap<string, JobDefinition>,
  memo: Map<string, Instants | null>,
): string | null {
  let own: Instants;
  try {
    const at = parseSchedule(child.schedule!, child.timezone)
      .nextN(INSTANTS_COMPARED, INSTANTS_ANCHOR)
      .map((d) => d.getTime());
    own = { at, horizon: at.length === INSTANTS_COMPARED ? at.at(-1)! : Infinity };
  } catch {
    return null; // a bad schedule is its own problem
  }
  const parent = child.after!.jobs[0]!;
  const theirs = instantsOf(parent, byName, memo, new Set());
  if (!theirs) return null;
  const horizon = Math.min(own.horizon, theirs.horizon);
  const shared = own.at.find((t) => t <= horizon && theirs.at.includes(t));
  if (shared == null) return null;
  return (
    `${child.name}'s own schedule ("${child.schedule}" ${child.timezone}) fires at instants of ` +
    `${parent}'s too (${iso(shared)}): there it would run at the instant, before ${parent}, not ` +
    `after it; give ${child.name} \`after:\` alone, or a schedule of other instants`
  );
}

function scheduleLabel(job: JobDefinition): string {
  const own = job.schedule != null ? `"${job.schedule}" ${job.timezone}` : null;
  const after = job.after ? describeAfter(job.after) : null;
  return [own, after].filter((s) => s != null).join(' and ');
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace('.000Z', 'Z');
}

/** The first instant, within every list's horizon, that is not in all of them; null if none. */
function firstUnshared(lists: Instants[]): number | null {
  const horizon = Math.min(...lists.map((l) => l.horizon));
  const sets = lists.map((l) => new Set(l.at));
  const all = [...new Set(lists.flatMap((l) => l.at))].sort((a, b) => a - b);
  return all.find((t) => t <= horizon && sets.some((s) => !s.has(t))) ?? null;
}

function instantsOf(
  name: string,
  byName: ReadonlyMap<string, JobDefinition>,
  memo: Map<string, Instants | null>,
  open: Set<string>,
): Instants | null {
  if (memo.has(name)) return memo.get(name)!;
  const job = byName.get(name);
  if (!job || open.has(name)) return null;
  open.add(name);
  const parts: Instants[] = [];
  let known = true;
  if (job.schedule != null) {
    try {
      const at = parseSchedule(job.schedule, job.timezone)
        .nextN(INSTANTS_COMPARED, INSTANTS_ANCHOR)
        .map((d) => d.getTime());
      parts.push({ at, horizon: at.length === INSTANTS_COMPARED ? at.at(-1)! : Infinity });
    } catch {
      known = false;
    }
  }
  if (job.after) {
    const lists = job.after.jobs.map((p) => instantsOf(p, byName, memo, open));
    // Parents that disagree are refused at this job: what it would run at is not told here.
    if (lists.some((l) => l == null) || firstUnshared(lists as Instants[]) != null) known = false;
    else {
      const horizon = Math.min(...lists.map((l) => l!.horizon));
      parts.push({ at: lists[0]!.at.filter((t) => t <= horizon), horizon });
    }
  }
  open.delete(name);
  const result: Instants | null = known ? union(parts) : null;
  memo.set(name, result);
  return result;
}

function union(parts: Instants[]): Instants {
  const horizon = Math.min(...parts.map((p) => p.horizon));
  const at = [...new Set(parts.flatMap((p) => p.at))]
    .filter((t) => t <= horizon)
    .sort((a, b) => a - b);
  return { at, horizon };
}
