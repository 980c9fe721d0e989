/**
 * One fault soak, start to verdict: plan the faults from the seed, start the fleet, make each
 * fault at its time (and undo it), let the fleet settle, stop every runner gracefully, read the
 * rows, the journal and the logs, and judge (checks.ts). `run.ts` is the command line over it;
 * test/e2e/soak.test.ts runs a short one in `npm test`.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { RowDataPacket } from 'mysql2/promise';
import { sleep, waitFor } from '../helpers/wait.js';
import { OVERLAP_BOUND_MS } from '../helpers/fires.js';
import { judge, p50max, type SoakRow, type Verdicts } from './checks.js';
import { FaultInjector, type FaultRecord } from './faults.js';
import { NAMESPACE, startSoakFleet, type SoakRunner } from './fleet.js';
import { describePlan, mulberry32, planFaults, type PlannedFault } from './plan.js';

/**
 * After the last fault: time for the fleet to be whole again and for what follows a fault to
 * be written — the reaper's round (10 s by default; a claim of the same job reaps sooner), the
 * `missed` rows recovery writes 5 s after a reconnect.
 */
const TAIL_MS = 12_000;
/** Fires this close to the graceful stop may see no runner (they stop taking fires). */
const STOP_MARGIN_MS = 2_000;
/** No fault in the first seconds: the fleet connects and settles first. */
const WARMUP_MS = 3_000;

export interface SoakOptions {
  seconds: number;
  seed: number;
  runners?: number;
  /** Keep the journal's folder even when the soak is clean. */
  keep?: boolean;
  /** Where progress lines go (default: nowhere). */
  log?: (line: string) => void;
}

export interface SoakReport {
  seed: number;
  seconds: number;
  runners: number;
  hosts: { host: string; via: string; skewMs: number; incarnations: number }[];
  plan: PlannedFault[];
  faults: FaultRecord[];
  window: { from: string; until: string };
  verdicts: Verdicts;
  recoveryByKind: Record<
    string,
    { n: number; fromFault: P50Max; fromUndo: P50Max; allReconnected: P50Max }
  >;
  /** Exit codes of the final graceful stop, per host (0 each when all is well). */
  stopExits: Record<string, number | null>;
  crashes: string[];
  failures: string[];
  clean: boolean;
  closingLine: string;
  /** The journal's folder, kept when the soak is not clean (or with `keep`); `../logs` beside it. */
  journalDir: string | null;
}

type P50Max = { p50: number; max: number } | null;

/** The seed's plan and skew: everything a soak decides before it starts. */
function soakPlan(o: SoakOptions) {
  const runnerCount = o.runners ?? 5;
  if (runnerCount < 3) throw new Error('a soak needs at least 3 runners (skewed, proxied, direct)');
  const plan = planFaults({
    seed: o.seed,
    windowMs: o.seconds * 1000,
    runners: runnerCount,
    proxied: 1,
    warmupMs: WARMUP_MS,
  });
  // The skewed host is ahead or behind, by the seed.
  const skew = mulberry32(o.seed ^ 0x5eed)() < 0.5 ? '+1.5' : '-1.5';
  const hosts = Array.from({ length: runnerCount }, (_, i) => `r${i + 1}`);
  const text =
    `soak seed=${o.seed} seconds=${o.seconds} runners=${runnerCount}: r1 clock ${skew} s, ` +
    `r2 behind a freezable proxy, the rest direct; ${plan.length} faults planned:\n` +
    describePlan(plan, hosts);
  return { runnerCount, plan, skew, text };
}

export function describeSoakPlan(o: SoakOptions): string {
  return soakPlan(o).text;
}

