/**
 * The peers-cron scenario's common measure (bench/scenarios/peers-cron.ts): how every system's
 * workers are started (3 processes, the third with its wall clock behind), how their runs are
 * judged against the window's fires (lag, fires run twice, fires lost) and how their footprint
 * is read.
 */
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import type { BenchContext, Distribution } from '../index.js';
import { percentiles, readProc, ROOT, sleep } from '../index.js';
import { skewedClockEnv, startProcs, type WorkerProc } from '../b-procs.js';
import { loadAverages } from '../machine.js';

export const WORKERS = 3;
export const SKEW = '-0.4';
export const SECOND_JOBS = 10;
export const MINUTE_JOBS = 100;

/** One run of one fire, in real (host, unfaked) time. */
export interface Run {
  job: string;
  worker: string;
  fireMs: number;
  startMs: number;
}

export interface SystemResult {
  system: string;
  version: string;
  workload: 'second' | 'minute';
  fires: number;
  lag: Distribution;
  twice: number;
  lost: number;
  runs: number;
  rssIdleMiB: number[];
  rssPeakMiB: number[];
  loadStart: string;
  loadEnd: string;
  byWorker: Record<string, number>;
  notes: string[];
  /** baton's rows only: which baton (a `baton start` runner per worker, or library mode). */
  baton?: 'daemon' | 'library';
  /** baton only: its claim lag (started_at − scheduled_at), the instant it decided to run. */
  claim?: Distribution;
}

/** Real time of a monotonic reading (ms): the harness's clock is not faked. */
const mono0 = Number(process.hrtime.bigint()) / 1e6;
const wall0 = performance.timeOrigin + performance.now();
export const realOf = (monoMs: number) => wall0 + (monoMs - mono0);

/** A worker's record of a run: the fire it ran (its system's instant) and its monotonic stamp. */
export interface StampedFire {
  job: string;
  worker: string;
  fireMs: number;
  startMono: number;
}

/**
 * A StampedFire as a Run. `offsetMs` moves the stamp onto the clock of the system's instants
 * (baton's are the database's); 0 for instants on the host's clock.
 */
export const stampedRun =
  (offsetMs = 0) =>
  (m: StampedFire): Run => ({
    job: m.job,
    worker: m.worker,
    fireMs: m.fireMs,
    startMs: realOf(m.startMono) + offsetMs,
  });

const packageVersion = (dir: string) =>
  String(
    (JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string })
      .version,
  );

/** An installed package's version (node_modules/<pkg>). */
export const versionOf = (pkg: string) => packageVersion(path.join(ROOT, 'node_modules', pkg));

/** `baton-cron <version>`: this checkout's package, what the bench runs (dist/). */
export const batonVersion = () => `baton-cron ${packageVersion(ROOT)}`;

