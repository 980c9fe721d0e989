/**
 * An operator's run with its dependents (`--with-dependents`, docs/dependencies.md): the children
 * a run of a parent carries to its verdict, planned here (`operatorDependents`), and the wait for
 * the chain below one instant to be over (`awaitChain`) — a backfill runs each instant's chain
 * before the next instant.
 *
 * The process that runs the parent judges its children once the verdict is written and runs those
 * due (a runner's watch, a foreground session: fire/operator-fire.ts), so the chain goes on
 * whatever the surface does; `awaitChain` only reads how it went.
 */
import { childrenOf } from '../config/dependencies.js';
import type { JobDefinition } from '../config/schema.js';
import { delay } from '../delay.js';
import { planDependents } from '../fire/dependents.js';
import type { OperatorFires } from '../fire/operator-fire.js';
import {
  latestDependent,
  readDependent,
  type DependentPlan,
  type DependentRow,
} from '../store/dependent-fires.js';
import { findRun } from '../store/history-reads.js';
import { authorize, type ScopeAction, type ScopedActor } from './scope.js';

/** How often the chain's rows are read while it goes on. */
const CHAIN_POLL_MS = 100;
/**
 * A waiting row whose next judgement is further away than this was judged and left waiting (for
 * another parent: the judge postpones by a minute at least), not merely left to the verdict's
 * writer (a lead of seconds).
 */
const POSTPONED_MS = 10_000;

/**
 * The children an operator's run of `parent` at `at` carries: its enabled children, as the next
 * free generation of each (a past fire run again) or the first (a run now).
 */
export function operatorDependents(
  fires: OperatorFires,
  parent: JobDefinition,
  at: Date,
  reran: boolean,
): Promise<DependentPlan[]> {
  const children = childrenOf(fires.jobs(), parent.name).filter((c) => c.enabled);
  return planDependents(fires.pool, fires.namespace, children, at, reran);
}

/**
 * Every job a run of `parent` with its dependents may start: its enabled children, theirs in turn
 * (each child's verdict carries its own children: fire/dependents.ts), each once.
 */
export function chainBelow(jobs: readonly JobDefinition[], parent: string): string[] {
  const seen = new Set<string>();
  const next = [parent];
  while (next.length > 0) {
    for (const child of childrenOf(jobs, next.pop()!)) {
      if (!child.enabled || seen.has(child.name) || child.name === parent) continue;
      seen.add(child.name);
      next.push(child.name);
    }
  }
  return [...seen];
}

/**
 * An operator's action with `--with-dependents` (`withDependents`) starts the jobs below the
 * parent too: the actor's scope must cover each of them for the action, as it covers the parent
 * (a token that may run `report*` does not run `settle` by running `report-daily` with its
 * dependents). Each is asked in turn; the first refused is audited and thrown (actions/scope.ts).
 */
export async function authorizeChain(
  fires: OperatorFires,
  actor: ScopedActor,
  action: ScopeAction,
  parent: string,
): Promise<void> {
  if (!actor.scope) return;
  for (const job of chainBelow(fires.jobs(), parent)) {
    await authorize(fires.pool, actor, { action, job, namespace: fires.namespace });
  }
}

/** What one child did with the instant, as the chain's report says it. */
export interface ChainStep {
  job: string;
  rerun: number;
  /** Its run's verdict, `skipped` (upstream, or its own skip), or `waiting` (another parent). */
  status: string;
  runId: number | null;
  reason?: string;
}

/**
 * Waits until the chain below `parent`'s run of `at` is over: each child started and its run
 * ended, or skipped, or left waiting for another parent (judged and postponed) — and the same
 * below each child that ran. `plans` are the parent's children as planned (null: each child's
 * latest generation). Stops waiting, saying so, once the process stops.
 */
export async function awaitChain(
  fires: OperatorFires,
  parent: string,
  at: Date,
  plans: readonly DependentPlan[] | null,
): Promise<ChainStep[]> {
  const children =
    plans ??
    childrenOf(fires.jobs(), parent)
      .filter((c) => c.enabled)
      .map((c) => ({ job: c.name, rerun: -1 }));
  const steps: ChainStep[] = [];
  for (const child of children) {
    const row = await judged(fires, child.job, at, child.rerun);
    if (!row) continue;
    if (row.status !== 'started') {
      steps.push({
        job: row.job,
        rerun: row.rerun,
        status: row.status,
        runId: row.runId,
        ...(row.reason ? { reason: row.reason } : {}),
      });
      continue;
    }
    const run = row.runId == null ? null : await ended(fires, row.runId);
    steps.push({
      job: row.job,
      rerun: row.rerun,
      status: run?.status ?? 'running',
      runId: row.runId,
    });
    if (run && run.status !== 'running')
      steps.push(...(await awaitChain(fires, row.job, at, null)));
  }
  return steps;
}

/**
 * The child's fire once judged: started, skipped, or waiting with its next judgement postponed
 * past the verdict writer's lead (it waits for another parent). Null: no fire of it was written
 * (the parent's run carried none), or the process stops.
 */
async function judged(
  fires: OperatorFires,
  job: string,
  at: Date,
  rerun: number,
): Promise<DependentRow | null> {
  const key = { namespace: fires.namespace, job, scheduledAt: at, rerun };
  for (;;) {
    const row =
      rerun >= 0
        ? await readDependent(fires.pool, key)
        : await latestDependent(fires.pool, fires.namespace, job, at);
    const now = (await fires.now()).getTime();
    // Left waiting for another parent, or waiting past its deadline (nobody judges it: no live
    // runner has the child): the chain is over for this command.
    const leftWaiting =
      row?.status === 'waiting' &&
      (row.checkAt.getTime() > now + POSTPONED_MS || now > row.deadline.getTime() + POSTPONED_MS);
    // No row: the parent's verdict carried none (it is written with the verdict, in one
    // transaction, before this is asked).
    if (!row || row.status !== 'waiting' || leftWaiting || fires.stopping()) return row;
    await delay(CHAIN_POLL_MS);
  }
}

/** The run once it has its verdict (or the process stops). */
async function ended(fires: OperatorFires, runId: number) {
  for (;;) {
    const run = await findRun(fires.pool, runId);
    if (!run || run.status !== 'running' || fires.stopping()) return run;
    await delay(CHAIN_POLL_MS);
  }
}
