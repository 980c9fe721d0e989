/**
 * Dependencies (`after:`, issue 37): a chain settle → report → export on 3 runners, settle every
 * second, for 60 fires (quick: 10). Every job is the stamp program (bench/lib/stamp.ts), so each
 * process a job started is on record, not only the rows.
 *
 * Per chain, while the parent's runner lives:
 * - the child's start lag after its parent's verdict: `report.started_at − settle.finished_at`,
 *   and `export.started_at − report.finished_at` (database time, DATETIME(3): truncated to the
 *   ms). `finished_at` is when the parent's process ended, converted to database time; the
 *   verdict commits a little later, and the runner that wrote it judges the children at once;
 * - when the child's process ran its first instruction, against the same end (the stamp, on the
 *   host clock moved onto the database's by a measured offset);
 * - the chain's end, `export.finished_at − settle's instant`;
 * - statements per chain: the server's `Questions` over the window, minus the runners' background
 *   rate measured just before it with nothing firing, over the chains. The same is measured for a
 *   control: settle, report and export as three independent every-second jobs, so that the
 *   chain's own cost is the difference.
 *
 * The windows are bounded by reloads (SIGHUP): the runners start with the chain on a yearly
 * schedule (nothing fires; the background is measured), the file then gives settle `* * * * * *`
 * for the window and its yearly schedule back after it. The control runs last: a runner whose
 * file had no child job for a while, then gets one by a reload, writes the child's fires for every
 * instant of the parent in between (daemon/dependent-watch.ts moves `expectedUntil` only while
 * it has children) and runs them 30 s (`settleMs`) later — which the chain's phases would meet.
 *
 * Second phase, the failover: `kill -9` of the runner that wrote settle's verdict right after the
 * commit (the verdict seen by polling the row), 5 times (quick: 2), each victim replaced; the
 * child's lag then, with the default timings (the others leave a verdict's children to its writer
 * for `leadMs` 2 s, and look every `pollMs` 1 s). A kill that came after the writer claimed
 * report leaves report `lost` with its runner: counted, not in the lag.
 *
 * Checks: every successful instant of settle has exactly one run of report and one of export,
 * done; no fire ran twice (rows: one winner per job, instant and generation; stamps: one process
 * per run, one run per job and instant); each kill's instant has exactly one run of report; a
 * kill landed before the writer's claim (else the failover lag is not measured); no runner error.
 */
import path from 'node:path';
import type { RowDataPacket } from 'mysql2/promise';
import { stringify } from 'yaml';
import type {
  BenchContext,
  BenchRunner,
  Check,
  Scenario,
  StatementCount,
  TableRow,
} from '../lib/index.js';
import {
  distFigures,
  distRow,
  makeTempDir,
  percentiles,
  reloadSchedule,
  round,
} from '../lib/index.js';
import { buildStamp, clockOffset, stampLines, type Stamp } from '../lib/stamp.js';

const RUNNERS = 3;
const NAMESPACE = 'chain';
const YEARLY = '0 0 1 1 *';
const EVERY_SECOND = '* * * * * *';
/** Nothing fires while the background is measured, for this long. */
const BASELINE_MS = 6_000;

interface RunRow extends RowDataPacket {
  id: number;
  job: string;
  scheduled_at: Date;
  rerun: number;
  winner: number | null;
  status: string;
  triggered_by: string;
  reason_kind: string | null;
  host: string;
  started_at: Date;
  finished_at: Date | null;
}

type Shape = 'chain' | 'plain';

/** The schedules file: the chain (or the control's three independent jobs), firing or not. */
function schedule(stamp: Stamp, stamps: string, shape: Shape, firing: boolean): string {
  const command = stamp.argv(stamps);
  const every = firing ? EVERY_SECOND : YEARLY;
  const jobs =
    shape === 'chain'
      ? {
          settle: { schedule: every, command },
          // The children run only after their parents: no schedule of their own.
          report: { after: { jobs: ['settle'] }, command },
          export: { after: { jobs: ['report'] }, command },
        }
      : {
          settle: { schedule: every, command },
          report: { schedule: every, command },
          export: { schedule: every, command },
        };
  return stringify({ namespace: NAMESPACE, jobs });
}

