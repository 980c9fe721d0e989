/**
 * What running a past fire again means, from the fire's winning rows (every generation): which
 * generation to claim, or why not to (docs/history.md, "Re-runs").
 *
 * - No winner in any generation (never run, missed, only skipped): generation 0 — the claim the
 *   schedule or a catch-up would have made.
 * - A winner: the next generation, max(rerun) + 1. Without `--again` only while no generation is
 *   `done`: a fire that succeeded once is not run twice by accident. The claim itself checks that
 *   again (Attempt.unlessDone), so a re-run finished elsewhere a moment ago is seen.
 */
import type { Run } from '../store/runs.js';

export type RerunPlan =
  { kind: 'refuse'; done: Run } | { kind: 'run'; rerun: number; previous: Run | null };

export function planRerun(winners: readonly Run[], again: boolean): RerunPlan {
  const done = [...winners].reverse().find((w) => w.status === 'done');
  if (done && !again) return { kind: 'refuse', done };
  if (winners.length === 0) return { kind: 'run', rerun: 0, previous: null };
  const latest = winners.reduce((a, w) => (w.rerun > a.rerun ? w : a));
  return { kind: 'run', rerun: latest.rerun + 1, previous: latest };
}

/** Who ran a fire and when: "done on srv-02, finished 2026-12-03T03:00:01.200Z (run 42)". */
export function describeRun(run: Run): string {
  const when = (run.finishedAt ?? run.startedAt).toISOString();
  const gen = run.rerun > 0 ? `, generation ${run.rerun}` : '';
  return `${run.status} on ${run.host}, ${run.finishedAt ? 'finished' : 'started'} ${when} (run ${run.id}${gen})`;
}

/** What the plan will do, in words (`--dry-run`, progress lines). */
export function describePlan(plan: RerunPlan): string {
  if (plan.kind === 'refuse') return `skip: already ran (${describeRun(plan.done)})`;
  if (!plan.previous) return 'run: never run (generation 0)';
  return `run as generation ${plan.rerun} (latest: ${describeRun(plan.previous)})`;
}
