/**
 * Real `baton start` runner processes (`dist/cli/main.js`, built beforehand with
 * `npm run build`), their JSON log lines, and schedule files in a temp folder.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { stringify } from 'yaml';
import type { BenchContext } from './index.js';
import { FatalWait, waitFor } from './wait.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BATON_BIN = path.join(ROOT, 'dist/cli/main.js');

export function assertBuilt(): void {
  if (!existsSync(BATON_BIN)) {
    throw new Error(`${BATON_BIN} is missing: run \`npm run build\` before \`npm run bench\``);
  }
}

/** Environment for baton children: no BATON_* from the developer's shell leaks in. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BATON_')) env[k] = v;
  return { ...env, ...extra };
}

const tempDirs = new Set<string>();

/**
 * Writes a schedules file (YAML text, or an object serialised to YAML) and extra files into a
 * fresh temp folder (removed when the scenario ends); returns the file's path.
 */
export function writeSchedule(
  schedule: string | object,
  files: Record<string, string> = {},
): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-bench-'));
  tempDirs.add(dir);
  const file = path.join(dir, 'schedules.yaml');
  writeFileSync(file, typeof schedule === 'string' ? schedule : stringify(schedule));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return file;
}

/** A fresh temp folder, removed with the scenario's others when it ends. */
export function makeTempDir(prefix = 'baton-bench-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDirs(): void {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
  probeDir = undefined;
}

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export class BenchRunner {
  readonly lines: LogLine[] = [];
  stderr = '';
  private readonly exited: Promise<number | null>;

  constructor(
    readonly host: string,
    readonly child: ChildProcess,
    private readonly keepLines: boolean,
  ) {
    let buffer = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (d: string) => {
      buffer += d;
      let nl;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        let parsed: LogLine;
        try {
          parsed = JSON.parse(line) as LogLine;
        } catch {
          parsed = { level: 0, msg: line };
        }
        if (this.keepLines || parsed.level >= 40) this.lines.push(parsed);
      }
    });
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => (this.stderr = (this.stderr + d).slice(-20_000)));
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** The probe's figures between two host instants (epoch ms); null without `probe: true`. */
  probe(fromMs: number, toMs: number): ProbeSummary | null {
    if (!probeDir) return null;
    let text: string;
    try {
      text = readFileSync(path.join(probeDir, `probe-${this.pid}.jsonl`), 'utf8');
    } catch {
      return null;
    }
    const sum: ProbeSummary = { coveredMs: 0, spawns: 0, spawnMs: 0, maxDelayMs: 0 };
    for (const line of text.split('\n')) {
      if (!line) continue;
      const p = JSON.parse(line) as {
        t: number;
        maxDelayMs: number;
        spawns: number;
        spawnMs: number;
      };
      if (p.t < fromMs || p.t > toMs + 250) continue;
      sum.coveredMs += 250;
      sum.spawns += p.spawns;
      sum.spawnMs += p.spawnMs;
      sum.maxDelayMs = Math.max(sum.maxDelayMs, p.maxDelayMs);
    }
    return sum;
  }

  get running(): boolean {
    return this.child.exitCode == null && this.child.signalCode == null;
  }

  /** Resolves with the first log line with this `msg` (and matching `where`). */
  waitForLog(
    msg: string,
    where: (l: LogLine) => boolean = () => true,
    timeoutMs = 30_000,
  ): Promise<LogLine> {
    return waitFor(
      `${this.host}: log "${msg}"`,
      () => {
        const line = this.lines.find((l) => l.msg === msg && where(l));
        if (!line && !this.running) {
          throw new FatalWait(`${this.host} exited with ${this.child.exitCode}: ${this.stderr}`);
        }
        return line;
      },
      { timeoutMs },
    );
  }

  /** Log lines at warn level (40) or above; with keepLines false only these are kept. */
  warnings(): LogLine[] {
    return this.lines.filter((l) => l.level >= 40);
  }

  /** Log lines at error level (50) or above. */
  errors(): LogLine[] {
    return this.lines.filter((l) => l.level >= 50);
  }

  /** Sends `signal`, SIGKILL after `timeoutMs`; resolves with the exit code. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 15_000): Promise<number | null> {
    if (this.running) this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * The probe (`StartRunnersOptions.probe`): preloaded into a runner with NODE_OPTIONS, it writes
 * a line every 250 ms to `<dir>/probe-<pid>.jsonl`: the event loop's longest delay in the period
 * (perf_hooks.monitorEventLoopDelay) and how many child processes were spawned and how long the
 * spawn() calls blocked the loop. NODE_OPTIONS reaches the runner's jobs too: a Node job (a
 * module job) is probed as well, harmlessly; a command like `true` ignores it.
 */
const PROBE_SOURCE = `
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { appendFileSync } from 'node:fs';
import cp from 'node:child_process';
const dir = process.env.BENCH_PROBE_DIR;
if (dir) {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  const file = dir + '/probe-' + process.pid + '.jsonl';
  let spawnMs = 0, spawns = 0;
  const original = cp.ChildProcess.prototype.spawn;
  cp.ChildProcess.prototype.spawn = function (...args) {
    const t = performance.now();
    try { return original.apply(this, args); } finally { spawnMs += performance.now() - t; spawns++; }
  };
  setInterval(() => {
    appendFileSync(file, JSON.stringify({ t: Date.now(), maxDelayMs: h.max / 1e6, spawns, spawnMs }) + '\\n');
    h.reset(); spawnMs = 0; spawns = 0;
  }, 250).unref();
}
`;

let probeDir: string | undefined;