export async function runSoak(o: SoakOptions): Promise<SoakReport> {
  const log = o.log ?? (() => undefined);
  const { runnerCount, plan, skew, text } = soakPlan(o);
  log(text);

  const fleet = await startSoakFleet({ seed: o.seed, runners: runnerCount, skew });
  let keepJournal = false;
  try {
    const t0 = Date.now();
    log(`fleet up (${fleet.runners.length} runners); faults from now on`);
    const injector = new FaultInjector(fleet, plan, t0);
    const done = plan.map(async (f) => {
      await sleep(Math.max(0, t0 + f.atMs - Date.now()));
      const rec = await injector.run(f);
      log(
        `  #${rec.n} ${rec.kind} ${rec.target}: ${rec.applied ? 'done' : 'NOT MADE'}` +
          `${rec.undoneAt ? `, undone after ${((rec.undoneAt - rec.at) / 1000).toFixed(1)} s` : ''}` +
          `${rec.note ? ` (${rec.note})` : ''}`,
      );
    });
    await Promise.all(done);
    await sleep(Math.max(0, t0 + o.seconds * 1000 - Date.now()));

    // The fleet whole again: every runner alive (one that died by itself is started again, and
    // reported) and connected, then the tail.
    for (const r of fleet.runners) if (!r.alive) r.launch();
    // One that does not come back within a minute is a finding (reported), not the soak's end.
    const notReconnected: string[] = [];
    await Promise.all(
      fleet.runners.map((r) =>
        connected(r).catch(() => notReconnected.push(`${r.host}: no lock session after 60 s`)),
      ),
    );
    log(`faults over; every runner connected; ${TAIL_MS / 1000} s tail`);
    await sleep(TAIL_MS);

    const stopAt = Date.now();
    const stopExits: Record<string, number | null> = {};
    await Promise.all(
      fleet.runners.map(async (r) => (stopExits[r.host] = await r.stop('SIGTERM'))),
    );
    log('every runner stopped gracefully; judging');

    const [rows] = await fleet.pool.query<(SoakRow & RowDataPacket)[]>(
      'SELECT * FROM baton_runs WHERE namespace = ? ORDER BY scheduled_at, id',
      [NAMESPACE],
    );
    // The first instant every runner could have attempted: the fleet was up at t0.
    const window = { from: t0 + 1_000, until: stopAt - STOP_MARGIN_MS };
    const verdicts = judge({
      entries: fleet.journal.entries(),
      attempts: fleet.journal.attempts(),
      rows,
      logs: new Map(fleet.runners.map((r) => [r.host, r.lines()])),
      faults: injector.records,
      window,
    });
    const crashes = [...fleet.runners.flatMap((r) => r.crashes), ...notReconnected];
    const report = compose(o, runnerCount, plan, injector.records, verdicts, stopExits, crashes);
    report.hosts = fleet.runners.map((r) => ({
      host: r.host,
      via: r.via,
      skewMs: r.skewMs,
      incarnations: r.incarnations.length,
    }));
    report.window = {
      from: new Date(window.from).toISOString(),
      until: new Date(window.until).toISOString(),
    };
    keepJournal = !report.clean || o.keep === true;
    if (keepJournal) {
      // Beside the journal, every host's log lines (all its processes, with their real times):
      // the evidence for a check that failed.
      const logs = path.join(path.dirname(fleet.journal.dir), 'logs');
      mkdirSync(logs, { recursive: true });
      for (const r of fleet.runners) {
        const text = r
          .lines()
          .map((l) => JSON.stringify(l))
          .join('\n');
        writeFileSync(path.join(logs, `${r.host}.ndjson`), `${text}\n`);
      }
      report.journalDir = fleet.journal.dir;
    }
    return report;
  } finally {
    await fleet.destroy();
    if (!keepJournal) rmSync(path.dirname(fleet.config), { recursive: true, force: true });
  }
}

