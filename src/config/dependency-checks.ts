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
import { parseSchedule, type Schedule } from '../schedule/cron.js';
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

/**
 * Whether two schedules fire at the same instants cannot be read from their expressions in
 * general (day-of-month OR day-of-week, `L`, `W`, `#`, time zones and their DST), so it is
 * sampled, in two ways:
 * - the first INSTANTS_COMPARED instants of each after INSTANTS_ANCHOR, one after another: a
 *   difference in a dense schedule's first minutes;
 * - the first instant after each of SAMPLES points spread over two years from the anchor,
 *   SAMPLE_STEP_MS apart — a day, an hour, a minute and a second, so that the points fall on every
 *   day of the two years, and walk through every hour of the day, minute of the hour and second
 *   of the minute: `*⁠/2 0-58 * * * *` against `*⁠/2 * * * * *` differs at minute 59 of
 *   each hour, past the first 50 instants; dozens of the points are in a minute 59.
 * Two schedules whose first instants after a point differ do not share their instants (the
 * earlier one is a fire of one, not of the other). What neither way can see: schedules that
 * differ only in a moment no point falls before, such as one second a week.
 *
 * A schedule's samples cost about 40 ms (croner, 700 instants), once per expression and time
 * zone: only for jobs whose instants are compared (fan-in parents, a child's parent when the
 * child has its own schedule), and never for parents of one expression.
 */
export const INSTANTS_COMPARED = 50;
/** A fixed anchor, so that a file's verdict (and its message) is the same on every day. */
export const INSTANTS_ANCHOR = new Date('2026-01-01T00:00:00Z');
const SAMPLE_STEP_MS = 86_400_000 + 3_600_000 + 60_000 + 1_000;
const SAMPLES = Math.floor((2 * 365 * 86_400_000) / SAMPLE_STEP_MS);
/** Job names listed in an "unknown job" message before the rest are counted. */
const NAMES_LISTED = 20;
/** A cycle longer than this is told by its first and last few jobs and its length. */
const CYCLE_SHOWN = 10;

/** Every problem of the jobs' `after:` edges, in the jobs' order. */
export function dependencyProblems(
  jobs: readonly JobDefinition[],
  check: DependencyCheck,
): ConfigProblem[] {
  const byName = new Map(jobs.map((j) => [j.name, j]));
  const instants: InstantsMemo = { jobs: new Map(), schedules: new Map() };
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
  const order = new Map(jobs.map((j, i) => [j.name, i]));
  for (const cycle of cyclesOf(jobs, byName)) {
    // Once per cycle, at its job first in the file, read from it: `a → b → a` at a. Not at each
    // of its jobs: a cycle of 3,000 jobs told at each one was 3,000 messages of 3,000 names.
    let first = 0;
    for (let i = 1; i < cycle.length; i++) {
      if (order.get(cycle[i]!)! < order.get(cycle[first]!)!) first = i;
    }
    const from = [...cycle.slice(first), ...cycle.slice(0, first)];
    problems.push(
      check.locate(
        from[0]!,
        'after',
        `a cycle: ${cycleWords(from)} (each runs after the next): none of them would ever run`,
      ),
    );
  }
  return problems;
}