interface Window {
  from: Date;
  to: Date;
  count: StatementCount;
  baseRate: number;
}

/**
 * One measured window: the background (nothing firing) for BASELINE_MS, then the statements from
 * the reload that makes settle fire, through `seconds` of fires and the reload that stops them,
 * until `settled` says every fire of the window is over.
 */
async function measuredWindow(
  ctx: BenchContext,
  runners: BenchRunner[],
  file: string,
  idle: string,
  firing: string,
  seconds: number,
  settled: (from: Date, to: Date) => Promise<boolean>,
): Promise<Window> {
  await reloadSchedule(ctx, runners, file, idle);
  await ctx.sleep(1_000); // the reload's own registry write
  const baseline = await ctx.statements();
  await ctx.sleep(BASELINE_MS);
  const base = await baseline.stop();
  const counter = await ctx.statements();
  const from = await ctx.db.now();
  await reloadSchedule(ctx, runners, file, firing);
  await ctx.sleep(seconds * 1_000);
  await reloadSchedule(ctx, runners, file, idle);
  const to = await ctx.db.now();
  // A chain that never ends is reported by the checks, not thrown.
  await ctx
    .waitFor('every fire of the window over', () => settled(from, to), {
      timeoutMs: 60_000,
      intervalMs: 250,
    })
    .catch((err: unknown) => ctx.log(String(err)));
  // The other runners' looks at the children's rows (every second) that could still come.
  await ctx.sleep(1_500);
  const count = await counter.stop();
  return { from, to, count, baseRate: base.statements / base.seconds };
}

const rowsIn = (ctx: BenchContext, from: Date, to: Date) =>
  ctx.db.query<RunRow>(
    `SELECT id, job, scheduled_at, rerun, winner, status, triggered_by, reason_kind, host,
            started_at, finished_at
       FROM baton_runs WHERE namespace = ? AND scheduled_at BETWEEN ? AND ? ORDER BY id`,
    [NAMESPACE, from, to],
  );

const winnerOf = (rows: RunRow[], job: string, at: Date) =>
  rows.filter((r) => r.job === job && r.scheduled_at.getTime() === at.getTime() && r.winner === 1);

/** Every settle of the window has its chain over: export's verdict, or no chain to wait for. */
async function chainsOver(ctx: BenchContext, from: Date, to: Date): Promise<boolean> {
  const rows = await rowsIn(ctx, from, to);
  if (rows.some((r) => r.status === 'running')) return false;
  return rows
    .filter((r) => r.job === 'settle' && r.winner === 1 && r.status === 'done')
    .every((s) => winnerOf(rows, 'export', s.scheduled_at).length > 0);
}

/** run id → how many processes stamped it, and the first stamp (host ms). */
function readStampLines(file: string): Map<number, { n: number; at: number }> {
  const out = new Map<number, { n: number; at: number }>();
  for (const { run, at } of stampLines(file)) {
    const seen = out.get(run);
    if (seen) seen.n++;
    else out.set(run, { n: 1, at });
  }
  return out;
}

interface Trial {
  instant: Date;
  victim: string;
  killedAfterMs: number;
  landed: 'before' | 'after';
  winners: number;
  lagMs: number;
}