/** Waits until the runner's current process is connected: started, and no loss unanswered. */
function connected(r: SoakRunner): Promise<boolean> {
  return waitFor(
    `${r.host} connected`,
    () => {
      const lines = r.current.lines;
      if (!lines.some((l) => l.msg === 'runner started')) return false;
      const lost = lines.findLastIndex((l) => l.msg === 'lock session lost');
      const back = lines.findLastIndex((l) => l.msg === 'lock session reopened');
      return lost < back || lost < 0;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
}

function compose(
  o: SoakOptions,
  runners: number,
  plan: PlannedFault[],
  faults: FaultRecord[],
  v: Verdicts,
  stopExits: Record<string, number | null>,
  crashes: string[],
): SoakReport {
  const kinds = [...new Set(faults.filter((f) => f.applied).map((f) => f.kind))];
  const recoveryByKind = Object.fromEntries(
    kinds.map((kind) => {
      const of = v.recovery.filter((r) => r.kind === kind);
      return [
        kind,
        {
          n: of.length,
          fromFault: p50max(of.map((r) => r.fromFaultMs)),
          fromUndo: p50max(of.map((r) => r.fromUndoMs)),
          allReconnected: p50max(of.map((r) => r.allReconnectedMs)),
        },
      ];
    }),
  );
  const failures: string[] = [];
  const count = (what: string, n: number) => n > 0 && failures.push(`${what}=${n}`);
  count('double-starts', v.doubleStarts.length);
  count('overlap>bound', v.overBound.length);
  count('history-mismatch', v.historyMismatch.length);
  count('stuck-running', v.stuckRunning.length);
  count('unaccounted', v.unaccounted.length);
  count('starts-after-loss', v.startsAfterLoss.length);
  count('crashes', crashes.length);
  count('unclean-stops', Object.values(stopExits).filter((c) => c !== 0).length);
  const all = p50max(v.recovery.map((r) => r.fromFaultMs));
  const s = (ms: number | undefined) => (ms == null ? '-' : `${(ms / 1000).toFixed(1)} s`);
  const applied = faults.filter((f) => f.applied).length;
  const closingLine =
    `soak seed=${o.seed} seconds=${o.seconds} runners=${runners}: fires=${v.fires} ` +
    `faults=${applied} double-starts=${v.doubleStarts.length} ` +
    `overlap>bound=${v.overBound.length} (max ${s(v.maxOverlapMs)}, bound ${s(OVERLAP_BOUND_MS)}) ` +
    `history-mismatch=${v.historyMismatch.length} stuck-running=${v.stuckRunning.length} ` +
    `unaccounted=${v.unaccounted.length} starts-after-loss=${v.startsAfterLoss.length} ` +
    `crashes=${crashes.length} recovery p50=${s(all?.p50)} max=${s(all?.max)} — ` +
    (failures.length === 0 ? 'clean' : `FAILED: ${failures.join(' ')}`);
  return {
    seed: o.seed,
    seconds: o.seconds,
    runners,
    hosts: [],
    plan,
    faults,
    window: { from: '', until: '' },
    verdicts: v,
    recoveryByKind,
    stopExits,
    crashes,
    failures,
    clean: failures.length === 0,
    closingLine,
    journalDir: null,
  };
}

/** The report as the soak prints it: every check, the evidence of each failure, the closing line. */
export function formatReport(r: SoakReport): string {
  const v = r.verdicts;
  const out: string[] = [];
  const list = (title: string, items: readonly string[], limit = 12) => {
    out.push(`${title}: ${items.length}`);
    for (const item of items.slice(0, limit)) out.push(`    ${item}`);
    if (items.length > limit) out.push(`    … and ${items.length - limit} more (--out has all)`);
  };
  const s = (ms: number | null | undefined) => (ms == null ? '-' : `${(ms / 1000).toFixed(2)} s`);
  out.push(`window ${r.window.from} – ${r.window.until}: ${v.fires} fires of 5 jobs`);
  list('(1) fires started twice', v.doubleStarts);
  out.push(
    `(2) overlaps: ${v.overlaps.length}, max ${s(v.maxOverlapMs)}; beyond the ${s(OVERLAP_BOUND_MS)} bound: ${v.overBound.length}`,
  );
  for (const ov of v.overlaps.slice(0, 12)) {
    out.push(
      `    ${ov.ms == null ? 'unmeasured' : s(ov.ms)} (${ov.measure}) ${ov.run} beside ${ov.other}; cause: ${ov.cause}`,
    );
  }
  list('(3) history vs journal mismatches', v.historyMismatch);
  list('(4) rows still running after the graceful stop', v.stuckRunning);
  list('(5) fires with no row at all', v.unaccounted);
  const nw = Object.entries(v.noWinner).sort((a, b) => b[1] - a[1]);
  out.push(
    `    (fires with rows but no winner, by reason: ${nw.map(([k, n]) => `${k} ×${n}`).join('; ') || 'none'})`,
  );
  out.push('(6) recovery: fault → next run of an every-second job (p50 / max), and from its undo');
  for (const [kind, k] of Object.entries(r.recoveryByKind)) {
    out.push(
      `    ${kind.padEnd(15)} ×${k.n}: ${s(k.fromFault?.p50)} / ${s(k.fromFault?.max)}` +
        (k.fromUndo ? `; from undo ${s(k.fromUndo.p50)} / ${s(k.fromUndo.max)}` : '') +
        (k.allReconnected
          ? `; every runner back ${s(k.allReconnected.p50)} / ${s(k.allReconnected.max)}`
          : ''),
    );
  }
  list(
    '(7) job starts after "lock session lost", before the reconnect',
    v.startsAfterLoss.map((x) => `${x.run}: ${x.afterLossMs} ms after the loss`),
  );
  list(
    '(7, not a failure) processes started before the loss whose first instruction came after it (stopped with their run; check 2 bounds them)',
    v.startsRacingLoss.map((x) => `${x.run}: ${x.afterLossMs} ms after the loss`),
  );
  list('runners that exited by themselves, or did not reconnect', r.crashes);
  out.push(
    `final stop exit codes: ${Object.entries(r.stopExits)
      .map(([h, c]) => `${h}=${c}`)
      .join(' ')}`,
  );
  if (r.journalDir) out.push(`journal kept in ${r.journalDir}`);
  out.push(r.closingLine);
  return out.join('\n');
}