/** `a → b → c → a`; a long cycle as its first and last few jobs, and how many it has. */
function cycleWords(cycle: readonly string[]): string {
  if (cycle.length <= CYCLE_SHOWN) return [...cycle, cycle[0]].join(' → ');
  const head = cycle.slice(0, CYCLE_SHOWN - 3);
  const tail = cycle.slice(-2);
  const left = cycle.length - head.length - tail.length;
  return [...head, `… ${left} more …`, ...tail, cycle[0]].join(' → ') + `, ${cycle.length} jobs`;
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
  if (definition && definition.schedule == null && definition.after == null) {
    // A library-mode handler with no schedule of its own: its fires are the schedules created at
    // run time, each a subject of its own (`<job>:<key>`), none of them the job's instants.
    return (
      `cannot be honoured: ${definition.name} has no schedule of its own (no \`schedule\`, no ` +
      '`after:`), so it has no instants for a child to follow'
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
  /** The open path, and where each of its jobs is on it. */
  const path: string[] = [];
  const onPath = new Map<string, number>();
  const cycles: string[][] = [];
  const seen = new Set<string>();
  // A depth-first walk with its own stack, not recursion: a chain of 10,000 jobs is as deep.
  const frames: { name: string; next: number }[] = [];
  const enter = (name: string) => {
    state.set(name, 'open');
    onPath.set(name, path.length);
    path.push(name);
    frames.push({ name, next: 0 });
  };
  for (const job of jobs) {
    if (state.has(job.name)) continue;
    enter(job.name);
    while (frames.length > 0) {
      const frame = frames.at(-1)!;
      const parents = byName.get(frame.name)?.after?.jobs ?? [];
      if (frame.next === parents.length) {
        frames.pop();
        path.pop();
        onPath.delete(frame.name);
        state.set(frame.name, 'done');
        continue;
      }
      const parent = parents[frame.next++]!;
      if (parent === frame.name || !byName.has(parent)) continue;
      if (state.get(parent) === 'open') {
        const cycle = path.slice(onPath.get(parent));
        // The same cycle is met from each of its jobs' back edges only once in one walk, but
        // keyed anyway by its rotation that starts at its smallest name.
        const key = rotationKey(cycle);
        if (!seen.has(key)) {
          seen.add(key);
          cycles.push(cycle);
        }
      } else if (!state.has(parent)) {
        enter(parent);
      }
    }
  }
  return cycles;
}

function rotationKey(cycle: string[]): string {
  const start = cycle.indexOf([...cycle].sort()[0]!);
  return [...cycle.slice(start), ...cycle.slice(0, start)].join('\u0000');
}

/**
 * A job's instants as far as they are compared (INSTANTS_COMPARED above): `at`, its first ones
 * after the anchor, complete up to `horizon` (the last one when the schedule has more; Infinity
 * when the list holds every one it has); and `samples`, its first instant after each sample point
 * (null: none).
 */
interface Instants {
  at: number[];
  horizon: number;
  samples: (number | null)[];
}

/** Instants per job (null: not told), and per schedule (expression and time zone). */
interface InstantsMemo {
  jobs: Map<string, Instants | null>;
  schedules: Map<string, Instants | null>;
}

/**
 * Why the child's parents do not share their instants, or null when they do (as far as the
 * samples tell). A parent that runs only after its own parents has theirs; one with a schedule
 * and `after:` has both.
 */
function instantsDisagree(
  child: JobDefinition,
  byName: ReadonlyMap<string, JobDefinition>,
  memo: InstantsMemo,
): string | null {
  const parents = child.after!.jobs;
  const lists = parents.map((p) => instantsOf(p, byName, memo));
  // A parent whose instants cannot be told (a cycle, a bad parent further up) has its own problem.
  if (lists.some((l) => l == null)) return null;
  const witness = firstUnshared(lists as Instants[]);
  if (witness == null) return null;
  const has = parents.filter((_, i) => hasInstant(lists[i]!, witness));
  const lacks = parents.filter((_, i) => !hasInstant(lists[i]!, witness));
  const labels = parents.map((p) => `${p}: ${scheduleLabel(byName.get(p)!)}`);
  return (
    `the parents of ${child.name} do not fire at the same instants (${labels.join(', ')}; ` +
    `${iso(witness)} is a fire of ${has.join(', ')}, not of ${lacks.join(', ')}): a child ` +
    'runs at an instant all its parents share'
  );
}

/** Whether `t`, an instant of some list, is one of `list` as far as its samples tell. */
function hasInstant(list: Instants, t: number): boolean {
  return list.at.includes(t) || list.samples.includes(t);
}

/**
 * Why the child's own schedule may not be what it has (it fires at an instant of its parents'),
 * or null.
 */
function ownInstantShared(
  child: JobDefinition,
  byName: ReadonlyMap<string, JobDefinition>,
  memo: InstantsMemo,
): string | null {
  let schedule: Schedule;
  try {
    schedule = parseSchedule(child.schedule!, child.timezone);
  } catch {
    return null; // a bad schedule is its own problem
  }
  const own = scheduleInstants(child, memo);
  const parent = child.after!.jobs[0]!;
  const theirs = instantsOf(parent, byName, memo);
  if (!own || !theirs) return null;
  const horizon = Math.min(own.horizon, theirs.horizon);
  // Their sampled instants, each asked of the child's own schedule: is it one of its fires?
  const shared =
    own.at.find((t) => t <= horizon && theirs.at.includes(t)) ??
    own.samples.find((t, i) => t != null && t === theirs.samples[i]) ??
    theirs.samples.find((t) => t != null && schedule.nextAfter(new Date(t - 1))?.getTime() === t);
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

/**
 * The first instant that is not in all of the lists, or null if none: within every list's
 * horizon among their first instants, else the earliest of a sample point's first instants that
 * differ.
 */
function firstUnshared(lists: Instants[]): number | null {
  const horizon = Math.min(...lists.map((l) => l.horizon));
  const sets = lists.map((l) => new Set(l.at));
  const all = [...new Set(lists.flatMap((l) => l.at))].sort((a, b) => a - b);
  const early = all.find((t) => t <= horizon && sets.some((s) => !s.has(t)));
  if (early != null) return early;
  for (let i = 0; i < SAMPLES; i++) {
    const firsts = lists.map((l) => l.samples[i] ?? Infinity);
    if (firsts.every((t) => t === firsts[0])) continue;
    // The earliest of them is a fire of its lists, and not of those whose first is later.
    const earliest = Math.min(...firsts);
    if (Number.isFinite(earliest)) return earliest;
  }
  return null;
}

/** A schedule's own instants (memoised per expression and time zone), or null: a bad one. */
function scheduleInstants(job: JobDefinition, memo: InstantsMemo): Instants | null {
  const key = `${job.schedule}\u0000${job.timezone}`;
  if (memo.schedules.has(key)) return memo.schedules.get(key)!;
  let result: Instants | null;
  try {
    const schedule = parseSchedule(job.schedule!, job.timezone);
    const at = schedule.nextN(INSTANTS_COMPARED, INSTANTS_ANCHOR).map((d) => d.getTime());
    const samples: (number | null)[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      const point = new Date(INSTANTS_ANCHOR.getTime() + i * SAMPLE_STEP_MS);
      samples.push(schedule.nextAfter(point)?.getTime() ?? null);
    }
    result = { at, horizon: at.length === INSTANTS_COMPARED ? at.at(-1)! : Infinity, samples };
  } catch {
    result = null;
  }
  memo.schedules.set(key, result);
  return result;
}

/**
 * A job's instants (its schedule's, its parents' or both), or null when they cannot be told: a
 * bad schedule, a cycle, parents that disagree. Walked with its own stack, not recursion: a chain
 * of 10,000 jobs is as deep.
 */
function instantsOf(
  name: string,
  byName: ReadonlyMap<string, JobDefinition>,
  memo: InstantsMemo,
): Instants | null {
  const open = new Set<string>();
  const stack = [name];
  while (stack.length > 0) {
    const current = stack.at(-1)!;
    const job = byName.get(current);
    if (memo.jobs.has(current) || !job) {
      if (!job) memo.jobs.set(current, null);
      stack.pop();
      continue;
    }
    if (!open.has(current)) {
      // First met: its parents first. One that is open is a cycle: it has no instants here.
      open.add(current);
      const pending = (job.after?.jobs ?? []).filter((p) => !memo.jobs.has(p) && !open.has(p));
      if (pending.length > 0) {
        stack.push(...pending);
        continue;
      }
    }
    stack.pop();
    open.delete(current);
    memo.jobs.set(current, ownAndParents(job, memo, open));
  }
  return memo.jobs.get(name) ?? null;
}

/** A job's instants from its schedule's and its parents' (told already, or open: a cycle). */
function ownAndParents(
  job: JobDefinition,
  memo: InstantsMemo,
  open: ReadonlySet<string>,
): Instants | null {
  const parts: Instants[] = [];
  if (job.schedule != null) {
    const own = scheduleInstants(job, memo);
    if (!own) return null;
    parts.push(own);
  }
  if (job.after) {
    const lists = job.after.jobs.map((p) => (open.has(p) ? null : (memo.jobs.get(p) ?? null)));
    // Parents that disagree are refused at this job: what it would run at is not told here.
    if (lists.some((l) => l == null) || firstUnshared(lists as Instants[]) != null) return null;
    const horizon = Math.min(...lists.map((l) => l!.horizon));
    const first = lists[0]!;
    parts.push({ at: first.at.filter((t) => t <= horizon), horizon, samples: first.samples });
  }
  return union(parts);
}

/** The instants of several parts together: a sample point's first is the earliest of theirs. */
function union(parts: Instants[]): Instants {
  if (parts.length === 1) return parts[0]!;
  const horizon = Math.min(...parts.map((p) => p.horizon));
  const at = [...new Set(parts.flatMap((p) => p.at))]
    .filter((t) => t <= horizon)
    .sort((a, b) => a - b);
  const samples = parts[0]!.samples.map((_, i) => {
    const firsts = parts.map((p) => p.samples[i]).filter((t): t is number => t != null);
    return firsts.length > 0 ? Math.min(...firsts) : null;
  });
  return { at, horizon, samples };
}
