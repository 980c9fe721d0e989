/**
 * Scenario 1 of issue 7, fire lag: 3 runners, one every-second job that does nothing, 60 fires
 * (quick: 10).
 *
 * Two lags per fire, both against the fire's instant (`scheduled_at`, a whole second):
 * - claim lag: the winner's `started_at − scheduled_at`, database time (`started_at` is NOW(3)
 *   evaluated inside the winning INSERT, DATETIME(3): millisecond resolution, truncated);
 * - process-start lag: the instant the job's process ran its first instruction − scheduled_at.
 *   The job is a tiny C program (bench/lib/stamp.ts) that appends CLOCK_REALTIME and its
 *   BATON_RUN_ID to a file; the host's clock is turned into database time with the offset
 *   measured here (SELECT NOW(6) round trips; the database is local, so the offset is ~0 and its
 *   uncertainty is half the shortest round trip). Chosen over having the job INSERT NOW(6): that
 *   would add a client's start-up and a connection to every run and measure the job's database
 *   access, not when it started.
 * With BENCH_TRACING=1 (recorded as `fire-lag+traced`), every runner traces its fires into an
 * OTLP/HTTP sink in this process (bench/lib/otlp-sink.ts; docs/tracing.md): compare its claim lag
 * p99 with the default's (`--compare`); the goal is within 1.1×.
 *
 * Then two more phases run the same with a module job (`module:`, the job's default export
 * stamps `Date.now()`-like time when it is called), 20 fires each (quick: 5): an `.mjs` one, then
 * a `.ts` one (through tsx): what module jobs pay for a Node process and the module host. Their
 * runners keep a module host warm (src/execution/warm-hosts.ts): its memory, read from /proc
 * after the last fire, is the idle cost of a module job per runner — and that of its children:
 * a `.ts` host of a CommonJS package scope (the temp folder here) has started esbuild's service
 * ahead (src/execution/tsx-warm-up.ts), a process of its own.
 *
 * The floors are measured in the same run (ctx.floors(): SELECT 1, an autocommit INSERT, a spawn
 * of `true`) plus the stamp's own spawn-to-first-instruction time, and the lags are reported as
 * ratios to them. Checked: exactly one winner per fire, every runner left a row for every fire,
 * every winner ended `done`. Targets (printed, never thrown): p99 claim lag < 10 ms, p99
 * process-start lag < 25 ms. BullMQ's job scheduler measured on this machine: p50 57 ms, p99
 * 105 ms (issue 7).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { RowDataPacket } from 'mysql2/promise';
import type {
  BenchContext,
  BenchRunner,
  Check,
  Scenario,
  ScenarioResult,
  TableRow,
} from '../lib/index.js';
import { OtlpSink } from '../lib/otlp-sink.js';
import { distFigures, distRow, makeTempDir, percentiles, round } from '../lib/index.js';
import { buildStamp, clockOffset, readStamps, stampSpawnFloor } from '../lib/stamp.js';

const RUNNERS = 3;

interface FireRow extends RowDataPacket {
  id: number;
  scheduled_at: Date;
  winner: number | null;
  status: string;
  host: string;
  started_at: Date;
}

interface PhaseResult {
  fires: number;
  claim: number[];
  start: number[];
  checks: Check[];
  winnersByHost: Record<string, number>;
}

/** Runs `fires` fires of job `tick` on 3 runners and collects the lags of each. */
async function phase(
  ctx: BenchContext,
  label: string,
  job: object,
  files: Record<string, string>,
  stampFile: string,
  fires: number,
  offsetMs: number,
  beforeStop?: (runners: BenchRunner[]) => Promise<void>,
  env: Record<string, string> = {},
): Promise<PhaseResult> {
  const config = ctx.writeSchedule({ namespace: label, jobs: { tick: job } }, files);
  ctx.log(`${label}: starting ${RUNNERS} runners`);
  const runners = await ctx.startRunners(RUNNERS, {
    config,
    hostPrefix: label,
    args: ['--grace', '5'],
    env,
  });
  // Two fires of warm-up after every runner is up (first spawns, first statements).
  const readyAt = await ctx.db.now();
  const first = new Date(Math.ceil(readyAt.getTime() / 1000) * 1000 + 2000);
  const last = new Date(first.getTime() + (fires - 1) * 1000);
  ctx.log(`${label}: measuring ${fires} fires from ${first.toISOString()}`);
  const where = 'namespace = ? AND job = ? AND scheduled_at BETWEEN ? AND ?';
  const params = [label, 'tick', first, last];
  await ctx.waitForRows(
    `SELECT COUNT(*) AS n FROM baton_runs WHERE ${where} AND winner = 1 AND status <> 'running'`,
    params,
    fires,
    (fires + 60) * 1000,
  );
  // The losers' rows of the last fire follow the winner's within milliseconds.
  await ctx
    .waitForRows(
      `SELECT COUNT(*) AS n FROM baton_runs WHERE ${where}`,
      params,
      fires * RUNNERS,
      10_000,
    )
    .catch(() => ctx.log(`${label}: not every runner left a row for every fire (checked below)`));
  await beforeStop?.(runners);
  await stopAll(runners);
  const rows = await ctx.db.query<FireRow>(
    `SELECT id, scheduled_at, winner, status, host, started_at FROM baton_runs WHERE ${where}
      ORDER BY scheduled_at, id`,
    params,
  );
  const stamps = readStamps(stampFile);
  const byFire = new Map<number, FireRow[]>();
  for (const r of rows) {
    const k = r.scheduled_at.getTime();
    byFire.set(k, [...(byFire.get(k) ?? []), r]);
  }
  const claim: number[] = [];
  const start: number[] = [];
  const badWinners: string[] = [];
  let doubleRun = 0;
  const missingRows: string[] = [];
  const notDone: string[] = [];
  const noStamp: number[] = [];
  const winnersByHost: Record<string, number> = {};
  for (let i = 0; i < fires; i++) {
    const at = first.getTime() + i * 1000;
    const fireRows = byFire.get(at) ?? [];
    const winners = fireRows.filter((r) => r.winner === 1);
    const iso = new Date(at).toISOString();
    if (winners.length !== 1) badWinners.push(`${iso}: ${winners.length} winners`);
    if (winners.length > 1) doubleRun++;
    if (fireRows.length !== RUNNERS) missingRows.push(`${iso}: ${fireRows.length} rows`);
    for (const w of winners) {
      winnersByHost[w.host] = (winnersByHost[w.host] ?? 0) + 1;
      if (w.status !== 'done') notDone.push(`${iso}: ${w.status}`);
      claim.push(w.started_at.getTime() - at);
      const stamped = stamps.get(Number(w.id));
      if (stamped == null) noStamp.push(Number(w.id));
      else start.push(stamped + offsetMs - at);
    }
  }
  const list = (xs: unknown[]) => xs.slice(0, 5).join('; ') + (xs.length > 5 ? ' …' : '');
  const checks: Check[] = [
    {
      name: `${label}: exactly one winner per fire`,
      ok: badWinners.length === 0,
      detail: badWinners.length
        ? `${doubleRun} fires with two or more winners, ${badWinners.length - doubleRun} with ` +
          `none: ${list(badWinners)}`
        : `${fires} fires, 1 winner each`,
    },
    {
      name: `${label}: every runner recorded every fire`,
      ok: missingRows.length === 0,
      detail: missingRows.length ? list(missingRows) : `${RUNNERS} rows per fire`,
    },
    {
      name: `${label}: every winner ended done and stamped its start`,
      ok: notDone.length === 0 && noStamp.length === 0,
      detail:
        notDone.length || noStamp.length
          ? `${list(notDone)} ${noStamp.length ? `no stamp for runs ${list(noStamp)}` : ''}`
          : 'all done',
    },
  ];
  const errors = runners.flatMap((r) => r.errors().map((l) => `${r.host}: ${l.msg}`));
  if (errors.length) {
    checks.push({ name: `${label}: no runner logged an error`, ok: false, detail: list(errors) });
  }
  return { fires, claim, start, checks, winnersByHost };
}