/** The failover: kill -9 of settle's verdict writer right after the commit, `n` times. */
async function failover(
  ctx: BenchContext,
  runners: BenchRunner[],
  config: string,
  n: number,
): Promise<Trial[]> {
  const trials: Trial[] = [];
  let replacements = 0;
  for (let i = 0; i < n + 3 && trials.length < n; i++) {
    const now = (await ctx.db.now()).getTime();
    const instant = new Date(Math.ceil((now + 300) / 1000) * 1000);
    // Poll the winner's row until its verdict; a first look that finds it done is no trial.
    let first = true;
    let verdict: RunRow | undefined;
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; first = false) {
      const [row] = await ctx.db.query<RunRow>(
        `SELECT id, host, status, finished_at FROM baton_runs
          WHERE namespace = ? AND job = 'settle' AND scheduled_at = ? AND winner = 1`,
        [NAMESPACE, instant],
      );
      if (row && row.status !== 'running') {
        verdict = row;
        break;
      }
      await ctx.sleep(row ? 1 : 20);
    }
    const seen = performance.now();
    const victim = runners.find((r) => r.host === verdict?.host);
    if (!verdict || first || !victim || verdict.status !== 'done') continue;
    victim.child.kill('SIGKILL');
    const killedAfterMs = performance.now() - seen;
    runners.splice(runners.indexOf(victim), 1);
    const replaced = ctx.startRunners(1, {
      config,
      hostPrefix: `chain-r${++replacements}`,
      args: ['--grace', '5'],
    });
    const report = await ctx.waitFor(
      `report at ${instant.toISOString()} decided`,
      async () => {
        const rows = await rowsIn(ctx, instant, instant);
        const r = rows.filter((x) => x.job === 'report');
        const decided = r.some(
          (x) => ((x.winner ?? 0) >= 1 && x.status !== 'running') || x.reason_kind === 'upstream',
        );
        return decided ? { rows, report: r } : null;
      },
      { timeoutMs: 60_000, intervalMs: 50 },
    );
    const winners = report.report.filter((x) => (x.winner ?? 0) >= 1);
    const settle = winnerOf(report.rows, 'settle', instant)[0]!;
    const w = winners[0];
    trials.push({
      instant,
      victim: victim.host,
      killedAfterMs,
      landed: w && w.host !== victim.host ? 'before' : 'after',
      winners: winners.length,
      lagMs: w ? w.started_at.getTime() - settle.finished_at!.getTime() : NaN,
    });
    ctx.log(
      `kill -9 of ${victim.host} ${round(killedAfterMs, 1)} ms after settle's verdict at ` +
        `${instant.toISOString()}: report on ${w?.host ?? '-'} (${w?.status ?? 'none'}), ` +
        `${trials.at(-1)!.lagMs} ms after settle ended`,
    );
    runners.push(...(await replaced));
  }
  return trials;
}

const list = (xs: unknown[]) => xs.slice(0, 5).join('; ') + (xs.length > 5 ? ' …' : '');

