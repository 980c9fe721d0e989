/**
 * Scenario 2 of issue 7, many jobs at once: 3 runners, 500 jobs that all fire on the same
 * instants — every 2 s for 30 s (quick: 6 s), a no-op command (`true`).
 *
 * The fires are bounded: the schedule lists the seconds of the window (`S,S+2,…` of every minute,
 * minute `*`), chosen so that the runners start before the first and nothing fires again for
 * half a minute after the last. So the statement count covers exactly the measured fires:
 * `Questions` from 1 s before the first fire until every row of the last fire is final, minus the
 * runners' background rate (heartbeats, registry, reaper) measured just before the first fire,
 * divided by fires and by runners.
 *
 * Checked: exactly one winner per fire, every runner left a row for every fire, every winner ended
 * `done`. Target: p99 of the winner's `started_at − scheduled_at` < 250 ms. Also reported: when
 * the fire was settled (the last of its 3 rows written), each runner's CPU during the storm, and
 * for the fires without a winner the reasons their rows give, grouped by shape.
 *
 * `manyJobsScenario(options)` makes the storm with another name, period, length or a disk-pressure
 * writer beside it (bench/scenarios/disk-storm.ts, issue 15); the default export is scenario 2.
 */
import type { RowDataPacket } from 'mysql2/promise';
import {
  measureCommits,
  startDiskPressure,
  type DiskPressure,
  type DiskPressureOptions,
} from '../lib/disk-pressure.js';
import type {
  BenchContext,
  Check,
  Distribution,
  Figure,
  ProcUsage,
  Scenario,
  ScenarioResult,
  TableRow,
} from '../lib/index.js';
import { distFigures, distRow, percentiles, round, summarizeWarnings } from '../lib/index.js';

const RUNNERS = 3;
const JOBS = 500;
const HOST_PREFIX = 'bench';

export interface ManyJobsOptions {
  /** The scenario's name (= its file name in bench/scenarios/). */
  name: string;
  title: string;
  /** Every job fires every `periodS` seconds, all together. */
  periodS: number;
  /** How many instants fire, full size and under `--quick`. */
  instants: { full: number; quick: number };
  /**
   * A writer that writes and fsyncs in a loop on the server's filesystem, from just after the
   * runners are up until the storm's rows are read (bench/lib/disk-pressure.ts). The cost of a
   * commit is measured before it starts and while it runs. `BENCH_DISK_PRESSURE=off` in the
   * environment keeps the writer from starting (everything else the same): the storm without it.
   */
  diskPressure?: DiskPressureOptions;
}

interface FireRow extends RowDataPacket {
  job: string;
  scheduled_at: Date;
  winner: number | null;
  status: string;
  started_at: Date;
  finished_at: Date | null;
  host: string;
  reason: string | null;
  reason_kind: string | null;
}

/**
 * A row that is no winner, as its status, kind and sentence with the instants and host names
 * taken out: "skipped/overlap: an earlier run is still running on <host> (this runner; fire …)".
 */
function reasonShape(r: FireRow): string {
  const text = (r.reason ?? '(no reason)')
    .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, '…')
    .replace(new RegExp(`\\b${HOST_PREFIX}-\\d+\\b`, 'g'), '<host>');
  return `${r.status}/${r.reason_kind ?? '-'}: ${text}`;
}

/**
 * The winners of the earlier fires that the overlap rows of a fire name ("… (fire <instant>, …)"),
 * when those fires are among the rows read; each once.
 */
function earlierRuns(rows: FireRow[], job: string, fires: Map<string, FireRow[]>): FireRow[] {
  const found = new Map<string, FireRow>();
  for (const r of rows) {
    if (r.reason_kind !== 'overlap' || !r.reason) continue;
    const m = /\bfire (\d{4}-\d\d-\d\dT[\d:.]+Z)/.exec(r.reason);
    if (!m) continue;
    const key = `${job}@${new Date(m[1]!).getTime()}`;
    const winner = fires.get(key)?.find((w) => w.winner === 1);
    if (winner) found.set(key, winner);
  }
  return [...found.values()];
}

