/**
 * Issue 18, job output under a flood: one runner, a quiet every-second job (`tick`, `true`), fire
 * lag measured first alone, then while another job (`flood`) prints as fast as it can — 200 MiB
 * a run (quick: 20 MiB), run after run — through the same runner and its spawner, whose whole
 * output is kept (`output: {max: 4MiB}`: the head written live, the tail at the end).
 *
 * Reported: tick's claim lag (started_at − scheduled_at, database time) p50/p99 in both phases
 * and their ratio; the runner's and its spawner's peak RSS; bytes the flood printed; bytes kept
 * in baton_run_output; bytes InnoDB wrote (`Innodb_data_written` + `Innodb_os_log_written`, the
 * whole server's: pages flushed in the phase, and redo) per MiB printed. Checks: each flood run keeps exactly its bound, and tick
 * has one winner per fire in both phases.
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { BenchContext, Check, Scenario } from '../lib/index.js';
import { percentiles, round } from '../lib/index.js';

const MiB = 1024 * 1024;

/** Bytes InnoDB has written: pages flushed and redo log (the redo is what a write costs now). */
async function innodbWritten(ctx: BenchContext): Promise<number> {
  const rows = await ctx.db.query<RowDataPacket>(
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_data_written', 'Innodb_os_log_written')",
  );
  return rows.reduce((sum, r) => sum + Number(r.Value ?? 0), 0);
}

/** Claim lags (ms) of `tick`'s fires in [from, to]. */
async function lags(ctx: BenchContext, namespace: string, from: Date, to: Date) {
  const rows = await ctx.db.query<RowDataPacket>(
    `SELECT scheduled_at, started_at FROM baton_runs
      WHERE namespace = ? AND job = 'tick' AND winner = 1 AND scheduled_at BETWEEN ? AND ?`,
    [namespace, from, to],
  );
  return rows.map((r) => (r.started_at as Date).getTime() - (r.scheduled_at as Date).getTime());
}

async function phase(
  ctx: BenchContext,
  namespace: string,
  fires: number,
  floodBytes: number | null,
) {
  const jobs: Record<string, object> = { tick: { schedule: '* * * * * *', command: ['true'] } };
  if (floodBytes != null) {
    jobs.flood = {
      schedule: '* * * * * *',
      command: ['sh', '-c', `yes flooding-the-output-of-a-batch | head -c ${floodBytes}`],
    };
  }
  const config = ctx.writeSchedule({ namespace, jobs });
  const [runner] = await ctx.startRunners(1, { config, hostPrefix: namespace });
  const sampler = ctx.sampleProcess(runner!.pid, 200);
  const readyAt = await ctx.db.now();
  const first = new Date(Math.ceil(readyAt.getTime() / 1000) * 1000 + 3000);
  const last = new Date(first.getTime() + (fires - 1) * 1000);
  const writtenBefore = await innodbWritten(ctx);
  await ctx.waitForRows(
    `SELECT COUNT(*) AS n FROM baton_runs WHERE namespace = ? AND job = 'tick' AND winner = 1
        AND scheduled_at BETWEEN ? AND ? AND status <> 'running'`,
    [namespace, first, last],
    fires,
    (fires + 60) * 1000,
  );
  const written = (await innodbWritten(ctx)) - writtenBefore;
  const usage = sampler.stop();
  await runner!.stop('SIGTERM');
  const lag = await lags(ctx, namespace, first, last);
  const flood = await ctx.db.query<RowDataPacket>(
    `SELECT r.id, COALESCE(SUM(LENGTH(o.data)), 0) AS kept FROM baton_runs r
       LEFT JOIN baton_run_output o ON o.run_id = r.id
      WHERE r.namespace = ? AND r.job = 'flood' AND r.winner = 1 AND r.status = 'done'
        AND r.scheduled_at BETWEEN ? AND ? GROUP BY r.id`,
    [namespace, first, last],
  );
  return { lag, usage, written, flood: flood.map((f) => Number(f.kept)) };
}

export default {
  name: 'output-flood',
  title: 'Job output: fire lag of a quiet job while another floods its output, 1 runner',
  async run(ctx) {
    const fires = ctx.quick ? 8 : 30;
    const floodBytes = (ctx.quick ? 20 : 200) * MiB;
    ctx.log('quiet phase');
    const quiet = await phase(ctx, 'quiet', fires, null);
    ctx.log('flood phase');
    const loud = await phase(ctx, 'flood', fires, floodBytes);
    const q = percentiles(quiet.lag);
    const f = percentiles(loud.lag);
    const printedMiB = (loud.flood.length * floodBytes) / MiB;
    const keptBytes = loud.flood.reduce((a, b) => a + b, 0);
    const checks: Check[] = [
      {
        name: 'tick had one winner per fire in both phases',
        ok: quiet.lag.length === fires && loud.lag.length === fires,
        detail: `quiet ${quiet.lag.length}/${fires}, flood ${loud.lag.length}/${fires}`,
      },
      {
        name: 'each flood run kept exactly output.max (4 MiB)',
        ok: loud.flood.length > 0 && loud.flood.every((k) => k === 4 * MiB),
        detail: `${loud.flood.length} flood runs kept ${loud.flood.map((k) => round(k / MiB, 2)).join(', ')} MiB`,
      },
    ];
    return {
      figures: {
        quiet_claim_lag_p50_ms: q.p50,
        quiet_claim_lag_p99_ms: q.p99,
        flood_claim_lag_p50_ms: f.p50,
        flood_claim_lag_p99_ms: f.p99,
        flood_to_quiet_p99_ratio: round(f.p99 / Math.max(q.p99, 1), 2),
        runner_rss_peak_mib_quiet: round(quiet.usage.rssPeakMiB, 1),
        runner_rss_peak_mib_flood: round(loud.usage.rssPeakMiB, 1),
        flood_printed_mib: round(printedMiB, 0),
        output_kept_mib: round(keptBytes / MiB, 1),
        innodb_written_mib_per_printed_mib: round(loud.written / MiB / Math.max(printedMiB, 1), 4),
        innodb_written_mib_quiet: round(quiet.written / MiB, 1),
        innodb_written_mib_flood: round(loud.written / MiB, 1),
      },
      table: [
        {
          phase: 'quiet',
          p50_ms: q.p50,
          p99_ms: q.p99,
          max_ms: q.max,
          rss_peak_mib: round(quiet.usage.rssPeakMiB, 1),
          innodb_written_mib: round(quiet.written / MiB, 1),
        },
        {
          phase: 'flood',
          p50_ms: f.p50,
          p99_ms: f.p99,
          max_ms: f.max,
          rss_peak_mib: round(loud.usage.rssPeakMiB, 1),
          innodb_written_mib: round(loud.written / MiB, 1),
        },
      ],
      notes: [
        `The flood printed ${round(printedMiB, 0)} MiB in ${loud.flood.length} runs; the history kept ${round(keptBytes / MiB, 1)} MiB of it (4 MiB a run: 2 MiB head, 2 MiB tail).`,
        "Claim lag is the runner's own: the spawner reads the flood in its own process, so the runner sees only the chunks it keeps.",
        "InnoDB bytes written (pages flushed in the phase plus redo) count the whole server, the history's own rows too: the quiet phase is the baseline. Page flushes are asynchronous: some of a phase's pages may be flushed after it.",
      ],
      checks,
    };
  },
} satisfies Scenario;
