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
 * the fire was settled (the last of its 3 rows written), and each runner's CPU during the storm.
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { Check, ProcUsage, Scenario, TableRow } from '../lib/index.js';
import { distFigures, distRow, percentiles, round, summarizeWarnings } from '../lib/index.js';

const RUNNERS = 3;
const JOBS = 500;
const PERIOD_S = 2;

interface FireRow extends RowDataPacket {
  job: string;
  scheduled_at: Date;
  winner: number | null;
  status: string;
  started_at: Date;
  host: string;
}

export default {
  name: 'many-jobs',
  title: `Many jobs at once: ${RUNNERS} runners, ${JOBS} jobs firing together every ${PERIOD_S} s`,
  async run(ctx) {
    const durationS = ctx.quick ? 6 : 30;
    const instants = durationS / PERIOD_S;
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
    ctx.log(
      `starting ${RUNNERS} runners with ${JOBS} jobs; first fire ${new Date(firstMs).toISOString()}`,
    );
    const runners = await ctx.startRunners(RUNNERS, {
      config,
      args: ['--grace', '5'],
      // Event-loop delay and time blocked in spawn(): why a storm of fires is slow.
      probe: true,
    });
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
      `SELECT job, scheduled_at, winner, status, started_at, host FROM baton_runs WHERE ${range}`,
      params,
    );
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));

    const fires = new Map<string, FireRow[]>();
    for (const r of rows) {
      const k = `${r.job}@${r.scheduled_at.getTime()}`;
      fires.set(k, [...(fires.get(k) ?? []), r]);
    }
    const lag: number[] = [];
    const settle: number[] = [];
    const doubleRun: string[] = [];
    const notRun: string[] = [];
    const missingRows: string[] = [];
    const notDone: string[] = [];
    const byHost: Record<string, number> = {};
    for (const at of fireMs) {
      for (const job of Object.keys(jobs)) {
        const k = `${job}@${at}`;
        const fr = fires.get(k) ?? [];
        const winners = fr.filter((r) => r.winner === 1);
        if (winners.length > 1) doubleRun.push(`${k}: ${winners.length} winners`);
        if (winners.length === 0) notRun.push(k);
        if (fr.length !== RUNNERS) missingRows.push(`${k}: ${fr.length} rows`);
        for (const w of winners) {
          lag.push(w.started_at.getTime() - at);
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
          ? `${notRun.length} of ${total} fires were not run: ${list(notRun)}`
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
    checks.push(ctx.target('p99 lag (started_at − scheduled_at)', lagD.p99, 250, 'ms'));
    const errors = runners.flatMap((r) => r.errors().map((l) => `${r.host}: ${l.msg}`));
    if (errors.length) {
      checks.push({ name: 'no runner logged an error', ok: false, detail: list(errors) });
    }

    // The first 8 s after the first fire: where the storm's time went, per runner.
    const storm = runners.map((r) => r.probe(firstMs - 250, firstMs + 8_000));
    const stormText = storm
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
      {
        what: 'statements per fire per runner',
        n: total,
        p50: round(perFirePerRunner, 2),
        p95: '',
        p99: '',
        max: '',
      },
    ];
    const figures = {
      jobs: JOBS,
      runners: RUNNERS,
      period_s: PERIOD_S,
      duration_s: durationS,
      fires: total,
      ...distFigures('lag_ms', lagD),
      ...distFigures('settle_ms', settleD),
      statements_per_fire_per_runner: round(perFirePerRunner, 2),
      statements_total: count.statements,
      background_statements_per_s: round(baseRate, 2),
      window_s: round(count.seconds, 1),
      runner_cpu_pct: cpu.join(' / '),
      runner_rss_peak_mib: usage.map((u) => round(u.rssPeakMiB, 0)).join(' / '),
      fires_with_winner: lag.length,
      fires_not_run: notRun.length,
      fires_run_twice: doubleRun.length,
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
    return { figures, table, notes, checks };
  },
} satisfies Scenario;