const commitFigures = (prefix: string, d: Distribution): Record<string, Figure> => ({
  [`${prefix}_p50_ms`]: round(d.p50, 2),
  [`${prefix}_p99_ms`]: round(d.p99, 2),
});

/** The writer of `--pressure io` (disk-storm's: 1 MiB writes, an fsync every 64 MiB). */
export const IO_PRESSURE: DiskPressureOptions = { blockMiB: 1, syncEveryMiB: 64, fileMiB: 256 };

export function manyJobsScenario(options: ManyJobsOptions): Scenario {
  return {
    name: options.name,
    title: options.title,
    // `--pressure io`: the same storm with the disk writer beside it (a storm that has one
    // already, disk-storm, has no variant).
    pressure: options.diskPressure == null,
    async run(ctx) {
      const pressure: { writer: DiskPressure | null } = { writer: null };
      const o =
        ctx.pressure === 'io' && options.diskPressure == null
          ? { ...options, diskPressure: IO_PRESSURE }
          : options;
      try {
        return await storm(ctx, o, pressure);
      } finally {
        // Whatever happened (a throw, a timeout): the writer stops and its file goes.
        await pressure.writer?.stop();
      }
    },
  };
}

export default manyJobsScenario({
  name: 'many-jobs',
  title: `Many jobs at once: ${RUNNERS} runners, ${JOBS} jobs firing together every 2 s`,
  periodS: 2,
  instants: { full: 15, quick: 3 },
});

