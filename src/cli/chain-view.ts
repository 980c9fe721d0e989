/**
 * `baton explain` of a child job (`after:`, docs/dependencies.md): its chain in text — the
 * `after:` line, where its chain row stands, its parents at the instant — and the same as JSON
 * (`chain` of `explain --json`). The judgement is fleet/explain-chain.ts's.
 */
import { runDocument } from '../actions/documents.js';
import type { JobAfter } from '../config/schema.js';
import { afterWords, type ChainJudgement } from '../fleet/explain-chain.js';
import type { DependentFire, ParentRuns } from '../store/dependent-fire-reads.js';
import { formatInstant, oneLine } from '../text.js';
import { table } from './format.js';

/** The parent runs behind the child's rows at the instant, by run id (its chain rows say). */
export function upstreamOfFires(fires: readonly DependentFire[]): Map<number, ParentRuns> {
  const byRun = new Map<number, ParentRuns>();
  for (const f of fires) if (f.runId != null && f.parentRuns) byRun.set(f.runId, f.parentRuns);
  return byRun;
}

/** The head's lines (`after:`, `chain:`), aligned with `job:` and `fire:`. */
export function chainHead(chain: ChainJudgement, after: JobAfter | null): string[] {
  const lines: string[] = [];
  if (after) lines.push(`after:      ${afterWords(after)}`);
  const f = chain.fire;
  if (!f) {
    lines.push('chain:      no row for this instant');
    return lines;
  }
  const generation = f.rerun > 0 ? ` (generation ${f.rerun})` : '';
  const since = `since ${formatInstant(f.createdAt)}`;
  const state =
    f.status === 'waiting'
      ? `waiting${generation} ${since}; judged again at ${formatInstant(f.checkAt)}; ` +
        `deadline ${formatInstant(f.deadline)}`
      : `${f.status}${generation} at ${formatInstant(f.updatedAt)}` +
        (f.runId != null ? ` (run ${f.runId})` : '');
  lines.push(`chain:      ${state}`);
  return lines;
}

/** The parents at the instant, a line each: what let the child start, stops it, or is awaited. */
export function renderParents(chain: ChainJudgement): string[] {
  if (chain.parents.length === 0) return [];
  const out = [`parents at this instant (${chain.parents.length}):`];
  out.push(
    table(
      ['JOB', 'STATE', 'RUN', 'HOST', 'STARTED', 'FINISHED', 'REASON / ERROR'],
      chain.parents.map((p) => [
        p.job,
        p.state === 'none' ? '(no run yet)' : p.state,
        p.run ? String(p.run.id) : '',
        p.run?.host ?? '',
        formatInstant(p.run?.startedAt ?? null),
        formatInstant(p.run?.finishedAt ?? null),
        oneLine(p.run?.reason ?? p.run?.error ?? ''),
      ]),
    ).trimEnd(),
  );
  return out;
}

function fireDocument(f: DependentFire) {
  return {
    scheduledAt: f.scheduledAt.toISOString(),
    rerun: f.rerun,
    status: f.status,
    checkAt: f.checkAt.toISOString(),
    deadline: f.deadline.toISOString(),
    parentRuns: f.parentRuns,
    runId: f.runId,
    reason: f.reason,
    createdAt: f.createdAt.toISOString(),
    updatedAt: f.updatedAt.toISOString(),
  };
}

/** `chain` of `explain --json`: what the text says, field by field. */
export function chainToJson(
  chain: ChainJudgement,
  after: JobAfter | null,
  fires: readonly DependentFire[],
) {
  return {
    after: after ? { jobs: after.jobs, on: after.on, withinMs: after.withinMs } : null,
    state: chain.state,
    verdict: chain.verdict,
    /** The latest generation's row; `rows`: every generation's. */
    row: chain.fire ? fireDocument(chain.fire) : null,
    rows: fires.map(fireDocument),
    parents: chain.parents.map((p) => ({
      job: p.job,
      state: p.state,
      words: p.words,
      run: p.run ? runDocument(p.run) : null,
    })),
    notes: chain.notes,
  };
}