async function stopAll(runners: BenchRunner[]): Promise<void> {
  await Promise.all(runners.map((r) => r.stop('SIGTERM')));
}

/** Memory of the warm hosts per runner, MiB: the hosts, and their child processes. */
interface HostMemory {
  rss: number;
  pss: number;
  /** The hosts' children: esbuild's service, started ahead by a tsx warm-up (tsx-warm-up.ts). */
  childRss: number;
  childPss: number;
}

/**
 * The runners' warm module hosts (`module-host.js --warm`) and their children, RSS and PSS in
 * MiB per runner.
 */
async function warmHostMemory(runners: BenchRunner[]): Promise<HostMemory> {
  // A host taken by the last fire is replaced a moment later (warm-hosts.ts), and warms up.
  await new Promise((r) => setTimeout(r, 2_000));
  const runnerPids = new Set(runners.map((r) => r.pid));
  const processes: { pid: number; ppid: number; argv: string[]; status: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const status = readFileSync(`/proc/${entry}/status`, 'utf8');
      const ppid = Number(/PPid:\s+(\d+)/.exec(status)?.[1]);
      processes.push({ pid: Number(entry), ppid, argv, status });
    } catch {
      // gone meanwhile
    }
  }
  const hosts = processes.filter(
    (p) =>
      runnerPids.has(p.ppid) &&
      p.argv.some((a) => a.endsWith('module-host.js')) &&
      p.argv.includes('--warm'),
  );
  const hostPids = new Set(hosts.map((h) => h.pid));
  const children = processes.filter((p) => hostPids.has(p.ppid));
  const sum = (list: typeof processes) => {
    let rss = 0;
    let pss = 0;
    for (const p of list) {
      try {
        const rollup = readFileSync(`/proc/${p.pid}/smaps_rollup`, 'utf8');
        rss += Number(/VmRSS:\s+(\d+)/.exec(p.status)?.[1] ?? 0);
        pss += Number(/Pss:\s+(\d+)/.exec(rollup)?.[1] ?? 0);
      } catch {
        // gone meanwhile
      }
    }
    const perRunner = (kib: number) => round(kib / 1024 / runners.length, 1);
    return { rss: perRunner(rss), pss: perRunner(pss) };
  };
  const own = sum(hosts);
  const kids = sum(children);
  return { ...own, childRss: kids.rss, childPss: kids.pss };
}

