/**
 * Schedules created at run time (issue 40, part 2; docs/library-mode.md): 3 library-mode
 * replicas of one application (bench/lib/b-dynamic-runner.mjs, one handler job `tenant` that
 * returns at once) and 10,000 schedules of it (quick: 1,000), all on `* * * * *` — every one due
 * at the same second of every minute. One replica upserts them all (16 at a time), the others
 * read them from the database.
 *
 * env `BENCH_DYN_KEYS`: another number of schedules (diagnosis); `BENCH_DYN_AS=jobs`: the same
 * fires as jobs defined in code instead (`dynamic-schedules+jobs`): what the fire path costs at
 * this scale without schedules created at run time, for comparison. `BENCH_DYN_SKIPS=tally`: the job keeps its
 * skips as tallies (`dynamic-schedules+tally`; one row per fire, the winner's): what the losers'
 * rows cost.
 *
 * Timeline: the server's own statements with no replica (a baseline), 3 replicas started with
 * no schedule, the bulk upsert, every replica loaded; then the storms — the minutes whose
 * 10,000 fires are measured (2; quick 1) — with an idle window between the first storm's last
 * verdict and the next minute; then the probes: 8 single upserts on the first replica, each
 * timed until every replica has applied it (each replica prints its `schedules:changed` events);
 * then the replicas stop and write their handlers' journals.
 *
 * Figures and checks:
 * - every fire once: per storm, the handlers' journals hold each key exactly once and nothing
 *   twice anywhere; baton's rows: one `done` winner per key, and a row (winner or skip) of every
 *   replica for every fire;
 * - claim lag: the winners' `started_at − scheduled_at` (database time), p50/p95/p99/max over the
 *   storms; goal p99 ≤ 1 s; and how long after the instant the last verdict was written;
 * - RSS of each replica: with no schedule, with them loaded, its peak (VmRSS sampled every
 *   500 ms);
 * - statements per second per idle replica between the storms: (Questions − the harness's own −
 *   the baseline rate) / seconds / 3; goal ≤ 2/s;
 * - an upsert's reach: from the upsert's return on the first replica to each replica's event;
 *   the others (they read it with their run requests, once a second), and the first's own.
 */
import path from 'node:path';
import { readFileSync } from 'node:fs';
import type { RowDataPacket } from 'mysql2/promise';
import type { BenchRunner, Check, LogLine, Scenario, TableRow } from '../lib/index.js';
import { distFigures, makeTempDir, percentiles, ROOT, round, sleep } from '../lib/index.js';
import { loadAverages } from '../lib/machine.js';

const RUNNERS = 3;
/** env BENCH_DYN_SKIPS=tally: the tenant job keeps its skips as tallies (one row per fire, the winner's). */
const TALLY = process.env.BENCH_DYN_SKIPS === 'tally';
const ROWS_PER_FIRE = TALLY ? 1 : RUNNERS;
const NAMESPACE = 'dyn';
const EVERY_MINUTE = '* * * * *';
const PROBES = 8;
const DYN_RUNNER = path.join(ROOT, 'bench/lib/b-dynamic-runner.mjs');
/** What docs/library-mode.md states: a change reaches every replica within this. */
const STATED_REACH_MS = 2_000;

const said = (r: BenchRunner, msg: string): LogLine[] =>
  r.lines.filter((l) => l.msg === `bench: ${msg}`);

