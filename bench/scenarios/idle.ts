/**
 * Scenario 3 of issue 7, idle cost: one runner with 1,000 scheduled jobs and nothing due
 * (`0 0 1 1 *`, once a year), measured over 60 s (quick: 15 s): resident memory (VmRSS, peak and
 * at the end; VmHWM, the kernel's peak since start), CPU % of one core (utime + stime over wall
 * time, /proc/<pid>/stat) and database statements per second (`Questions` delta, the harness's
 * own statements subtracted, minus the server's rate with no runner at all, measured first over
 * the same duration).
 *
 * To say where the memory goes, the same runner with ONE job is measured too (the difference
 * divided by 999 is the cost of a job), and three bare Node processes: one that only imports
 * dist/schedule/cron.js, one that also parses the 1,000 schedules with it (`parseSchedule`, as the
 * runner does: jobs with one expression share one croner `Cron`), and one that parses 1,000
 * different expressions (one `Cron` each, what a varied real schedule costs).
 * Targets: < 80 MiB RSS, < 1 % CPU, < 2 statements/s.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { Check, Scenario, TableRow } from '../lib/index.js';
import { ROOT, readProc, round, sleep } from '../lib/index.js';

const JOBS = 1_000;
const SCHEDULE = '0 0 1 1 *';

function schedule(jobs: number): object {
  const out: Record<string, object> = {};
  for (let i = 0; i < jobs; i++) {
    out[`idle${String(i).padStart(4, '0')}`] = { schedule: SCHEDULE, command: ['true'] };
  }
  return { jobs: out };
}

/**
 * RSS (MiB) of a bare Node process that parses `jobs` schedules with baton's parseSchedule: all
 * the scenario's expression, or each a different one (minute i % 60 of hour i / 60, daily).
 */
async function bareCronRss(
  jobs: number,
  expressions: 'one' | 'distinct' = 'one',
): Promise<{ rssMiB: number; heapUsedMiB: number }> {
  const cron = path.join(ROOT, 'dist/schedule/cron.js');
  const expression =
    expressions === 'one'
      ? JSON.stringify(SCHEDULE)
      : '`${i % 60} ${Math.floor(i / 60) % 24} * * *`';
  const code = `
    const { parseSchedule } = await import(${JSON.stringify(cron)});
    const keep = [];
    for (let i = 0; i < ${jobs}; i++) keep.push(parseSchedule(${expression}, 'UTC'));
    globalThis.keep = keep;
    await new Promise((r) => setTimeout(r, 1500));
    globalThis.gc?.();
    await new Promise((r) => setTimeout(r, 500));
    const m = process.memoryUsage();
    console.log(JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed }));
  `;
  const child = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise((r) => child.once('exit', r));
  const m = JSON.parse(out) as { rss: number; heapUsed: number };
  return { rssMiB: m.rss / 2 ** 20, heapUsedMiB: m.heapUsed / 2 ** 20 };
}

