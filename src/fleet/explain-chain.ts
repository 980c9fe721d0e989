/**
 * `baton explain` of a child job (`after:`, docs/dependencies.md), as pure functions: from the
 * child's rows of `baton_dependent_fires` at an instant and its parents' rows at that instant,
 * where the chain stands — waiting for a parent (and until when), started by which parent runs
 * (and how that run is going), or skipped as `upstream` (and why).
 *
 * A child's fire is judged once, from its row, by whichever live runner that has the child comes
 * first: no runner is expected to leave an attempt of its own, so the views do not list the
 * silent runners as they do for a scheduled fire.
 */
import { formatDuration } from '../config/duration.js';
import type { JobAfter } from '../config/schema.js';
import type { RunStatus } from '../run-status.js';
import type { DependentFire, DependentFireStatus } from '../store/dependent-fire-reads.js';
import type { RunnerNow } from '../store/fire-reads.js';
import type { Run } from '../store/runs.js';
import { formatInstant, oneLine } from '../text.js';

/** Where a parent stands at the instant: its latest generation's run, or why there is none. */
export type ParentState = RunStatus | 'none';

export interface ParentAtFire {
  job: string;
  /**
   * Its latest generation's winner's status (of a fan-out fire the slot still running, else the
   * worst ending); `missed`; `skipped` when every runner skipped the instant; `none` without rows.
   */
  state: ParentState;
  /** The row that says so (the winner, the `missed` mark, the first skip); null for `none`. */
  run: Run | null;
  /** In words: `running on srv-01 since …`, `done (run 123)`, `no run of this instant yet`. */
  words: string;
}

/** `no-row`: the child has no row for this instant (not its parents' instant, or no runner). */
export type ChainState = DependentFireStatus | 'no-row';

export interface ChainInput {
  /** The child. */
  name: string;
  /** Its `after:` in the local schedules file; null when the file does not have the job. */
  after: JobAfter | null;
  /** The database's clock. */
  now: Date;
  /** The child's rows at the instant, generation by generation (the latest last). */
  fires: readonly DependentFire[];
  /** Every row of each parent at the instant (history-reads.ts fireRows), by parent. */
  parentRows: ReadonlyMap<string, readonly Run[]>;
  /** The child's own rows at the instant. */
  rows: readonly Run[];
  /** The registry judged now: who may judge a waiting row (alive, with the child). */
  runners: readonly RunnerNow[];
  /** How the views say a run of the child went (fleet/explain.ts). */
  describeRun: (run: Run) => string;
}

export interface ChainJudgement {
  state: ChainState;
  /** The latest generation's row; null for `no-row`. */
  fire: DependentFire | null;
  /** Every parent: those of `after:`, else those the rows name. */
  parents: ParentAtFire[];
  verdict: string;
  notes: string[];
}

/** Which slot a fan-out parent's fire is shown by: one still running, else the worst ending. */
const SHOWN_FIRST: readonly RunStatus[] = [
  'running',
  'failed',
  'timeout',
  'lost',
  'killed',
  'interrupted',
  'done',
];

/** A parent at the instant, from every row of its fire there. */
export function parentAtFire(job: string, rows: readonly Run[], now: Date): ParentAtFire {
  const winners = rows.filter((r) => r.winner);
  if (winners.length > 0) {
    const generation = Math.max(...winners.map((r) => r.rerun));
    const latest = winners.filter((r) => r.rerun === generation);
    const rank = (s: RunStatus) => (SHOWN_FIRST.includes(s) ? SHOWN_FIRST.indexOf(s) : 99);
    const run = [...latest].sort((a, b) => rank(a.status) - rank(b.status))[0]!;
    const took = formatDuration(Math.max(0, now.getTime() - run.startedAt.getTime()), 'table');
    const words =
      run.status === 'running'
        ? `running on ${run.host} since ${formatInstant(run.startedAt)}, for ${took} (run ${run.id})`
        : `${run.status} (run ${run.id})`;
    return { job, state: run.status, run, words };
  }
  const missed = rows.find((r) => r.status === 'missed');
  if (missed) return { job, state: 'missed', run: missed, words: `missed (run ${missed.id})` };
  const skip = rows.find((r) => r.status === 'skipped');
  if (skip) {
    const kind = skip.reasonKind ? ` (${skip.reasonKind})` : '';
    return { job, state: 'skipped', run: skip, words: `skipped by every runner${kind}` };
  }
  return { job, state: 'none', run: null, words: 'no run of this instant yet' };
}

/** Whether a parent has yet to come to a verdict at the instant. */
const pending = (p: ParentAtFire) => p.state === 'none' || p.state === 'running';