export default {
  name: 'dynamic-schedules',
  title: '10,000 schedules created at run time, 3 library replicas, all due the same minute',
  variant: () =>
    [process.env.BENCH_DYN_AS === 'jobs' ? 'jobs' : null, TALLY ? 'tally' : null]
      .filter(Boolean)
      .join('+') || null,
  async run(ctx) {
    const keys = Number(process.env.BENCH_DYN_KEYS ?? (ctx.quick ? 1_000 : 10_000));
    const storms = ctx.quick ? 1 : 2;
    const idleWindowMs = ctx.quick ? 10_000 : 30_000;
    const journals = makeTempDir('baton-bench-dyn-');

    ctx.log('baseline: the server with no replica');
    const baseCounter = await ctx.statements();
    await sleep(ctx.quick ? 5_000 : 10_000);
    const base = await baseCounter.stop();
    const baseRate = base.statements / base.seconds;

    const runners = await ctx.startRunners(RUNNERS, {
      config: '',
      hostPrefix: 'replica',
      logLevel: 'warn',
      keepLines: true,
      library: { jobs: 0, namespace: NAMESPACE, skips: 'rows', script: DYN_RUNNER },
      env: {
        BENCH_DYN_KEYS: String(keys),
        BENCH_DYN_SCHEDULE: EVERY_MINUTE,
        BENCH_DYN_CONCURRENCY: '16',
        BENCH_JOURNAL_DIR: journals,
        ...(process.env.BENCH_DYN_AS ? { BENCH_DYN_AS: process.env.BENCH_DYN_AS } : {}),
        ...(process.env.BENCH_DYN_SKIPS ? { BENCH_DYN_SKIPS: process.env.BENCH_DYN_SKIPS } : {}),
      },
    });
    const samplers = runners.map((r) => ctx.sampleProcess(r.pid, 500));
    await sleep(3_000);
    const rssEmpty = runners.map((r) => ctx.readProc(r.pid).rssKiB / 1024);

    ctx.log(`${keys} upserts from ${runners[0]!.host}`);
    runners[0]!.child.kill('SIGUSR1');
    const upserted = await ctx.waitFor(
      'the bulk upsert',
      () => said(runners[0]!, 'upserted')[0] ?? said(runners[0]!, 'upsert failed')[0],
      { timeoutMs: 900_000, intervalMs: 200 },
    );
    if (upserted.msg !== 'bench: upserted')
      throw new Error(`upsert failed: ${String(upserted.err)}`);
    const upsertMs = Number(upserted.ms);
    await ctx.waitFor(
      'every replica firing every schedule',
      () =>
        runners.every((r) => said(r, 'schedules changed').some((l) => Number(l.loaded) >= keys)),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const rssLoaded = runners.map((r) => ctx.readProc(r.pid).rssKiB / 1024);

    const dbNow = async () =>
      (await ctx.db.query<RowDataPacket>('SELECT NOW(3) AS now'))[0]!.now as Date;
    const nextMinute = (d: Date) => new Date(Math.floor(d.getTime() / 60_000 + 1) * 60_000);
    /** Waits until every replica's row of every fire of minute `m` is written, winners' verdicts too. */
    const settled = async (m: Date) => {
      await ctx.waitForRows(
        `SELECT COUNT(*) AS n FROM baton_runs
          WHERE namespace = ? AND scheduled_at = ? AND status <> 'running'`,
        [NAMESPACE, m],
        keys * ROWS_PER_FIRE,
        120_000,
      );
    };

    const minutes: Date[] = [];
    let counted: Awaited<ReturnType<Awaited<ReturnType<typeof ctx.statements>>['stop']>> | null =
      null;
    let m = nextMinute(new Date((await dbNow()).getTime() + 3_000));
    for (let i = 0; i < storms; i++, m = new Date(m.getTime() + 60_000)) {
      ctx.log(`storm ${i + 1}: ${keys} fires at ${m.toISOString()}`);
      await settled(m);
      minutes.push(m);
      if (i === 0) {
        // Between this storm's last verdict and the next minute: the idle replicas' statements.
        await sleep(2_000);
        const left = m.getTime() + 57_000 - (await dbNow()).getTime();
        const windowMs = Math.min(idleWindowMs, left);
        ctx.log(`idle window: ${round(windowMs / 1000, 1)} s`);
        const counter = await ctx.statements();
        await sleep(windowMs);
        counted = await counter.stop();
      }
    }

    ctx.log(`${PROBES} probes: one upsert each, timed to every replica`);
    const reach: number[][] = runners.map(() => []);
    for (let i = 0; i < PROBES; i++) {
      runners[0]!.child.kill('SIGUSR2');
      const probe = await ctx.waitFor(`probe ${i}`, () => said(runners[0]!, 'probe upserted')[i], {
        timeoutMs: 30_000,
        intervalMs: 20,
      });
      const revision = Number(probe.revision);
      await Promise.all(
        runners.map(async (r, j) => {
          const seen = await ctx.waitFor(
            `${r.host} at revision ${revision}`,
            () => said(r, 'schedules changed').find((l) => Number(l.revision) >= revision),
            { timeoutMs: 30_000, intervalMs: 20 },
          );
          reach[j]!.push(Number(seen.t) - Number(probe.t));
        }),
      );
      // Out of step with the replicas' once-a-second look, so that the probes sample its phase.
      await sleep(200 + Math.random() * 800);
    }

    const usage = samplers.map((s) => s.stop());
    const errors = runners.flatMap((r) => r.errors().map((l) => `${r.host}: ${l.msg}`));
    await Promise.all(runners.map((r) => r.stop('SIGTERM', 30_000)));

    // The handlers' journals: `key instant` per run.
    const journal = runners.flatMap((r) => {
      const text = readFileSync(path.join(journals, `journal-${r.host}.txt`), 'utf8');
      return text ? text.split('\n').map((line) => ({ line, host: r.host })) : [];
    });
    const times = new Map<string, number>();
    for (const { line } of journal) times.set(line, (times.get(line) ?? 0) + 1);
    const twice = [...times].filter(([, n]) => n > 1);
    const perStorm = minutes.map((at) => {
      const lines = journal.filter((j) => j.line.endsWith(` ${at.getTime()}`));
      return { at, runs: lines.length, distinct: new Set(lines.map((j) => j.line)).size };
    });

    // baton's rows of the storms.
    const rows = await ctx.db.query<RowDataPacket>(
      `SELECT job, scheduled_at, host, status, winner,
              TIMESTAMPDIFF(MICROSECOND, scheduled_at, started_at) / 1000 AS lag_ms,
              TIMESTAMPDIFF(MICROSECOND, scheduled_at, finished_at) / 1000 AS end_ms
         FROM baton_runs WHERE namespace = ? AND scheduled_at IN (?)`,
      [NAMESPACE, minutes],
    );
    const winners = rows.filter((r) => r.winner != null);
    const lag = percentiles(winners.map((r) => Number(r.lag_ms)));
    const lastVerdictMs = Math.max(...winners.map((r) => Number(r.end_ms)));
    const winnersPerFire = new Map<string, number>();
    for (const w of winners) {
      const id = `${String(w.job)} ${(w.scheduled_at as Date).toISOString()}`;
      winnersPerFire.set(id, (winnersPerFire.get(id) ?? 0) + 1);
    }
    const notDone = winners.filter((w) => w.status !== 'done').length;
    const byHost = runners.map((r) => winners.filter((w) => w.host === r.host).length);

    const idle = counted!;
    const idlePerReplica = (idle.statements - baseRate * idle.seconds) / idle.seconds / RUNNERS;
    const others = percentiles(reach.slice(1).flat());
    const local = percentiles(reach[0]!);

    const expectedRuns = keys * minutes.length;
    const checks: Check[] = [
      {
        name: 'every fire ran once, by the handlers’ journals',
        ok: twice.length === 0 && perStorm.every((s) => s.runs === keys && s.distinct === keys),
        detail:
          `${journal.length} runs journaled; per storm ` +
          perStorm.map((s) => `${s.runs} runs of ${s.distinct} keys`).join(', ') +
          `; ${twice.length} (key, instant) run more than once`,
      },
      {
        name: 'every fire has one done winner, and a row of every replica',
        ok:
          winnersPerFire.size === expectedRuns &&
          [...winnersPerFire.values()].every((n) => n === 1) &&
          notDone === 0 &&
          rows.length === expectedRuns * ROWS_PER_FIRE,
        detail:
          `${winnersPerFire.size} fires with a winner of ${expectedRuns}, ${notDone} not done, ` +
          `${rows.length} rows of ${expectedRuns * ROWS_PER_FIRE}`,
      },
      ctx.target('claim lag p99', lag.p99, 1_000, 'ms', {
        context: `p50 ${round(lag.p50)} ms, max ${round(lag.max)} ms; last verdict ${round(lastVerdictMs)} ms after the instant`,
      }),
      ctx.target('statements per second per idle replica', idlePerReplica, 2, '/s', {
        context: `${idle.statements} statements in ${round(idle.seconds, 1)} s for ${RUNNERS} replicas, baseline ${round(baseRate, 3)}/s subtracted`,
      }),
      ctx.target(
        'an upsert reaches every replica (max)',
        Math.max(others.max, local.max),
        STATED_REACH_MS,
        'ms',
        {
          context: `other replicas p50 ${round(others.p50)} ms; the upserting one p50 ${round(local.p50)} ms`,
        },
      ),
      {
        name: 'no replica logged an error',
        ok: errors.length === 0,
        detail: errors.slice(0, 5).join('; ') || 'none',
      },
    ];

    const table: TableRow[] = runners.map((r, i) => ({
      replica: r.host,
      'RSS empty': `${round(rssEmpty[i]!, 1)} MiB`,
      'RSS loaded': `${round(rssLoaded[i]!, 1)} MiB`,
      'RSS peak': `${round(usage[i]!.rssPeakMiB, 1)} MiB`,
      'RSS end': `${round(usage[i]!.rssEndMiB, 1)} MiB`,
      CPU: `${round(usage[i]!.cpuPercent, 1)} %`,
      'fires won': byHost[i]!,
      'reach p50': `${round(percentiles(reach[i]!).p50)} ms`,
      'reach max': `${round(percentiles(reach[i]!).max)} ms`,
    }));
    const com = Object.entries(idle.com)
      .filter(([k]) => k !== 'Com_show_status')
      .map(([k, v]) => `${k.replace(/^Com_/, '')} ${round(v / idle.seconds / RUNNERS, 3)}/s`)
      .join(', ');
    const figures = {
      keys,
      storms: minutes.length,
      upsert_s: round(upsertMs / 1000, 1),
      upserts_per_s: round(keys / (upsertMs / 1000), 1),
      ...distFigures('claim_lag', lag),
      last_verdict_ms: round(lastVerdictMs),
      idle_statements_per_s_per_replica: round(idlePerReplica, 3),
      idle_window_s: round(idle.seconds, 1),
      reach_others_p50_ms: round(others.p50),
      reach_others_max_ms: round(others.max),
      reach_local_p50_ms: round(local.p50),
      reach_local_max_ms: round(local.max),
      rss_empty_mib_max: round(Math.max(...rssEmpty), 1),
      rss_loaded_mib_max: round(Math.max(...rssLoaded), 1),
      rss_peak_mib_max: round(Math.max(...usage.map((u) => u.rssPeakMiB)), 1),
      rss_per_schedule_kib: round(
        ((rssLoaded.reduce((a, b) => a + b, 0) - rssEmpty.reduce((a, b) => a + b, 0)) * 1024) /
          RUNNERS /
          keys,
        2,
      ),
    };
    const notes = [
      `Bulk upsert: ${keys} keys in ${round(upsertMs / 1000, 1)} s from one replica, 16 at a time ` +
        `(${JSON.stringify(upserted.statuses)}).`,
      `Idle window: ${round(idle.seconds, 1)} s after the first storm's last verdict; per replica ` +
        `by command: ${com || 'none'}.`,
      `Storm minutes: ${minutes.map((d) => d.toISOString()).join(', ')}; winners per replica ${byHost.join(' / ')}.`,
      `Load averages at the end: ${loadAverages()}.`,
    ];
    return { figures, table, notes, checks };
  },
} satisfies Scenario;