export default {
  name: 'chain',
  title: 'Dependencies: settle → report → export on 3 runners, settle every second',
  async run(ctx) {
    const seconds = ctx.quick ? 10 : 60;
    const controlSeconds = ctx.quick ? 10 : 30;
    const kills = ctx.quick ? 2 : 5;
    const offset = await clockOffset(ctx.db);
    const stamp = buildStamp();
    const stamps = path.join(makeTempDir('baton-bench-chain-'), 'stamps.txt');
    const chainIdle = schedule(stamp, stamps, 'chain', false);
    const chainFiring = schedule(stamp, stamps, 'chain', true);
    const config = ctx.writeSchedule(chainIdle);
    ctx.log(`starting ${RUNNERS} runners`);
    const runners = await ctx.startRunners(RUNNERS, {
      config,
      hostPrefix: 'chain',
      args: ['--grace', '5'],
    });
    const all = [...runners];
    // Start-up work (migrations, recovery's look-ups) settles first.
    await ctx.sleep(5_000);

    ctx.log(`chain: ${seconds} s of settle every second`);
    const chain = await measuredWindow(
      ctx,
      runners,
      config,
      chainIdle,
      chainFiring,
      seconds,
      (from, to) => chainsOver(ctx, from, to),
    );
    const chainRows = await rowsIn(ctx, chain.from, chain.to);

    ctx.log(`failover: ${kills} kills of settle's verdict writer (default timings)`);
    await reloadSchedule(ctx, runners, config, chainFiring);
    const trials = await failover(ctx, runners, config, kills);
    all.push(...runners.filter((r) => !all.includes(r)));
    const failoverTo = await ctx.db.now();

    ctx.log(`control: ${controlSeconds} s of the three jobs, independent, every second`);
    const plainIdle = schedule(stamp, stamps, 'plain', false);
    const plainFiring = schedule(stamp, stamps, 'plain', true);
    const control = await measuredWindow(
      ctx,
      runners,
      config,
      plainIdle,
      plainFiring,
      controlSeconds,
      async (from, to) => !(await rowsIn(ctx, from, to)).some((r) => r.status === 'running'),
    );
    const controlRows = await rowsIn(ctx, control.from, control.to);

    // The chains of the window.
    const settles = chainRows.filter((r) => r.job === 'settle' && r.winner === 1);
    const stamped = readStampLines(stamps);
    const reportLag: number[] = [];
    const exportLag: number[] = [];
    const reportStart: number[] = [];
    const chainEnd: number[] = [];
    const settleClaim: number[] = [];
    let onWriter = 0;
    const incomplete: string[] = [];
    for (const s of settles) {
      const at = s.scheduled_at;
      settleClaim.push(s.started_at.getTime() - at.getTime());
      if (s.status !== 'done') continue;
      const [r] = winnerOf(chainRows, 'report', at);
      const [e] = winnerOf(chainRows, 'export', at);
      if (!r || !e || r.status !== 'done' || e.status !== 'done' || r.triggered_by !== 'after') {
        incomplete.push(
          `${at.toISOString()}: report ${r?.status ?? 'none'}, export ${e?.status ?? 'none'}`,
        );
        continue;
      }
      reportLag.push(r.started_at.getTime() - s.finished_at!.getTime());
      exportLag.push(e.started_at.getTime() - r.finished_at!.getTime());
      chainEnd.push(e.finished_at!.getTime() - at.getTime());
      if (r.host === s.host) onWriter++;
      const st = stamped.get(Number(r.id));
      if (st) reportStart.push(st.at + offset.offsetMs - s.finished_at!.getTime());
    }
    const doneSettles = settles.filter((s) => s.status === 'done').length;
    // The chain's outbox agrees: each child's fire of the window started, with its winner's run.
    const outbox = await ctx.db.query<RowDataPacket>(
      `SELECT job, scheduled_at, status, run_id FROM baton_dependent_fires
        WHERE namespace = ? AND rerun = 0 AND scheduled_at BETWEEN ? AND ?`,
      [NAMESPACE, chain.from, chain.to],
    );
    const outboxWrong: string[] = [];
    for (const s of settles.filter((x) => x.status === 'done')) {
      for (const job of ['report', 'export']) {
        const fire = outbox.filter(
          (o) => o.job === job && (o.scheduled_at as Date).getTime() === s.scheduled_at.getTime(),
        );
        const winner = winnerOf(chainRows, job, s.scheduled_at)[0];
        const ok =
          fire.length === 1 &&
          fire[0]!.status === 'started' &&
          Number(fire[0]!.run_id) === Number(winner?.id);
        if (!ok) {
          outboxWrong.push(
            `${job} ${s.scheduled_at.toISOString()}: ${fire.map((f) => `${f.status} ${f.run_id}`).join(', ') || 'no row'}`,
          );
        }
      }
    }

    // Nothing twice, over the whole scenario: rows and stamps.
    const everything = await rowsIn(ctx, chain.from, new Date(control.to.getTime() + 60_000));
    const winnersPerFire = new Map<string, number>();
    const runsPerFire = new Map<string, number>();
    for (const r of everything) {
      if ((r.winner ?? 0) < 1) continue;
      const fire = `${r.job} ${r.scheduled_at.toISOString()}`;
      const key = `${fire} gen ${r.rerun}`;
      winnersPerFire.set(key, (winnersPerFire.get(key) ?? 0) + 1);
      const n = stamped.get(Number(r.id))?.n ?? 0;
      if (n > 0) runsPerFire.set(fire, (runsPerFire.get(fire) ?? 0) + 1);
    }
    const twiceRows = [...winnersPerFire].filter(([, n]) => n > 1).map(([k, n]) => `${k}: ${n}`);
    const twiceRuns = [...runsPerFire].filter(([, n]) => n > 1).map(([k, n]) => `${k}: ${n}`);
    const twiceProcesses = [...stamped]
      .filter(([, s]) => s.n > 1)
      .map(([id, s]) => `${id}: ${s.n}`);

    // Statements.
    const chains = settles.length;
    const chainStatements = chain.count.statements - chain.baseRate * chain.count.seconds;
    const perChain = chainStatements / chains;
    const controlInstants = new Set(
      controlRows.filter((r) => r.winner === 1).map((r) => r.scheduled_at.getTime()),
    ).size;
    const controlStatements = control.count.statements - control.baseRate * control.count.seconds;
    const perControl = controlStatements / controlInstants;
    const com: Record<string, number> = {};
    for (const [k, v] of Object.entries(chain.count.com)) {
      if (k !== 'Com_show_status') com[k.replace(/^Com_/, '')] = round(v / chains, 2);
    }

    const before = trials.filter((t) => t.landed === 'before');
    const reportD = percentiles(reportLag);
    const exportD = percentiles(exportLag);
    const startD = percentiles(reportStart);
    const endD = percentiles(chainEnd);
    const claimD = percentiles(settleClaim);
    const failoverD = percentiles(before.map((t) => t.lagMs));
    const errors = all.flatMap((r) => r.errors().map((l) => `${r.host}: ${l.msg}`));

    const checks: Check[] = [
      {
        name: 'every successful settle has exactly one report and one export, done',
        ok: incomplete.length === 0 && doneSettles > 0,
        detail: incomplete.length
          ? `${incomplete.length} of ${doneSettles}: ${list(incomplete)}`
          : `${doneSettles} chains of ${settles.length} instants of settle`,
      },
      {
        name: "the chain's outbox: each child's fire started, with its winner's run",
        ok: outboxWrong.length === 0,
        detail: outboxWrong.length
          ? `${outboxWrong.length} wrong: ${list(outboxWrong)}`
          : `${doneSettles * 2} fires (report and export)`,
      },
      {
        name: 'nothing ran twice (rows and the jobs’ stamps)',
        ok: twiceRows.length + twiceRuns.length + twiceProcesses.length === 0,
        detail:
          twiceRows.length + twiceRuns.length + twiceProcesses.length === 0
            ? `${winnersPerFire.size} fires, one winner each; ${stamped.size} runs, one process each`
            : `two winners: ${list(twiceRows)}; two runs: ${list(twiceRuns)}; ` +
              `two processes of one run: ${list(twiceProcesses)}`,
      },
      {
        name: 'failover: each kill’s instant ran report exactly once',
        ok: trials.length > 0 && trials.every((t) => t.winners === 1),
        detail: trials.length
          ? trials.map((t) => `${t.instant.toISOString()}: ${t.winners}`).join('; ')
          : 'no trial',
      },
      {
        name: 'failover: a kill came before the writer claimed report (the lag is measured)',
        ok: before.length > 0,
        detail: `${before.length} of ${trials.length} kills; the others came after its claim (report lost with its runner)`,
      },
      {
        name: 'no runner logged an error',
        ok: errors.length === 0,
        detail: errors.length ? list(errors) : 'none',
      },
    ];

    const table: TableRow[] = [
      distRow('settle: claim lag (started_at − instant)', claimD),
      distRow('report: started_at − settle.finished_at', reportD),
      distRow("report: its process's first instruction − settle.finished_at", startD),
      distRow('export: started_at − report.finished_at', exportD),
      distRow("the chain's end: export.finished_at − instant", endD),
      distRow(
        "failover (kill -9 of settle's writer): report.started_at − settle.finished_at",
        failoverD,
      ),
      {
        what: 'statements per chain (3 runners; control: 3 independent fires)',
        n: chains,
        p50: round(perChain, 1),
        p95: `control ${round(perControl, 1)}`,
        p99: '',
        max: '',
      },
    ];
    const figures = {
      runners: RUNNERS,
      seconds,
      chains,
      chains_done: doneSettles,
      ...distFigures('settle_claim_lag_ms', claimD),
      ...distFigures('report_lag_ms', reportD),
      ...distFigures('report_process_lag_ms', startD),
      ...distFigures('export_lag_ms', exportD),
      ...distFigures('chain_end_ms', endD),
      report_on_parent_runner_pct: round((100 * onWriter) / Math.max(1, reportLag.length), 1),
      statements_per_chain: round(perChain, 2),
      statements_per_chain_per_runner: round(perChain / RUNNERS, 2),
      statements_per_control_instant: round(perControl, 2),
      statements_chain_over_control: round(perChain - perControl, 2),
      background_statements_per_s: round(chain.baseRate, 2),
      control_background_statements_per_s: round(control.baseRate, 2),
      failover_kills: trials.length,
      failover_kills_before_claim: before.length,
      ...distFigures('failover_report_lag_ms', failoverD),
      clock_offset_ms: round(offset.offsetMs, 3),
      stamp: stamp.kind,
    };
    const notes = [
      `Window ${chain.from.toISOString()} … ${chain.to.toISOString()}: ${chains} instants of ` +
        `settle, ${doneSettles} done. Report ran on settle's runner (the verdict's writer judges ` +
        `its children at once) in ${onWriter} of ${reportLag.length} chains.`,
      `Statements (chain): Questions delta over ${round(chain.count.seconds, 1)} s = ` +
        `${chain.count.statements} (the harness's own ${chain.count.harness} subtracted), minus the ` +
        `background ${round(chain.baseRate, 2)}/s (measured ${BASELINE_MS / 1000} s with nothing ` +
        `firing), / ${chains} chains = ${round(perChain, 2)} (${round(perChain / RUNNERS, 2)} per ` +
        `runner). Per chain by command: ${JSON.stringify(com)}.`,
      ...chain.count.breakdown
        .slice(0, 15)
        .map((b) => `${round(b.count / chains, 2)} per chain: ${b.statement}`),
      `Control: settle, report and export as three independent every-second jobs, ` +
        `${controlInstants} instants: ${round(perControl, 2)} statements per instant (background ` +
        `${round(control.baseRate, 2)}/s). The chain's own cost: ${round(perChain - perControl, 2)} ` +
        `statements per chain. The windows include the two reloads that bound them (a registry ` +
        `write per runner each).`,
      ...control.count.breakdown
        .slice(0, 10)
        .map((b) => `control: ${round(b.count / controlInstants, 2)} per instant: ${b.statement}`),
      `Failover (default timings: leadMs 2 s, pollMs 1 s): ${trials
        .map(
          (t) =>
            `${t.instant.toISOString()} kill ${round(t.killedAfterMs, 1)} ms after the verdict → ` +
            `${t.landed === 'before' ? `report ${t.lagMs} ms after settle ended, on a survivor` : 'after the writer’s claim: report lost with it'}`,
        )
        .join('; ')}. Window until ${failoverTo.toISOString()}.`,
      `The stamp (${stamp.kind}) moved onto database time by ${round(offset.offsetMs, 3)} ms ` +
        `(± ${round(offset.rttMs / 2, 3)} ms).`,
    ];
    return { figures, table, notes, checks };
  },
} satisfies Scenario;