export default {
  name: 'idle',
  title: `Idle cost: 1 runner, ${JOBS} jobs, nothing due`,
  async run(ctx) {
    const windowMs = ctx.quick ? 15_000 : 60_000;
    // Start-up work (migrations, recovery's look-up of each job's first fire, the missed-fire
    // settle of 5 s) is over before the window opens.
    const settleMs = 10_000;

    ctx.log(`baseline: the server with no runner, ${windowMs / 1000} s`);
    const baseCounter = await ctx.statements();
    await sleep(windowMs);
    const base = await baseCounter.stop();
    const baseRate = base.statements / base.seconds;

    ctx.log(`one runner with ${JOBS} jobs`);
    const config = ctx.writeSchedule(schedule(JOBS));
    const [runner] = await ctx.startRunners(1, { config, hostPrefix: 'idle' });
    await sleep(settleMs);
    const counter = await ctx.statements();
    const sampler = ctx.sampleProcess(runner!.pid, 250);
    await sleep(windowMs);
    const usage = sampler.stop();
    const count = await counter.stop();
    const rate = count.statements / count.seconds - baseRate;
    const threads = readProc(runner!.pid).threads;
    await runner!.stop('SIGTERM');

    ctx.log('profile: the same runner with one job');
    const oneConfig = ctx.writeSchedule(schedule(1));
    const [one] = await ctx.startRunners(1, { config: oneConfig, hostPrefix: 'idle-one' });
    await sleep(settleMs);
    const oneSampler = ctx.sampleProcess(one!.pid, 250);
    await sleep(ctx.quick ? 5_000 : 15_000);
    const oneUsage = oneSampler.stop();
    await one!.stop('SIGTERM');

    ctx.log('profile: bare node processes with and without the parsed schedules');
    const bare0 = await bareCronRss(0);
    const bare1000 = await bareCronRss(JOBS);
    const bareDistinct = await bareCronRss(JOBS, 'distinct');
    const perJobKiB = ((usage.rssEndMiB - oneUsage.rssEndMiB) * 1024) / (JOBS - 1);
    const cronPerJobKiB = ((bare1000.rssMiB - bare0.rssMiB) * 1024) / JOBS;
    const cronHeapPerJobKiB = ((bare1000.heapUsedMiB - bare0.heapUsedMiB) * 1024) / JOBS;
    const distinctPerJobKiB = ((bareDistinct.rssMiB - bare0.rssMiB) * 1024) / JOBS;
    const distinctHeapPerJobKiB = ((bareDistinct.heapUsedMiB - bare0.heapUsedMiB) * 1024) / JOBS;

    const checks: Check[] = [
      ctx.target('RSS (peak over the window)', usage.rssPeakMiB, 80, 'MiB', {
        context:
          `1 job: ${round(oneUsage.rssEndMiB, 1)} MiB; each further job ≈ ${round(perJobKiB, 1)} KiB; ` +
          `a bare node with ${JOBS} parsed schedules: ${round(bare1000.rssMiB, 1)} MiB vs ` +
          `${round(bare0.rssMiB, 1)} MiB without (≈ ${round(cronPerJobKiB, 1)} KiB RSS, ` +
          `${round(cronHeapPerJobKiB, 1)} KiB heap per schedule; with ${JOBS} different ` +
          `expressions ≈ ${round(distinctPerJobKiB, 1)} KiB RSS, ` +
          `${round(distinctHeapPerJobKiB, 1)} KiB heap)`,
      }),
      ctx.target('CPU (% of one core)', usage.cpuPercent, 1, '%', {
        context: `${round(usage.cpuSeconds, 3)} s of CPU in ${round(usage.seconds, 1)} s`,
      }),
      ctx.target('database statements per second', rate, 2, '/s', {
        context: `server baseline without a runner ${round(baseRate, 3)}/s subtracted`,
      }),
    ];
    if (runner!.errors().length) {
      checks.push({
        name: 'the runner logged no error',
        ok: false,
        detail: runner!
          .errors()
          .map((l) => l.msg)
          .join('; '),
      });
    }
    const com = Object.entries(count.com)
      .filter(([k]) => k !== 'Com_show_status')
      .map(([k, v]) => `${k.replace(/^Com_/, '')} ${round(v / count.seconds, 3)}/s`)
      .join(', ');
    const table: TableRow[] = [
      {
        what: `runner, ${JOBS} jobs`,
        'RSS peak': `${round(usage.rssPeakMiB, 1)} MiB`,
        'RSS end': `${round(usage.rssEndMiB, 1)} MiB`,
        VmHWM: `${round(usage.hwmMiB, 1)} MiB`,
        CPU: `${round(usage.cpuPercent, 3)} %`,
        'statements/s': round(rate, 3),
      },
      {
        what: 'runner, 1 job',
        'RSS peak': `${round(oneUsage.rssPeakMiB, 1)} MiB`,
        'RSS end': `${round(oneUsage.rssEndMiB, 1)} MiB`,
        VmHWM: `${round(oneUsage.hwmMiB, 1)} MiB`,
        CPU: `${round(oneUsage.cpuPercent, 3)} %`,
        'statements/s': '',
      },
      {
        what: `bare node + ${JOBS} parseSchedule, one expression`,
        'RSS peak': '',
        'RSS end': `${round(bare1000.rssMiB, 1)} MiB`,
        VmHWM: '',
        CPU: '',
        'statements/s': `heap ${round(bare1000.heapUsedMiB, 1)} MiB`,
      },
      {
        what: `bare node + ${JOBS} parseSchedule, ${JOBS} expressions`,
        'RSS peak': '',
        'RSS end': `${round(bareDistinct.rssMiB, 1)} MiB`,
        VmHWM: '',
        CPU: '',
        'statements/s': `heap ${round(bareDistinct.heapUsedMiB, 1)} MiB`,
      },
      {
        what: 'bare node, cron.js imported',
        'RSS peak': '',
        'RSS end': `${round(bare0.rssMiB, 1)} MiB`,
        VmHWM: '',
        CPU: '',
        'statements/s': `heap ${round(bare0.heapUsedMiB, 1)} MiB`,
      },
    ];
    const figures = {
      jobs: JOBS,
      window_s: round(usage.seconds, 1),
      rss_peak_mib: round(usage.rssPeakMiB, 1),
      rss_end_mib: round(usage.rssEndMiB, 1),
      rss_hwm_mib: round(usage.hwmMiB, 1),
      cpu_pct: round(usage.cpuPercent, 3),
      statements_per_s: round(rate, 3),
      server_baseline_statements_per_s: round(baseRate, 3),
      threads,
      one_job_rss_end_mib: round(oneUsage.rssEndMiB, 1),
      one_job_cpu_pct: round(oneUsage.cpuPercent, 3),
      rss_per_job_kib: round(perJobKiB, 1),
      bare_node_rss_mib: round(bare0.rssMiB, 1),
      bare_node_1000_cron_rss_mib: round(bare1000.rssMiB, 1),
      croner_rss_per_job_kib: round(cronPerJobKiB, 1),
      croner_heap_per_job_kib: round(cronHeapPerJobKiB, 1),
      bare_node_1000_distinct_cron_rss_mib: round(bareDistinct.rssMiB, 1),
      croner_distinct_rss_per_job_kib: round(distinctPerJobKiB, 1),
      croner_distinct_heap_per_job_kib: round(distinctHeapPerJobKiB, 1),
    };
    const notes = [
      `Window ${round(usage.seconds, 1)} s after a ${settleMs / 1000} s settle; ${usage.samples} /proc samples.`,
      `Statements: ${count.statements} in ${round(count.seconds, 1)} s (harness's own ${count.harness} ` +
        `and the counter's subtracted), by command: ${com || 'none'}.`,
      `What an idle runner sends: the lock-session heartbeat (SELECT @@global.read_only, NOW(3)) ` +
        `every --heartbeat (1 s), the registry refresh every --registry-interval (5 s), the reaper ` +
        `every --reaper-interval (10 s).`,
      ...(count.breakdown.length
        ? count.breakdown.map((b) => `${round(b.count / count.seconds, 3)}/s: ${b.statement}`)
        : []),
    ];
    return { figures, table, notes, checks };
  },
} satisfies Scenario;