export function judgeChain(input: ChainInput): ChainJudgement {
  const { name, now, fires } = input;
  const latest = fires.at(-1) ?? null;
  const named = fires.flatMap((f) => Object.keys(f.parentRuns ?? {}));
  const parentJobs = [...new Set([...(input.after?.jobs ?? []), ...named])];
  const parents = parentJobs.map((job) => parentAtFire(job, input.parentRows.get(job) ?? [], now));
  const notes: string[] = [];
  for (const earlier of fires.slice(0, -1)) notes.push(`earlier ${generationWords(earlier)}`);
  if (!latest) {
    const whose =
      parentJobs.length > 0 ? parentJobs.map((j) => `${j}'s`).join(' or ') : "its parents'";
    return {
      state: 'no-row',
      fire: null,
      parents,
      verdict:
        `no chain row for this instant (baton_dependent_fires): not an instant of ${whose}, ` +
        `or no runner with ${name} was there when they fired`,
      notes,
    };
  }
  const byParentRun = (job: string, id: number) =>
    input.parentRows.get(job)?.find((r) => r.id === id) ?? null;
  const refs = Object.entries(latest.parentRuns ?? {}).map(([job, id]) => {
    const run = byParentRun(job, id);
    return { job, id, words: `${job}#${id}${run ? ` (${run.status})` : ''}`, run };
  });
  if (latest.rerun > 0) notes.push(`chain generation ${latest.rerun} (a re-run of a parent)`);

  if (latest.status === 'started') {
    const run = latest.runId == null ? null : input.rows.find((r) => r.id === latest.runId);
    const by = refs.length > 0 ? refs.map((r) => r.words).join(', ') : 'its parents';
    const child =
      latest.runId == null
        ? ''
        : run
          ? ` → run ${latest.runId}: ${input.describeRun(run)}`
          : ` → run ${latest.runId} (not in the history: pruned?)`;
    return { state: 'started', fire: latest, parents, verdict: `started by ${by}${child}`, notes };
  }

  if (latest.status === 'skipped') {
    const stopped =
      refs.length > 0
        ? refs.map((r) => `${r.job} ${r.run?.status ?? 'ended'} (run ${r.id})`).join(', ')
        : 'its parents did not let it run';
    const why = latest.reason ? oneLine(latest.reason, 200) : stopped;
    return {
      state: 'skipped',
      fire: latest,
      parents,
      verdict: `skipped (upstream): ${why}`,
      notes,
    };
  }

  // Waiting: for the parents without a verdict yet, or for the judgement itself.
  const waitedFor = parents.filter(pending);
  const ended = parents.filter((p) => !pending(p));
  const what =
    parentJobs.length === 0
      ? `waiting for its parents (${name} is not in the local schedules file: their names are not known here)`
      : waitedFor.length > 0
        ? `waiting for ${waitedFor.map((p) => `${p.job}: ${p.words}`).join(', and ')}`
        : `waiting to be judged: ${ended.map((p) => `${p.job} ${p.words}`).join(', ')}`;
  const due =
    latest.checkAt.getTime() <= now.getTime()
      ? `due to be judged since ${formatInstant(latest.checkAt)}`
      : `judged again at ${formatInstant(latest.checkAt)}`;
  const deadline =
    latest.deadline.getTime() <= now.getTime()
      ? `its deadline, ${formatInstant(latest.deadline)}, has passed: skipped as upstream when judged`
      : waitedFor.length === 0 && parentJobs.length > 0
        ? ''
        : `skipped as upstream at ${formatInstant(latest.deadline)} if ` +
          `${waitedFor.length > 1 ? 'they have' : 'it has'} not ` +
          `${waitedFor.every((p) => p.state === 'none') ? 'run' : 'ended'} by then`;
  const judges = input.runners.filter((r) => r.alive && r.jobs.has(name));
  if (judges.length === 0) {
    notes.push(`no live runner has ${name} in its schedule: nobody judges this row until one does`);
  }
  return {
    state: 'waiting',
    fire: latest,
    parents,
    verdict: `${what} — ${[due, deadline].filter((s) => s !== '').join('; ')}`,
    notes,
  };
}

/** An earlier generation of the chain's row, in a note. */
function generationWords(f: DependentFire): string {
  const run = f.runId != null ? ` (run ${f.runId})` : '';
  const why = f.reason ? `: ${oneLine(f.reason, 120)}` : '';
  return `chain generation ${f.rerun}: ${f.status}${run}${why}`;
}

/** `settle, export (on success, within 2h)`: a child's `after:` in one line. */
export function afterWords(after: JobAfter): string {
  return `${after.jobs.join(', ')} (on ${after.on}, within ${formatDuration(after.withinMs)})`;
}