function probeEnv(): Record<string, string> {
  if (!probeDir) {
    probeDir = mkdtempSync(path.join(os.tmpdir(), 'baton-bench-probe-'));
    tempDirs.add(probeDir);
    writeFileSync(path.join(probeDir, 'probe.mjs'), PROBE_SOURCE);
  }
  const preload = `--import=${pathToFileURL(path.join(probeDir, 'probe.mjs')).href}`;
  return {
    NODE_OPTIONS: [process.env.NODE_OPTIONS, preload].filter(Boolean).join(' '),
    BENCH_PROBE_DIR: probeDir,
  };
}

export interface ProbeSummary {
  /** Wall time covered by the probe's lines in the window, ms. */
  coveredMs: number;
  /** Child processes spawned (jobs and their watchdogs). */
  spawns: number;
  /** Time the event loop spent inside spawn() calls, ms. */
  spawnMs: number;
  /** The longest single event-loop delay, ms. */
  maxDelayMs: number;
}

export interface StartRunnersOptions {
  /** Path of the schedules file (`writeSchedule`). */
  config: string;
  databaseUrl: string;
  /** Host ids: `<hostPrefix>-1` … (default `bench`). */
  hostPrefix?: string;
  /** Extra `baton start` arguments, e.g. ['--grace', '2']. */
  args?: string[];
  env?: Record<string, string>;
  /** BATON_LOG_LEVEL of the runners (default `info`: what production logs). */
  logLevel?: string;
  /** Keep every log line in `lines` (default true); false keeps warnings and errors only. */
  keepLines?: boolean;
  /** How long to wait for each runner to register (default 60 s). */
  readyTimeoutMs?: number;
  /** Preload the probe (event-loop delay, time blocked in spawn()); read it with runner.probe(). */
  probe?: boolean;
  /**
   * Instead of `baton start` with `config`, an application in library mode with this many
   * every-second jobs whose handlers return at once (b-library-runner.mjs), in `namespace`;
   * `script`: another application of bench/lib (its own env in `env`).
   */
  library?: { jobs: number; namespace: string; skips: 'rows' | 'tally'; script?: string };
}

export const LIBRARY_RUNNER = path.join(ROOT, 'bench/lib/b-library-runner.mjs');

const live = new Set<BenchRunner>();

/** Starts one runner process; ready once it is registered (see startRunners). */
export function spawnRunner(host: string, o: StartRunnersOptions): BenchRunner {
  const argv = [
    // Diagnosis: `BENCH_RUNNER_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof'` profiles every
    // runner (flags NODE_OPTIONS does not allow).
    ...(process.env.BENCH_RUNNER_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
    ...(o.library
      ? [o.library.script ?? LIBRARY_RUNNER]
      : [
          BATON_BIN,
          'start',
          '--config',
          o.config,
          '--database-url',
          o.databaseUrl,
          '--host',
          host,
          ...(o.args ?? []),
        ]),
  ];
  const env = cleanEnv({
    ...(o.probe ? probeEnv() : {}),
    ...o.env,
    ...(o.library
      ? {
          BENCH_DATABASE_URL: o.databaseUrl,
          BENCH_HOST: host,
          BENCH_NAMESPACE: o.library.namespace,
          BENCH_LIBRARY_JOBS: String(o.library.jobs),
          BENCH_LIBRARY_SKIPS: o.library.skips,
        }
      : {}),
    BATON_LOG_LEVEL: o.logLevel ?? 'info',
  });
  const child = spawn(process.execPath, argv, {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const runner = new BenchRunner(host, child, o.keepLines ?? true);
  live.add(runner);
  void child.once('exit', () => live.delete(runner));
  return runner;
}

/** Every runner still alive (the harness stops them when a scenario ends or the run aborts). */
export function liveRunners(): BenchRunner[] {
  return [...live];
}

/** SIGKILLs every runner still alive, at once (the last resort of an interrupted run). */
export function killAllRunnersNow(): void {
  for (const r of live) r.child.kill('SIGKILL');
}

/**
 * The warnings and errors of some runners grouped by message: `{ msg, level, count, example }`,
 * the example being the first line's fields other than the usual ones (reason, err, …).
 */
export function summarizeWarnings(
  runners: BenchRunner[],
): Array<{ msg: string; level: number; count: number; example: string }> {
  const groups = new Map<string, { msg: string; level: number; count: number; example: string }>();
  const skip = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'host', 'name', 'v']);
  for (const r of runners) {
    for (const l of r.warnings()) {
      const g = groups.get(l.msg);
      if (g) {
        g.count++;
        continue;
      }
      const fields = Object.fromEntries(Object.entries(l).filter(([k]) => !skip.has(k)));
      groups.set(l.msg, {
        msg: l.msg,
        level: l.level,
        count: 1,
        example: `${r.host}: ${JSON.stringify(fields).slice(0, 400)}`,
      });
    }
  }
  return [...groups.values()].sort((a, b) => b.level - a.level || b.count - a.count);
}

/** Rewrites the file and sends every runner SIGHUP; resolves once each logged the reload. */
export async function reloadSchedule(
  ctx: BenchContext,
  runners: BenchRunner[],
  file: string,
  text: string,
) {
  const seen = runners.map((r) => r.lines.filter((l) => l.msg === 'schedule reloaded').length);
  writeFileSync(file, text);
  for (const r of runners) r.child.kill('SIGHUP');
  await Promise.all(
    runners.map((r, i) =>
      ctx.waitFor(
        `${r.host}: the reload`,
        () => {
          if (r.lines.some((l) => l.msg === 'reload refused: the old schedule stays')) {
            throw new Error(`${r.host} refused the reload`);
          }
          return r.lines.filter((l) => l.msg === 'schedule reloaded').length > seen[i]!;
        },
        { timeoutMs: 20_000, intervalMs: 20 },
      ),
    ),
  );
}
