/**
 * The peers-cron scenario's report (bench/scenarios/peers-cron.ts): its table, its figures (each
 * system's, and every peer's p99 over baton's) and the checks of issue 21's target.
 */
import type { Check, Figure, ScenarioResult, TableRow } from '../index.js';
import { distFigures, round } from '../index.js';
import { MINUTE_JOBS, SECOND_JOBS, SKEW, type SystemResult } from './harness.js';

/** The scenario's result from its systems' (`checks` and `notes`: what it has said already). */
export function report(
  results: SystemResult[],
  window: { seconds: number; minutes: number },
  checks: Check[],
  notes: string[],
): ScenarioResult {
  const { seconds, minutes } = window;
  const table: TableRow[] = [];
  const figures: Record<string, Figure> = {
    second_jobs: SECOND_JOBS,
    second_window_s: seconds,
    minute_jobs: MINUTE_JOBS,
    minute_window_min: minutes,
    skew_s: Number(SKEW),
  };
  const versions: Record<string, string> = {};
  for (const r of results) {
    versions[r.system] = r.version;
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    table.push({
      system: r.system,
      workload:
        r.workload === 'second'
          ? `${SECOND_JOBS} jobs/s × ${seconds} s`
          : `${MINUTE_JOBS} jobs/min × ${minutes}`,
      'lag p50 / p99': `${round(r.lag.p50, 1)} / ${round(r.lag.p99, 1)} ms`,
      'run twice': `${r.twice} of ${r.fires}`,
      lost: r.lost,
      'idle RSS per worker': `${round(mean(r.rssIdleMiB), 0)} MiB`,
      'peak RSS': `${round(Math.max(...r.rssPeakMiB), 0)} MiB`,
      load: `${r.loadStart} → ${r.loadEnd}`,
    });
    const key = r.system
      .replace(/\(every (second|minute)\)/, '$1')
      .replace(/[^a-z0-9]+/gi, '_')
      .replace(/^_|_$/g, '')
      .toLowerCase();
    Object.assign(figures, distFigures(`${key}_lag_ms`, r.lag, 1), {
      [`${key}_fires`]: r.fires,
      [`${key}_fires_run_twice`]: r.twice,
      [`${key}_fires_lost`]: r.lost,
      [`${key}_runs`]: r.runs,
      [`${key}_idle_rss_mib`]: round(mean(r.rssIdleMiB), 1),
      [`${key}_peak_rss_mib`]: round(Math.max(...r.rssPeakMiB), 1),
      [`${key}_runs_by_worker`]: JSON.stringify(r.byWorker),
      [`${key}_load`]: `${r.loadStart} → ${r.loadEnd}`,
      ...(r.claim ? distFigures(`${key}_claim_lag_ms`, r.claim, 1) : {}),
    });
    notes.push(...r.notes);
  }
  figures.versions = JSON.stringify(versions);
  for (const w of ['second', 'minute'] as const) {
    const peers = results.filter((r) => r.workload === w && !r.baton);
    for (const b of results.filter((r) => r.workload === w && r.baton)) {
      checks.push(...versusBaton(b, peers, figures));
    }
  }
  notes.push(
    `Lag = the real instant of the job's first instruction − the fire's instant, the first run of each fire; the peers' jobs and baton library's are functions in warm processes, the baton daemon's are processes it spawns (a C program). Idle RSS: each worker's process tree just before the first measured fire (a baton runner with its spawner; a library replica is one process); peak: the most over the window. Versions: ${JSON.stringify(versions)}.`,
    `The machine is shared (2 cores): load averages (1/5/15 min) at each system's start and end are in the table.`,
  );
  return { figures, table, notes, checks };
}

/**
 * One baton row against the peers of its workload: the figures `<peer>_p99_over_baton_p99` (the
 * daemon; `…_over_baton_library_p99` for library mode) and `…_claim_p99`, and the checks of
 * issue 21's target — baton's p99 at least 10× lower than each peer's, no peer better on fires
 * run twice or lost — and of its own correctness.
 */
function versusBaton(
  b: SystemResult,
  peers: SystemResult[],
  figures: Record<string, Figure>,
): Check[] {
  const library = b.baton === 'library';
  const suffix = library ? 'baton_library' : 'baton';
  const label = library ? 'baton library mode' : 'baton';
  const checks: Check[] = [];
  for (const p of peers) {
    const ratio = p.lag.p99 / b.lag.p99;
    const key = p.system
      .replace(/[^a-z0-9]+/gi, '_')
      .replace(/_$/, '')
      .toLowerCase();
    figures[`${key}_p99_over_${suffix}_p99`] = round(ratio, 1);
    // Beside baton's claim: when it decided to run the fire, before starting the job (the
    // daemon's spawn, library mode's call of the handler).
    if (b.claim) figures[`${key}_p99_over_${suffix}_claim_p99`] = round(p.lag.p99 / b.claim.p99, 1);
    checks.push(
      {
        name: `${label}'s p99 lag ≥ 10× lower than ${p.system}'s (${b.workload} workload)`,
        ok: ratio >= 10,
        detail: `${p.system} p99 ${round(p.lag.p99, 1)} ms, ${label} ${round(b.lag.p99, 1)} ms: ${round(ratio, 1)}×`,
      },
      {
        name: `${p.system} no better than ${label} on double runs and lost fires`,
        ok: p.twice >= b.twice && p.lost >= b.lost,
        detail: `${p.system}: ${p.twice} run twice, ${p.lost} lost; ${label}: ${b.twice} run twice, ${b.lost} lost (of ${b.fires})`,
      },
    );
  }
  checks.push({
    name: `${library ? 'baton library' : 'baton'} (${b.workload}): no fire run twice, none lost`,
    ok: b.twice === 0 && b.lost === 0,
    detail: `${b.twice} run twice, ${b.lost} lost of ${b.fires}`,
  });
  return checks;
}
