/**
 * Running the built `baton` CLI as real processes: one-shot commands, and runner daemons whose
 * JSON log lines the test can wait on. A runner may get a real skewed clock through libfaketime.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PartialTimings } from '../../src/daemon/timings.js';
import { FatalWait, waitFor } from './wait.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BATON_BIN = path.join(ROOT, 'dist/cli/main.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Environment for baton children: no BATON_* from the developer's shell leaks into a test, nor
 * npm's own `npm_*` settings (`npm test` sets them), which would steer an npm run by a test.
 */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('BATON_') && !/^npm_/i.test(k)) env[k] = v;
  }
  return { ...env, ...extra };
}

export interface CommandOptions {
  env?: Record<string, string>;
  cwd?: string;
  timeoutMs?: number;
}

/** Runs `file args` to its end (killed after `timeoutMs`), with the clean environment above. */
export function command(
  file: string,
  args: readonly string[],
  { env = {}, cwd = ROOT, timeoutMs = 30_000 }: CommandOptions = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd, env: cleanEnv(env) });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${file} ${args.join(' ')} did not exit within ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The built CLI (`dist/cli/main.js`) with `args`. */
export function baton(args: string[], options: CommandOptions = {}): Promise<CliResult> {
  return command(process.execPath, [BATON_BIN, ...args], options);
}

/** Writes a schedules file into a fresh temporary folder and returns its path. */
export function writeSchedule(yaml: string, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-test-'));
  const file = path.join(dir, 'schedules.yaml');
  writeFileSync(file, yaml);
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return file;
}

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export class RunnerProcess {
  readonly lines: LogLine[] = [];
  stderr = '';
  private exit: Promise<number | null>;

  constructor(
    readonly host: string,
    readonly child: ChildProcess,
  ) {
    let buffer = '';
    child.stdout!.on('data', (d: Buffer) => {
      buffer += d.toString();
      let nl;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          this.lines.push(JSON.parse(line) as LogLine);
        } catch {
          this.lines.push({ level: 0, msg: line });
        }
      }
    });
    child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exit = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  }

  /** Resolves with the first log line matching `msg` (and `where`, if given). */
  waitForLog(
    msg: string,
    where: (l: LogLine) => boolean = () => true,
    timeoutMs = 20_000,
  ): Promise<LogLine> {
    return waitForLogLine(this.host, this.lines, msg, where, timeoutMs, () =>
      this.child.exitCode != null
        ? `${this.host} exited with ${this.child.exitCode}: ${this.stderr}`
        : null,
    );
  }

  /** Log lines at error level or above (pino: 50 = error, 60 = fatal). */
  errors(): LogLine[] {
    return this.lines.filter((l) => l.level >= 50);
  }

  ready(): Promise<LogLine> {
    return this.waitForLog('runner started');
  }

  /** Sends `signal` and resolves with the exit code. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 40_000): Promise<number | null> {
    if (this.child.exitCode == null && this.child.signalCode == null) this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    try {
      return await this.exit;
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * The first of a runner's log lines (in a process, or in this one: in-process-fleet.ts) with
 * `msg` for which `where` holds. `gone` says why it can no longer come (the runner exited, or
 * failed to start). A wait that times out says what the runner logged last: a flake is diagnosed
 * from the failure, not by a rerun.
 */
export function waitForLogLine(
  host: string,
  lines: readonly LogLine[],
  msg: string,
  where: (l: LogLine) => boolean,
  timeoutMs: number,
  gone: () => string | null,
): Promise<LogLine> {
  return waitFor(
    `${host}: log "${msg}"`,
    () => {
      const line = lines.find((l) => l.msg === msg && where(l));
      const why = line ? null : gone();
      if (why) throw new FatalWait(why);
      return line;
    },
    { timeoutMs },
  ).catch((err: unknown) => {
    if (err instanceof Error) {
      const tail = lines.slice(-15).map((l) => JSON.stringify(l));
      err.message += `\n${host} last logged:\n${tail.join('\n')}`;
    }
    throw err;
  });
}

export interface StartRunnerOptions {
  config: string;
  databaseUrl: string;
  host: string;
  /** libfaketime offset for this process's clock, e.g. "-1.5" (seconds behind). */
  clockOffset?: string;
  args?: string[];
  env?: Record<string, string>;
  /**
   * Run the runner inside this network namespace (netns.ts): `ip netns exec NAME node …`. `ip`
   * joins the namespace and execs node in place, so the child's pid is the runner's own and
   * signals reach it directly; the jobs it starts inherit the namespace.
   */
  netns?: string;
  /**
   * Run the runner as pid 1 of a PID namespace of its own (`unshare --pid --fork`), as in a
   * container: its pid, as it sees it, is then the same as any other such runner's. The child
   * is `unshare`, which kills the runner when it dies; signal the runner at `innerPid`.
   */
  pidNamespace?: boolean;
  /** The CLI to start (default: this repository's build) and its working directory. */
  bin?: string;
  cwd?: string;
  /**
   * Short cadences for this runner: any of its timings (src/daemon/timings.ts), passed as the
   * hidden `baton start --timings <json>` (test/README.md).
   */
  timings?: PartialTimings;
}

const LIBFAKETIME_CANDIDATES = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/faketime/libfaketimeMT.so.1',
];

/** The multi-threaded libfaketime (Debian package `faketime`, installed by .ci/run). */
export function libfaketime(): string {
  const found = LIBFAKETIME_CANDIDATES.find((p) => existsSync(p));
  if (!found) throw new Error('libfaketime not found: apt-get install faketime (see .ci/run)');
  return found;
}

export function startRunner(o: StartRunnerOptions): RunnerProcess {
  const argv = [
    o.bin ?? BATON_BIN,
    'start',
    '--config',
    o.config,
    '--database-url',
    o.databaseUrl,
    '--host',
    o.host,
    ...(o.timings ? ['--timings', JSON.stringify(o.timings)] : []),
    ...(o.args ?? []),
  ];
  const env = cleanEnv({ ...o.env, BATON_LOG_LEVEL: 'debug' });
  // libfaketime is preloaded into the runner itself (not through the `faketime` wrapper, which
  // would stand between the test and the runner's signals). Only the wall clock is skewed;
  // timers keep counting real time.
  const skew =
    o.clockOffset != null
      ? { LD_PRELOAD: libfaketime(), FAKETIME: o.clockOffset, FAKETIME_DONT_FAKE_MONOTONIC: '1' }
      : {};
  const [cmd, cmdArgs] =
    o.netns != null
      ? ['ip', ['netns', 'exec', o.netns, process.execPath, ...argv]]
      : o.pidNamespace
        ? [
            'unshare',
            ['--pid', '--fork', '--kill-child', '--mount-proc', process.execPath, ...argv],
          ]
        : [process.execPath, argv];
  const child = spawn(cmd, cmdArgs, { cwd: o.cwd ?? ROOT, env: { ...env, ...skew } });
  return new RunnerProcess(o.host, child);
}
