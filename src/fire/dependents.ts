/**
 * A child job's fire (`after:`, docs/dependencies.md), judged and acted on: whether its parents'
 * runs of the instant let it run (`judgeDependent`, pure), and then either its fire contended like
 * any other — the child's own lock and fire key, so it runs once whatever number of runners judge
 * it — or its `upstream` skip written once (`resolveDependent`).
 *
 * Two callers: the runner's watch (daemon/dependent-watch.ts: the rows whose time has come, and at
 * once the children of a verdict it wrote) and an operator's `--with-dependents` (actions/), each
 * with its own way to contend the child's fire.
 */
import type { JobAfter, JobDefinition } from '../config/schema.js';
import { childrenOf } from '../config/dependencies.js';
import { formatDuration } from '../config/duration.js';
import { eventTargets } from '../config/notify-targets.js';
import type { FinalStatus, RunStatus } from '../run-status.js';
import type { Queryable } from '../store/deadline.js';
import {
  dependentWinner,
  markDependentStarted,
  nextGenerations,
  parentRecords,
  postponeDependent,
  readDependent,
  judgeName,
  renewDependent,
  takeDependent,
  type DependentKey,
  type DependentPlan,
  type ParentRecord,
} from '../store/dependent-fires.js';
import type { ChainFence } from '../store/runs.js';
import type { FireOutcome } from './fire-types.js';
import { skipDependent } from '../store/fire-writes.js';

/** A judgement that could not finish (no session, a claim in flight) is taken again this soon. */
const RETRY_SOON_MS = 1_000;

/** How long the judge gives a parent's fire that has no run, and how often it looks again. */
export interface JudgeTimings {
  /**
   * A parent's fire whose every runner skipped it (paused, overlapping) is judged not run only
   * this long after its instant: a late runner may still win it meanwhile.
   */
  settleMs: number;
  /** A child still waiting is judged again at least this often (a parent lost by the reaper). */
  recheckMs: number;
  /**
   * How long a judge holds a child's fire (`takeDependent`) before another may take it: renewed
   * while it contends the fire, so only a judge that died lets it lapse.
   */
  leaseMs: number;
}

export const JUDGE_TIMINGS: Readonly<JudgeTimings> = {
  settleMs: 30_000,
  recheckMs: 60_000,
  leaseMs: 1_000,
};

/**
 * How long the other runners leave the children of a verdict to the process that wrote it (it
 * judges them at once): the fire's `check_at` is this far after the verdict.
 */
export const WRITER_LEAD_MS = 2_000;

export type Judgement =
  /** Every parent's run lets the child run: these runs. */
  | { kind: 'due'; parentRuns: Record<string, number> }
  /** Some parent has no verdict yet: judged again at `checkAt`. */
  | { kind: 'wait'; checkAt: Date; waitingFor: string[] }
  /** The child does not run this instant, because of `parent`. */
  | {
      kind: 'upstream';
      parent: string;
      parentStatus: FinalStatus | 'skipped' | 'missed' | 'running' | 'none';
      parentRunId: number | null;
      reason: string;
      parentRuns: Record<string, number>;
    };

/**
 * The verdicts `on: failure` runs after. Not `interrupted`: a runner's graceful stop (a deploy)
 * is no failure of the batch, and an alarm job would page at every deploy; `always` runs after it.
 */
const FAILURES: ReadonlySet<RunStatus> = new Set(['failed', 'timeout', 'killed', 'lost']);

/** Whether a parent's verdict lets its child run, by `on:`. */
export function lets(on: JobAfter['on'], status: FinalStatus): boolean {
  if (on === 'always') return true;
  return on === 'success' ? status === 'done' : FAILURES.has(status);
}

const VERDICT_WORDS: Record<FinalStatus, string> = {
  done: 'succeeded',
  failed: 'failed',
  timeout: 'timed out',
  killed: 'was killed',
  lost: 'was lost',
  interrupted: 'was interrupted',
};

/** Skips that settle a parent's fire as not run: nobody will run it after them. */
const NOT_RUN_KINDS: ReadonlySet<string> = new Set(['paused', 'overlap', 'behind']);