const MODULE_SOURCE = `import { appendFileSync } from 'node:fs';
export default async (ctx) => {
  const at = performance.timeOrigin + performance.now();
  appendFileSync(process.env.STAMP_FILE, ctx.runId + ' ' + (at / 1000).toFixed(6) + '\\n');
};
`;

export default {
  name: 'fire-lag',
  title: 'Fire lag: 3 runners, an every-second no-op job (command, then module)',
  variant: () => (traced() ? 'traced' : null),
  async run(ctx) {
    const sink = traced() ? await OtlpSink.start() : null;
    try {
      return await measure(ctx, sink?.env() ?? {});
    } finally {
      await sink?.stop();
    }
  },
} satisfies Scenario;

/** BENCH_TRACING=1: the runners trace their fires (the `traced` variant). */
function traced(): boolean {
  return process.env.BENCH_TRACING === '1';
}

async function measure(ctx: BenchContext, env: Record<string, string>): Promise<ScenarioResult> {
  {
    const fires = ctx.quick ? 10 : 60;
    const moduleFires = ctx.quick ? 5 : 20;
    ctx.log('measuring floors and the clock offset');
    const floors = await ctx.floors();
    const offset = await clockOffset(ctx.db);
    const stamp = buildStamp();
    const stampFloor = await stampSpawnFloor(stamp);

    const stampDir = makeTempDir('baton-bench-stamps-');
    const cmdStamps = path.join(stampDir, 'command-stamps.txt');
    const cmd = await phase(
      ctx,
      'cmd',
      { schedule: '* * * * * *', command: stamp.argv(cmdStamps) },
      {},
      cmdStamps,
      fires,
      offset.offsetMs,
      undefined,
      env,
    );
    const modStamps = path.join(stampDir, 'module-stamps.txt');
    let modMemory: HostMemory = { rss: 0, pss: 0, childRss: 0, childPss: 0 };
    const mod = await phase(
      ctx,
      'mod',
      { schedule: '* * * * * *', module: 'stamp-job.mjs', env: { STAMP_FILE: modStamps } },
      { 'stamp-job.mjs': MODULE_SOURCE },
      modStamps,
      moduleFires,
      offset.offsetMs,
      async (runners) => void (modMemory = await warmHostMemory(runners)),
      env,
    );

    const tsStamps = path.join(stampDir, 'ts-module-stamps.txt');
    let tsMemory: HostMemory = { rss: 0, pss: 0, childRss: 0, childPss: 0 };
    const ts = await phase(
      ctx,
      'mts',
      { schedule: '* * * * * *', module: 'stamp-job.ts', env: { STAMP_FILE: tsStamps } },
      { 'stamp-job.ts': MODULE_SOURCE.replace('async (ctx)', 'async (ctx: { runId: number })') },
      tsStamps,
      moduleFires,
      offset.offsetMs,
      async (runners) => void (tsMemory = await warmHostMemory(runners)),
      env,
    );

    const claimD = percentiles(cmd.claim);
    const startD = percentiles(cmd.start);
    const modClaimD = percentiles(mod.claim);
    const modStartD = percentiles(mod.start);
    const tsStartD = percentiles(ts.start);
    const claimFloor = floors.rtt.p50 + floors.commit.p50;
    const startFloor = claimFloor + floors.spawn.p50;
    const ratio = (v: number, f: number) => `${round(v / f, 1)}×`;

    const table: TableRow[] = [
      distRow('floor: SELECT 1 round trip', floors.rtt),
      distRow('floor: autocommit INSERT (commit)', floors.commit),
      distRow("floor: spawn `true` → 'spawn' event", floors.spawn),
      distRow('floor: spawn `true` → exit', floors.spawnExit),
      distRow(`floor: spawn → stamp's first instruction (${stamp.kind})`, stampFloor),
      distRow('command job: claim lag (started_at − scheduled_at)', claimD, {
        'p50/floor': ratio(claimD.p50, claimFloor),
        'p99/floor': ratio(claimD.p99, claimFloor),
      }),
      distRow('command job: process-start lag', startD, {
        'p50/floor': ratio(startD.p50, startFloor),
        'p99/floor': ratio(startD.p99, startFloor),
      }),
      distRow('module job: claim lag', modClaimD, {
        'p50/floor': ratio(modClaimD.p50, claimFloor),
        'p99/floor': ratio(modClaimD.p99, claimFloor),
      }),
      distRow('module job: function-call lag', modStartD, {
        'p50/floor': ratio(modStartD.p50, startFloor),
        'p99/floor': ratio(modStartD.p99, startFloor),
      }),
      distRow('.ts module job (tsx): function-call lag', tsStartD, {
        'p50/floor': ratio(tsStartD.p50, startFloor),
        'p99/floor': ratio(tsStartD.p99, startFloor),
      }),
    ];
    const checks: Check[] = [
      ...cmd.checks,
      ...mod.checks,
      ...ts.checks,
      ctx.target('p99 claim lag (command job)', claimD.p99, 10, 'ms', {
        context: `BullMQ here: p50 57 ms, p99 105 ms`,
      }),
      ctx.target('p99 process-start lag (command job)', startD.p99, 25, 'ms'),
      ctx.target('p99 call lag (.mjs module job)', modStartD.p99, 25, 'ms'),
      ctx.target('p99 call lag (.ts module job)', tsStartD.p99, 25, 'ms'),
    ];
    const figures = {
      fires,
      module_fires: moduleFires,
      ...distFigures('claim_lag_ms', claimD),
      ...distFigures('start_lag_ms', startD),
      ...distFigures('module_claim_lag_ms', modClaimD),
      ...distFigures('module_call_lag_ms', modStartD),
      ...distFigures('module_ts_call_lag_ms', tsStartD),
      warm_host_rss_mib_per_runner: modMemory.rss,
      warm_host_pss_mib_per_runner: modMemory.pss,
      warm_ts_host_rss_mib_per_runner: tsMemory.rss,
      warm_ts_host_pss_mib_per_runner: tsMemory.pss,
      warm_ts_host_children_rss_mib_per_runner: tsMemory.childRss,
      warm_ts_host_children_pss_mib_per_runner: tsMemory.childPss,
      floor_rtt_p50_ms: round(floors.rtt.p50, 3),
      floor_commit_p50_ms: round(floors.commit.p50, 3),
      floor_spawn_p50_ms: round(floors.spawn.p50, 3),
      floor_spawn_exit_p50_ms: round(floors.spawnExit.p50, 3),
      floor_stamp_spawn_p50_ms: round(stampFloor.p50, 3),
      claim_p50_over_floor: round(claimD.p50 / claimFloor, 2),
      claim_p99_over_floor: round(claimD.p99 / claimFloor, 2),
      start_p50_over_floor: round(startD.p50 / startFloor, 2),
      start_p99_over_floor: round(startD.p99 / startFloor, 2),
      clock_offset_ms: round(offset.offsetMs, 3),
      clock_offset_uncertainty_ms: round(offset.rttMs / 2, 3),
      stamp: stamp.kind,
      winners_by_host: JSON.stringify(cmd.winnersByHost),
    };
    const notes = [
      `Claim lag is started_at (NOW(3) inside the winning INSERT, DATETIME(3): truncated to the ` +
        `millisecond, so it reads up to 1 ms low) − scheduled_at.`,
      `Process-start lag: the job (${stamp.kind === 'c' ? 'a C program reading CLOCK_REALTIME first thing' : 'bash reading $EPOCHREALTIME'}) ` +
        `stamps its start on the host clock, converted to database time with the measured offset ` +
        `${round(offset.offsetMs, 3)} ms (± ${round(offset.rttMs / 2, 3)} ms; same machine, same clock).`,
      `Floors: claim = RTT p50 + commit p50 = ${round(claimFloor, 3)} ms; process start = that + ` +
        `spawn p50 = ${round(startFloor, 3)} ms. Ratios are each lag percentile over that floor.`,
      `Per fire a winner sends (before started_at is stamped): the pause look-up, GET_LOCK, the ` +
        `orphan check, the claiming INSERT; its timer wakes at the instant by the database clock.`,
      `Winners by host (command phase): ${JSON.stringify(cmd.winnersByHost)}.`,
      `Warm module hosts per runner after the last fire (idle cost of module jobs): .mjs ` +
        `${modMemory.rss} MiB RSS / ${modMemory.pss} MiB PSS, .ts (tsx) ${tsMemory.rss} MiB RSS / ` +
        `${tsMemory.pss} MiB PSS (0: no warm host, a cold start per run), and the .ts hosts' ` +
        `children (esbuild's service, started by the warm-up of a CommonJS scope) ` +
        `${tsMemory.childRss} MiB RSS / ${tsMemory.childPss} MiB PSS.`,
      `BullMQ's job scheduler on this machine (issue 7): p50 57 ms, p99 105 ms.`,
    ];
    return { figures, table, notes, checks };
  }
}