async function storm(
  ctx: BenchContext,
  options: ManyJobsOptions,
  pressure: { writer: DiskPressure | null },
): Promise<ScenarioResult> {
  const PERIOD_S = options.periodS;
  const instants = ctx.quick ? options.instants.quick : options.instants.full;
  const durationS = instants * PERIOD_S;
  // The first fire: time for 3 runners to start (500 jobs each) and settle, then a baseline.
  const now = await ctx.db.now();
  const firstMs = Math.ceil((now.getTime() + 25_000) / (PERIOD_S * 1000)) * PERIOD_S * 1000;
  const fireMs = Array.from({ length: instants }, (_, i) => firstMs + i * PERIOD_S * 1000);
  const seconds = [...new Set(fireMs.map((ms) => new Date(ms).getUTCSeconds()))].sort(
    (a, b) => a - b,
  );
  const schedule = `${seconds.join(',')} * * * * *`;
  const jobs: Record<string, object> = {};
  for (let i = 0; i < JOBS; i++) {
    jobs[`j${String(i).padStart(3, '0')}`] = { schedule, command: ['true'] };
  }
  const config = ctx.writeSchedule({ jobs });
  const withPressure = options.diskPressure != null;
  const pressureOff = withPressure && process.env.BENCH_DISK_PRESSURE === 'off';
  // The cost of a commit before the writer starts (and again while it runs, after the storm).
  const commitQuiet = withPressure ? await measureCommits(ctx) : null;
  ctx.log(
    `starting ${RUNNERS} runners with ${JOBS} jobs; first fire ${new Date(firstMs).toISOString()}`,
  );
  const runners = await ctx.startRunners(RUNNERS, {
    config,
    args: ['--grace', '5'],
    // Event-loop delay and time blocked in spawn(): why a storm of fires is slow.
    probe: true,
  });
  if (withPressure && !pressureOff) {
    pressure.writer = await startDiskPressure(ctx, options.diskPressure);
  }
  const readyAt = await ctx.db.now();
  const checks: Check[] = [];
  const startMargin = (firstMs - readyAt.getTime()) / 1000;
  if (startMargin < 4) {
    checks.push({
      name: 'runners were up well before the first fire',
      ok: false,
      detail: `ready only ${round(startMargin, 1)} s before it: start-up work overlaps the fires`,
    });
  }
  // Start-up work (recovery looks up each job's first fire) settles within MISSED_SETTLE (5 s).
  const baselineFrom = Math.max(readyAt.getTime() + 6_000, firstMs - 4_000);
  await ctx.sleep(Math.max(0, baselineFrom - (await ctx.db.now()).getTime()));
  const baseline = await ctx.statements();
  await ctx.sleep(Math.max(0, firstMs - 1_000 - (await ctx.db.now()).getTime()));
  const base = await baseline.stop();
  const baseRate = base.statements / base.seconds;
  const counter = await ctx.statements();
  const samplers = runners.map((r) => ctx.sampleProcess(r.pid, 250));
  const windowFrom = Date.now();
  const lastMs = fireMs.at(-1)!;
  const total = JOBS * instants;
  ctx.log(`${total} fires; waiting for ${total * RUNNERS} final rows`);
  const params = [new Date(firstMs), new Date(lastMs)];
  const range = 'scheduled_at BETWEEN ? AND ?';
  let complete = true;
  try {
    // Every row final: the winners done, and every runner's row written. Before the same
    // seconds come round again (minute `*`), that is within 60 − duration seconds.
    await ctx.waitFor(
      'every row of every fire',
      async () => {
        const [r] = await ctx.db.query<{ n: number; running: number }>(
          `SELECT COUNT(*) AS n, COALESCE(SUM(status = 'running'), 0) AS running
               FROM baton_runs WHERE ${range}`,
          params,
        );
        return Number(r?.n) >= total * RUNNERS && Number(r?.running) === 0;
      },
      { timeoutMs: lastMs - Date.now() + (60 - durationS - 4) * 1000, intervalMs: 250 },
    );
  } catch (err) {
    complete = false;
    ctx.log(String(err));
  }
  const usage: ProcUsage[] = samplers.map((s) => s.stop());
  const windowTo = Date.now();
  const probes = runners.map((r) => r.probe(windowFrom, windowTo));
  const count = await counter.stop();
  const rows = await ctx.db.query<FireRow>(
    `SELECT job, scheduled_at, winner, status, started_at, finished_at, host, reason, reason_kind
         FROM baton_runs WHERE ${range}`,
    params,
  );
  const commitLoaded = withPressure ? await measureCommits(ctx) : null;
  const pressureReport = (await pressure.writer?.stop()) ?? null;
  await Promise.all(runners.map((r) => r.stop('SIGTERM')));

  const fires = new Map<string, FireRow[]>();
  for (const r of rows) {
    const k = `${r.job}@${r.scheduled_at.getTime()}`;
    fires.set(k, [...(fires.get(k) ?? []), r]);
  }
  const lag: number[] = [];
  // Claim to the end of the job's process (`true`): a run longer than the period keeps the
  // next fire out by the overlap policy, whatever its bookkeeping.
  const runMs: number[] = [];
  const settle: number[] = [];
  const doubleRun: string[] = [];
  const notRun: string[] = [];
  const missingRows: string[] = [];
  const notDone: string[] = [];
  const byHost: Record<string, number> = {};
  // The fires without a winner: their rows by reason shape, and the fires every row of which
  // says an earlier run kept it out (issue 15: a run whose verdict was still being written).
  const notRunReasons: Record<string, number> = {};
  let notRunAllOverlap = 0;
  // And what the earlier runs named by their overlap rows were doing at the fire's instant:
  // over (the process had ended: only the verdict and the lock's release were left — the
  // bookkeeping that must not cost a fire) or still going (it had started late, or was slow).
  const notRunCause = { earlierOver: 0, earlierGoing: 0, other: 0 };
  const goingStartLag: number[] = [];
  const goingEndedAfter: number[] = [];
  const overEndedBefore: number[] = [];
  for (const at of fireMs) {
    for (const job of Object.keys(jobs)) {
      const k = `${job}@${at}`;
      const fr = fires.get(k) ?? [];
      const winners = fr.filter((r) => r.winner === 1);
      if (winners.length > 1) doubleRun.push(`${k}: ${winners.length} winners`);
      if (winners.length === 0) {
        notRun.push(k);
        for (const r of fr) {
          const shape = reasonShape(r);
          notRunReasons[shape] = (notRunReasons[shape] ?? 0) + 1;
        }
        if (fr.length > 0 && fr.every((r) => r.reason_kind === 'overlap')) notRunAllOverlap++;
        const earlier = earlierRuns(fr, job, fires);
        if (earlier.length === 0) notRunCause.other++;
        else if (earlier.every((e) => e.finished_at != null && e.finished_at.getTime() <= at)) {
          notRunCause.earlierOver++;
          for (const e of earlier) overEndedBefore.push(at - e.finished_at!.getTime());
        } else {
          notRunCause.earlierGoing++;
          for (const e of earlier) {
            goingStartLag.push(e.started_at.getTime() - e.scheduled_at.getTime());
            if (e.finished_at) goingEndedAfter.push(e.finished_at.getTime() - at);
          }
        }
      }
      if (fr.length !== RUNNERS) missingRows.push(`${k}: ${fr.length} rows`);
      for (const w of winners) {
        lag.push(w.started_at.getTime() - at);
        if (w.finished_at) runMs.push(w.finished_at.getTime() - w.started_at.getTime());
        byHost[w.host] = (byHost[w.host] ?? 0) + 1;
        if (w.status !== 'done') notDone.push(`${k}: ${w.status}`);
      }
      if (fr.length) settle.push(Math.max(...fr.map((r) => r.started_at.getTime())) - at);
    }
  }
  const list = (xs: string[]) =>
    xs.slice(0, 5).join('; ') + (xs.length > 5 ? ` … (${xs.length})` : '');
  checks.push(
    {
      name: 'every fire was completed before the same seconds came round again',
      ok: complete,
      detail: complete ? 'yes' : 'no: rows were still missing or running (see below)',
    },
    {
      name: 'no fire had two winners (the guarantee)',
      ok: doubleRun.length === 0,
      detail: doubleRun.length ? list(doubleRun) : `none of ${total} fires`,
    },
    {
      name: 'every fire had a winner',
      ok: notRun.length === 0,
      detail: notRun.length
        ? `${notRun.length} of ${total} fires were not run (${notRunAllOverlap} of them skipped by ` +
          `every runner for an earlier run): ${list(notRun)}`
        : `${total} fires, 1 winner each`,
    },
    {
      name: 'every runner recorded every fire',
      ok: missingRows.length === 0,
      detail: missingRows.length ? list(missingRows) : `${RUNNERS} rows per fire`,
    },
    {
      name: 'every winner ended done',
      ok: notDone.length === 0,
      detail: notDone.length ? list(notDone) : 'all done',
    },
  );
  const lagD = percentiles(lag);
  const settleD = percentiles(settle);
  const runD = percentiles(runMs);
  checks.push(ctx.target('p99 lag (started_at − scheduled_at)', lagD.p99, 250, 'ms'));
  const errors = runners.flatMap((r) => r.errors().map((l) => `${r.host}: ${l.msg}`));
  if (errors.length) {
    checks.push({ name: 'no runner logged an error', ok: false, detail: list(errors) });
  }

  // The first 8 s after the first fire: where the storm's time went, per runner.
  const stormProbes = runners.map((r) => r.probe(firstMs - 250, firstMs + 8_000));
  const stormText = stormProbes
    .map((p, i) =>
      p
        ? `${runners[i]!.host}: ${p.spawns} spawns blocked the event loop ${round(p.spawnMs / 1000, 2)} s ` +
          `of ${round(p.coveredMs / 1000, 1)} s, longest loop delay ${round(p.maxDelayMs, 0)} ms`
        : `${runners[i]!.host}: no probe`,
    )
    .join('; ');
  const fireStatements = count.statements - baseRate * count.seconds;
  const perFirePerRunner = fireStatements / total / RUNNERS;
  const com: Record<string, number> = {};
  for (const [k, v] of Object.entries(count.com)) {
    if (k === 'Com_show_status') continue;
    com[k.replace(/^Com_/, '')] = round(v / total / RUNNERS, 2);
  }
  const cpu = usage.map((u) => round(u.cpuPercent, 1));
  const table: TableRow[] = [
    distRow('lag: winner started_at − scheduled_at', lagD),
    distRow('settled: last row of the fire − scheduled_at', settleD),
    distRow('run: winner finished_at − started_at', runD),
    {
      what: 'statements per fire per runner',
      n: total,
      p50: round(perFirePerRunner, 2),
      p95: '',
      p99: '',
      max: '',
    },
    ...(commitQuiet && commitLoaded
      ? [
          distRow('commit (autocommit INSERT), before the writer', commitQuiet),
          distRow(
            pressureOff
              ? 'commit, after the storm (writer off)'
              : 'commit, after the storm, writer running',
            commitLoaded,
          ),
        ]
      : []),
    ...(pressureReport ? [distRow('disk pressure: fsync of one block', pressureReport.fsync)] : []),
  ];
  const reasonsByRows = Object.entries(notRunReasons).sort((a, b) => b[1] - a[1]);
  const pressureFigures: Record<string, Figure> = withPressure
    ? {
        disk_pressure: pressureOff ? 'off (BENCH_DISK_PRESSURE=off)' : 'on',
        ...(commitQuiet ? commitFigures('commit_before_writer', commitQuiet) : {}),
        ...(commitLoaded ? commitFigures('commit_writer_running', commitLoaded) : {}),
        ...(pressureReport
          ? {
              pressure_mib_per_s: pressureReport.mibPerS,
              pressure_cpu_pct: pressureReport.cpuPercent,
              pressure_fsync_p50_ms: round(pressureReport.fsync.p50, 1),
              pressure_fsync_p99_ms: round(pressureReport.fsync.p99, 1),
            }
          : {}),
      }
    : {};
  const figures = {
    jobs: JOBS,
    runners: RUNNERS,
    period_s: PERIOD_S,
    duration_s: durationS,
    fires: total,
    ...distFigures('lag_ms', lagD),
    ...distFigures('settle_ms', settleD),
    ...distFigures('run_ms', runD),
    statements_per_fire_per_runner: round(perFirePerRunner, 2),
    statements_total: count.statements,
    background_statements_per_s: round(baseRate, 2),
    window_s: round(count.seconds, 1),
    runner_cpu_pct: cpu.join(' / '),
    runner_rss_peak_mib: usage.map((u) => round(u.rssPeakMiB, 0)).join(' / '),
    fires_with_winner: lag.length,
    fires_not_run: notRun.length,
    fires_run_twice: doubleRun.length,
    fires_not_run_all_overlap: notRunAllOverlap,
    fires_not_run_other: notRun.length - notRunAllOverlap,
    fires_not_run_earlier_run_over: notRunCause.earlierOver,
    fires_not_run_earlier_run_going: notRunCause.earlierGoing,
    fires_not_run_earlier_run_unknown: notRunCause.other,
    not_run_rows_by_reason: JSON.stringify(Object.fromEntries(reasonsByRows)),
    ...pressureFigures,
    runner_spawn_blocked_s: probes.map((p) => (p ? round(p.spawnMs / 1000, 2) : '-')).join(' / '),
    runner_max_loop_delay_ms: probes.map((p) => (p ? round(p.maxDelayMs, 0) : '-')).join(' / '),
    winners_by_host: JSON.stringify(byHost),
  };
  const notes = [
    `Schedule "${schedule}" (the window's seconds, every minute); fires ${new Date(firstMs).toISOString()} … ${new Date(lastMs).toISOString()}.`,
    `Statements: Questions delta over ${round(count.seconds, 1)} s = ${count.statements} ` +
      `(harness's own ${count.harness} and the counter's subtracted), minus the background ` +
      `${round(baseRate, 2)}/s (3 runners, measured ${round(base.seconds, 1)} s before the first fire), ` +
      `/ ${total} fires / ${RUNNERS} runners.`,
    `Per fire per runner by command: ${JSON.stringify(com)}.`,
    ...count.breakdown
      .slice(0, 12)
      .map((b) => `${round(b.count / total / RUNNERS, 3)} per fire per runner: ${b.statement}`),
    `Runner CPU during the window (% of one core): ${cpu.join(', ')}; the machine has ` +
      `2 cores; every winner's job is spawned by the runner's spawner process.`,
    `Winners by host: ${JSON.stringify(byHost)}. The lag percentiles cover the ${lag.length} ` +
      `fires that had a winner.`,
    ...(notRun.length
      ? [
          `Fires without a winner: ${notRun.length}, of which ${notRunAllOverlap} were skipped by ` +
            `every runner for an earlier run (reason_kind overlap on all ${RUNNERS} rows). ` +
            `Their rows by reason: ` +
            reasonsByRows.map(([shape, n]) => `${n}× "${shape}"`).join('; ') +
            '.',
          `The earlier runs those rows name, at the instant of the fire they kept out: ` +
            `${notRunCause.earlierOver} fires were kept out only by runs whose process had ` +
            `already ended (finished_at before the instant, by p50 ${round(percentiles(overEndedBefore).p50, 0)} ms: ` +
            `their verdict or lock release was pending — bookkeeping); ` +
            `${notRunCause.earlierGoing} by a run still going at the instant (it ended p50 ` +
            `${round(percentiles(goingEndedAfter).p50, 0)} ms after it; it had started p50 ` +
            `${round(percentiles(goingStartLag).p50, 0)} ms after its own instant: a late start); ` +
            `${notRunCause.other} with no earlier run found (other reasons).`,
        ]
      : []),
    ...(withPressure
      ? [
          pressureOff
            ? 'Disk pressure: OFF (BENCH_DISK_PRESSURE=off) — the same storm without the writer.'
            : `Disk pressure from just after the runners were up until the rows were read ` +
              `(${pressureReport?.seconds ?? '?'} s): ${pressureReport?.blocks ?? '?'} blocks, ` +
              `${pressureReport?.mibPerS ?? '?'} MiB/s.`,
          `Commit (autocommit INSERT, ${commitQuiet?.n ?? 0} samples) before the writer: p50 / p99 ` +
            `${round(commitQuiet?.p50 ?? NaN, 2)} / ${round(commitQuiet?.p99 ?? NaN, 2)} ms; ` +
            `after the storm${pressureOff ? '' : ' with the writer running'}: ` +
            `${round(commitLoaded?.p50 ?? NaN, 2)} / ${round(commitLoaded?.p99 ?? NaN, 2)} ms ` +
            `(innodb_flush_log_at_trx_commit = ${ctx.server.settings.innodb_flush_log_at_trx_commit ?? '?'}).`,
          ...(pressureReport?.notes ?? []),
        ]
      : []),
    `Probe, first 8 s after the first fire — ${stormText}. spawn() is synchronous in Node ` +
      `(fork + waiting for the child's exec); command jobs are spawned by the runner's spawner ` +
      `process, so the runner's own spawns are rare.`,
    ...summarizeWarnings(runners).map(
      (w) => `Runner log, level ${w.level}, ${w.count}×: "${w.msg}" — e.g. ${w.example}`,
    ),
    ...(count.otherConnections > 0
      ? [
          `${count.otherConnections} other client connections were on the server: counts include their statements.`,
        ]
      : []),
  ];
  if (withPressure) {
    // Issue 15's guarantee, apart from the storm's own overload: a fire is never lost only to
    // the bookkeeping of runs that were over (their process ended before the fire's instant).
    checks.push({
      name: 'no fire was lost to the bookkeeping of a run that was over',
      ok: notRunCause.earlierOver === 0,
      detail:
        notRunCause.earlierOver === 0
          ? `none (${notRun.length} fires not run: ${notRunCause.earlierGoing} kept out by a run still going at their instant, ${notRunCause.other} other)`
          : `${notRunCause.earlierOver} fires were kept out only by runs whose process had ended before their instant`,
    });
  }
  if (pressureReport) {
    checks.push({
      name: "the disk pressure wrote on the server's filesystem",
      ok: pressureReport.sameFilesystem === true && pressureReport.blocks > 0,
      detail:
        `${pressureReport.blocks} blocks in ${pressureReport.dir}` +
        (pressureReport.sameFilesystem === true
          ? " (the data dir's filesystem)"
          : pressureReport.sameFilesystem === false
            ? ' (NOT the data dir filesystem)'
            : ' (the data dir is not on this machine)'),
    });
  }
  return { figures, table, notes, checks };
}