/**
 * Whether the child of `after` runs the instant, from its parents' records there (`parents`, in
 * `after.jobs` order). The first parent whose record stops the child decides; a parent still
 * running (or with no record yet) makes it wait, until `deadline`.
 *
 * `within` is judged by when each parent's verdict says its run ended (`finished_at`, database
 * time), not by when this judge looks: a verdict that lets the child but ended after the deadline
 * came too late, and stops it. So every judge, early or late, decides the same — a judge that
 * looks 40 s late still skips a child whose parent ended 3 s after a `within: 1s` instant, and one
 * that looks late at a parent that ended in time still runs it.
 */
export function judgeDependent(
  after: JobAfter,
  parents: readonly ParentRecord[],
  instant: Date,
  now: Date,
  deadline: Date,
  t: JudgeTimings,
): Judgement {
  const parentRuns: Record<string, number> = {};
  const waitingFor: string[] = [];
  const settled = now.getTime() >= instant.getTime() + t.settleMs;
  for (const p of parents) {
    const run = p.run;
    if (run && run.status !== 'running') {
      const status = run.status as FinalStatus;
      parentRuns[p.job] = run.id;
      if (lets(after.on, status)) {
        if (run.finishedAt == null || run.finishedAt <= deadline) continue;
        const late = formatDuration(run.finishedAt.getTime() - instant.getTime(), 'brief');
        return {
          kind: 'upstream',
          parent: p.job,
          parentStatus: status,
          parentRunId: run.id,
          reason:
            `${p.job}'s verdict came too late: ${status} (run ${run.id}) ${late} after the ` +
            `instant, past within ${formatDuration(after.withinMs)}`,
          parentRuns,
        };
      }
      const only = after.on === 'failure' ? '; it runs only after a failure' : '';
      return {
        kind: 'upstream',
        parent: p.job,
        parentStatus: status,
        parentRunId: run.id,
        reason: `${p.job} ${VERDICT_WORDS[status]} (run ${run.id})${only}`,
        parentRuns,
      };
    }
    if (run) {
      waitingFor.push(p.job);
      continue;
    }
    if (p.missed) {
      return {
        kind: 'upstream',
        parent: p.job,
        parentStatus: 'missed',
        parentRunId: p.missed.id,
        reason: `${p.job} missed this fire (run ${p.missed.id})`,
        parentRuns,
      };
    }
    // An `upstream` skip is written once, and no run of the fire follows it; the other kinds
    // only once a late runner could no longer win the fire.
    const skip =
      p.skips.find((s) => s.kind === 'upstream') ??
      (settled ? p.skips.find((s) => s.kind != null && NOT_RUN_KINDS.has(s.kind)) : undefined);
    if (skip) {
      return {
        kind: 'upstream',
        parent: p.job,
        parentStatus: 'skipped',
        parentRunId: skip.id,
        reason: `${p.job} did not run this fire: ${skip.kind} (run ${skip.id})`,
        parentRuns,
      };
    }
    waitingFor.push(p.job);
  }
  if (waitingFor.length === 0) return { kind: 'due', parentRuns };
  if (now >= deadline) {
    const parent = waitingFor[0]!;
    const record = parents.find((p) => p.job === parent);
    return {
      kind: 'upstream',
      parent,
      parentStatus: record?.run ? 'running' : 'none',
      parentRunId: record?.run?.id ?? null,
      reason:
        `${parent} did not finish this fire within ${formatDuration(after.withinMs)}` +
        (record?.run ? ` (run ${record.run.id} still running)` : ' (no run of it)'),
      parentRuns,
    };
  }
  const next = Math.max(instant.getTime() + t.settleMs, now.getTime() + t.recheckMs);
  return {
    kind: 'wait',
    checkAt: new Date(Math.min(deadline.getTime(), next)),
    waitingFor,
  };
}

/**
 * The children a run carries to its verdict. The schedule's chain claims generation 0 of each
 * child's fire, `within` from the instant; an operator's re-run of a past fire (`reran`) the next
 * free generation of each, `within` from its verdict — so a chain run again never meets the
 * children's earlier runs of the instant as its own.
 */
export async function planDependents(
  db: Queryable,
  namespace: string,
  children: readonly JobDefinition[],
  at: Date,
  reran: boolean,
): Promise<DependentPlan[]> {
  const chained = children.filter((c) => c.after != null);
  const generations = reran
    ? await nextGenerations(
        db,
        namespace,
        chained.map((c) => c.name),
        at,
      )
    : null;
  return chained.map((child) => ({
    job: child.name,
    rerun: generations?.get(child.name) ?? 0,
    withinMs: child.after!.withinMs,
    deadlineFrom: reran ? 'now' : 'instant',
  }));
}