export function reachable(host: string, port: number, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Resident memory of a process and its descendants (a baton runner has a spawner child), MiB. */
export function treeRssMiB(pid: number): number {
  let kib = 0;
  const visit = (p: number) => {
    try {
      const rss = readProc(p).rssKiB;
      if (Number.isFinite(rss)) kib += rss; // a zombie has no VmRSS
      const kids = readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim();
      for (const k of kids ? kids.split(/\s+/) : []) visit(Number(k));
    } catch {
      // gone
    }
  };
  visit(pid);
  return kib / 1024;
}

/** Peak tree RSS of some processes, sampled every 500 ms until stop(). */
export function rssPeaks(pids: number[]): { stop(): number[] } {
  const peaks = pids.map((p) => treeRssMiB(p));
  const timer = setInterval(() => {
    pids.forEach((p, i) => (peaks[i] = Math.max(peaks[i]!, treeRssMiB(p))));
  }, 500);
  return {
    stop() {
      clearInterval(timer);
      return peaks;
    },
  };
}

/** The fires of a window: `jobs` × instants; runs outside it are left out. */
export function judge(
  runs: Run[],
  jobs: string[],
  instants: number[],
): Pick<SystemResult, 'lag' | 'twice' | 'lost' | 'runs' | 'byWorker' | 'fires'> {
  const inWindow = new Set(instants);
  const perFire = new Map<string, Run[]>();
  for (const r of runs) {
    if (!inWindow.has(r.fireMs)) continue;
    const k = `${r.job}@${r.fireMs}`;
    perFire.set(k, [...(perFire.get(k) ?? []), r]);
  }
  const lag: number[] = [];
  const byWorker: Record<string, number> = {};
  let twice = 0;
  let total = 0;
  for (const fr of perFire.values()) {
    fr.sort((a, b) => a.startMs - b.startMs);
    lag.push(fr[0]!.startMs - fr[0]!.fireMs);
    if (fr.length > 1) twice++;
    total += fr.length;
    for (const r of fr) byWorker[r.worker] = (byWorker[r.worker] ?? 0) + 1;
  }
  let lost = 0;
  for (const at of instants) for (const j of jobs) if (!perFire.has(`${j}@${at}`)) lost++;
  return {
    lag: percentiles(lag),
    twice,
    lost,
    runs: total,
    byWorker,
    fires: jobs.length * instants.length,
  };
}

export const jobNames = (n: number) =>
  Array.from({ length: n }, (_, i) => `j${String(i).padStart(3, '0')}`);

/** The instants of a window: from the first whole `periodMs` at least `leadMs` from now. */
export function windowInstants(periodMs: number, count: number, leadMs: number): number[] {
  const first = Math.ceil((Date.now() + leadMs) / periodMs) * periodMs;
  return Array.from({ length: count }, (_, i) => first + i * periodMs);
}

/**
 * Runs a peer: 3 worker processes of `script` (the third with the skewed clock), the window's
 * fires, then SIGTERM. `fireOf` turns a worker's message into a Run (or null).
 */
export async function runPeer<M>(
  ctx: BenchContext,
  o: {
    system: string;
    version: string;
    workload: 'second' | 'minute';
    script: string;
    tasks: object[];
    jobs: string[];
    instants: () => number[];
    tailMs: number;
    fireOf: (m: M) => Run | null;
    notes: string[];
  },
): Promise<SystemResult> {
  const skew = skewedClockEnv(SKEW) ?? {};
  const loadStart = loadAverages();
  const started = await Promise.all(
    o.tasks.map((t, i) =>
      startProcs<object, M>(o.script, [t], {
        env: i === WORKERS - 1 ? skew : {},
        timeoutMs: 15 * 60_000,
      }),
    ),
  );
  const procs: WorkerProc<M>[] = started.map((s) => s.procs[0]!);
  ctx.onCleanup(() => started.forEach((s) => s.kill()));
  const runs: Run[] = [];
  for (const p of procs) {
    p.onMessage = (m) => {
      const r = o.fireOf(m);
      if (r) runs.push(r);
    };
  }
  const instants = o.instants();
  const first = instants[0]!;
  const last = instants.at(-1)!;
  const period = instants.length > 1 ? instants[1]! - first : 1000;
  ctx.log(
    `${o.system}: ${o.jobs.length} jobs, ${instants.length} instants from ${new Date(first).toISOString()}`,
  );
  await sleep(Math.max(0, first - 1_000 - Date.now()));
  const pids = procs.map((p) => p.child.pid!);
  const rssIdleMiB = pids.map(treeRssMiB);
  const peaks = rssPeaks(pids);
  const expected = o.jobs.length * instants.length;
  await ctx
    .waitFor(
      `${o.system}: every fire of the window run`,
      () =>
        new Set(
          runs
            .filter((r) => r.fireMs >= first && r.fireMs <= last)
            .map((r) => `${r.job}@${r.fireMs}`),
        ).size >= expected,
      { timeoutMs: last - Date.now() + o.tailMs, intervalMs: 250 },
    )
    .catch(() => ctx.log(`${o.system}: not every fire ran within ${o.tailMs} ms of the last`));
  // A second run of a fire (the late worker's) shows up by now.
  await sleep(Math.min(period, 2_000));
  const rssPeakMiB = peaks.stop();
  const loadEnd = loadAverages();
  for (const p of procs) p.child.kill('SIGTERM');
  await Promise.all(procs.map((p) => p.exited));
  const errs = procs.map((p) => p.stderr().trim()).filter(Boolean);
  return {
    system: o.system,
    version: o.version,
    workload: o.workload,
    ...judge(runs, o.jobs, instants),
    rssIdleMiB,
    rssPeakMiB,
    loadStart,
    loadEnd,
    notes: [
      ...o.notes,
      ...errs.map((e) => `${o.system} worker stderr (last 300 chars): ${e.slice(-300)}`),
    ],
  };
}