/**
 * The children a fire of the schedule (or of a chain) carries to its verdict: every job after it
 * that this runner has enabled, the chain's own generation, `within` from the instant.
 */
export function scheduledDependents(
  jobs: Iterable<JobDefinition>,
  job: JobDefinition,
): DependentPlan[] {
  return childrenOf([...jobs], job.name)
    .filter((child) => child.enabled && child.after)
    .map((child) => ({
      job: child.name,
      rerun: 0,
      withinMs: child.after!.withinMs,
      deadlineFrom: 'instant' as const,
    }));
}

/** A child's fire as its contender began it. */
export interface ChildContention {
  /** This contention's run, once started (null: not, or not yet). */
  startedRunId: () => number | null;
  /** Settles when the fire is over, its run included (null: nothing was done). */
  outcome: Promise<FireOutcome | null>;
}

export interface DependentEnv {
  pool: Queryable;
  host: string;
  pid: number;
  /** Now by the database's clock. */
  now: () => Date;
  timings: JudgeTimings;
  /**
   * Contends the child's fire (trigger `after`), its claim fenced by `fence` (store/runs.ts);
   * null: not contended (the process stops).
   */
  fire: (
    job: JobDefinition,
    key: DependentKey,
    fence: ChainFence,
  ) => Promise<ChildContention | null>;
  /**
   * The children of `job`'s fire `key` (`planDependents`): written with its skip, so that they
   * are judged at once rather than wait for a run that will not come.
   */
  plans: (job: JobDefinition, key: DependentKey) => Promise<DependentPlan[]>;
}

/** What came of judging a child's fire. */
export type Resolution =
  /** Its fire was contended and has its run: this process's (`contention`) or another's. */
  | { state: 'started'; runId: number | null; contention: ChildContention | null }
  /** Not run; `dependents`: its children's fires, written to be judged now. */
  | { state: 'skipped'; reason: string; dependents: DependentPlan[] }
  | { state: 'waiting'; checkAt: Date; waitingFor: string[] }
  /** Nothing to do here: no row, started or skipped already, or another runner judges it now. */
  | { state: 'settled'; status: 'started' | 'skipped' | null; runId: number | null };

/**
 * Judges a child's fire and acts: contends it, skips it as `upstream`, or leaves it to be judged
 * again. The judgement is taken first (`takeDependent`, under a name of this judgement alone:
 * `judgeName`): a fire started or skipped meanwhile, or being judged by another runner, is left
 * alone — one judge at a time, so that one runner never contends a fire another closes as
 * `upstream`. Every write after it is conditional on the judgement still being this one's, and
 * the claim of the child's fire is fenced by it (store/fire-writes.ts): a judge stopped anywhere
 * (SIGSTOP, a long pause) past its lease finds, when it goes on, that it may no longer act.
 */
export async function resolveDependent(
  env: DependentEnv,
  child: JobDefinition,
  key: DependentKey,
): Promise<Resolution> {
  const after = child.after;
  const judge = judgeName(env.host, env.pid);
  const row = after ? await takeDependent(env.pool, key, judge, env.timings.leaseMs) : null;
  if (!row || !after) return settled(env, key);
  // An operator's chain is judged after the parent run that carried it (its row names it).
  const parents = await parentRecords(
    env.pool,
    key.namespace,
    after.jobs,
    key.scheduledAt,
    key.rerun > 0 ? row.parentRuns : null,
  );
  const judgement = judgeDependent(
    after,
    parents,
    key.scheduledAt,
    env.now(),
    row.deadline,
    env.timings,
  );
  switch (judgement.kind) {
    case 'wait':
      await postponeDependent(env.pool, key, judgement.checkAt, judge, env.timings.leaseMs);
      return { state: 'waiting', checkAt: judgement.checkAt, waitingFor: judgement.waitingFor };
    case 'upstream': {
      const targets = eventTargets(child.notify).upstream ?? [];
      const plans = await env.plans(child, key);
      const written = await skipDependent(
        env.pool,
        key,
        { ...judgement, targets },
        { ...env, judge },
        plans,
      );
      if (!written) return settled(env, key);
      return { state: 'skipped', reason: judgement.reason, dependents: written };
    }
    case 'due':
      return contendChild(env, child, key, { judge, parentRuns: judgement.parentRuns });
  }
}

/** The row as it stands, for a judge that may not act on it (not its judgement, or not any more). */
async function settled(env: DependentEnv, key: DependentKey): Promise<Resolution> {
  const now = await readDependent(env.pool, key);
  return {
    state: 'settled',
    status: now?.status === 'waiting' || !now ? null : now.status,
    runId: now?.runId ?? null,
  };
}

/**
 * The child's fire contended, the judgement held meanwhile (renewed: a queued fire may wait); the
 * row then says how it went. A renewal that finds the judgement gone (the judge stalled past its
 * lease) stops renewing: the claim is fenced by it, and nothing after is this judge's to write.
 */
async function contendChild(
  env: DependentEnv,
  child: JobDefinition,
  key: DependentKey,
  fence: ChainFence,
): Promise<Resolution> {
  const { leaseMs } = env.timings;
  let held = true;
  const renewal = setInterval(() => {
    void renewDependent(env.pool, key, fence.judge, leaseMs).then(
      (still) => {
        if (still) return;
        held = false;
        clearInterval(renewal);
      },
      // A renewal the database did not answer proves nothing lost: the next one asks again.
      () => {},
    );
  }, leaseMs / 3);
  renewal.unref();
  try {
    const resolution = await contendHeld(env, child, key, fence);
    // A run of this contention started is the chain's (its claim was fenced); anything else
    // found with the judgement gone is another judge's to say.
    return held || resolution.state === 'started' ? resolution : settled(env, key);
  } finally {
    clearInterval(renewal);
  }
}

async function contendHeld(
  env: DependentEnv,
  child: JobDefinition,
  key: DependentKey,
  fence: ChainFence,
): Promise<Resolution> {
  const { judge, parentRuns } = fence;
  // Judged again soon: not contended to the end (no session, the process stopping), or its fire
  // is held by a claim that is not there (yet).
  const again = async (): Promise<Resolution> => {
    const checkAt = new Date(env.now().getTime() + RETRY_SOON_MS);
    await postponeDependent(env.pool, key, checkAt, judge, env.timings.leaseMs);
    return { state: 'waiting', checkAt, waitingFor: [] };
  };
  const contention = await env.fire(child, key, fence);
  if (!contention) return again();
  // Its claim marked the row started, in the claim's transaction (fenced by the judgement).
  const started = contention.startedRunId();
  if (started != null) return { state: 'started', runId: started, contention };
  const outcome = await contention.outcome;
  if (outcome?.status === 'ran') return { state: 'started', runId: outcome.runId, contention };
  if (outcome?.status !== 'skipped') return again();
  // Not run by this contention. A winner of the fire's generation is the chain's run only when a
  // chain claimed it (trigger `after`: a judge before this one, of an older baton that marked the
  // row after its claim, that died in between); a run of the child's own schedule (or catch-up)
  // started without its parents' verdicts, and is never recorded as a run after them.
  const winner = await dependentWinner(env.pool, key);
  if (winner?.trigger === 'after') {
    await markDependentStarted(env.pool, key, winner.id, parentRuns, judge);
    return { state: 'started', runId: winner.id, contention: null };
  }
  const closeWith = async (reason: string): Promise<Resolution> => {
    const plans = await env.plans(child, key);
    const written = await skipDependent(
      env.pool,
      key,
      {
        reason,
        parentRuns,
        parent: child.name,
        parentStatus: 'skipped',
        parentRunId: null,
        targets: [],
      },
      { ...env, judge },
      plans,
      false,
    );
    if (!written) return settled(env, key);
    return { state: 'skipped', reason, dependents: written };
  };
  if (winner) {
    return closeWith(
      `${child.name}'s fire was taken by its own ${winner.trigger} run (run ${winner.id} on ` +
        `${winner.host}, started ${winner.startedAt.toISOString()}), not a run after its parents`,
    );
  }
  // None found: a claim in flight, or a run of another generation of the instant held the lock
  // — judged again soon.
  if (outcome.kind === 'taken' || outcome.kind === 'already-ran') return again();
  // The child itself did not run the fire (paused, or an earlier run of it still going): its
  // own skip rows say so; the row is closed with the same words, without an `upstream` row.
  return closeWith(`${child.name} skipped the fire: ${outcome.reason}`);
}
