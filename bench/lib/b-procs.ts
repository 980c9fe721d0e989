/**
 * Worker processes of bench-B's scenarios (claims, peers): a TypeScript script run as its own
 * `node --import tsx` process with a JSON task as its argument. The protocol is the SDK tests'
 * (test/fixtures/sdk-spawn.ts): the worker connects, prints `ready`, waits for `go` on stdin so
 * that every worker starts at the same moment, then prints JSON lines (events or one result) and
 * exits. One process per worker, because one process can never show a race between workers.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface WorkerProc<M> {
  child: ChildProcessWithoutNullStreams;
  /** JSON lines printed after `ready`, in order. */
  messages: M[];
  /** Called for each JSON line as it arrives (set before `go`). */
  onMessage?: (m: M) => void;
  stderr(): string;
  /** Resolves with the exit code (null after a signal). */
  exited: Promise<number | null>;
}

export interface StartOptions {
  /** Extra environment (e.g. libfaketime's LD_PRELOAD and FAKETIME). */
  env?: Record<string, string>;
  /** Kill every worker (SIGKILL) after this long, a last resort. Default 120 s. */
  timeoutMs?: number;
}

/**
 * Starts one process per task of `script` (a path relative to bench/lib) and resolves once every
 * one printed `ready`. `go()` releases them together.
 */
export async function startProcs<T, M>(
  script: string,
  tasks: readonly T[],
  { env = {}, timeoutMs = 120_000 }: StartOptions = {},
): Promise<{ procs: WorkerProc<M>[]; go: () => void; kill: () => void }> {
  const file = fileURLToPath(new URL(script, import.meta.url));
  const started = tasks.map((task) => {
    // A plain .mjs worker runs on a bare node (the peers': their footprint is theirs, not tsx's).
    const loader = file.endsWith('.mjs') ? [] : ['--import', 'tsx'];
    const child = spawn(process.execPath, [...loader, file, JSON.stringify(task)], {
      cwd: ROOT,
      stdio: 'pipe',
      env: { ...process.env, ...env },
    });
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d: string) => (stderr = (stderr + d).slice(-20_000)));
    const proc: WorkerProc<M> & { ready: Promise<void> } = {
      child,
      messages: [],
      stderr: () => stderr,
      exited: new Promise((resolve) => child.on('close', (code) => resolve(code))),
      ready: Promise.resolve(),
    };
    let onReady: () => void = () => {};
    proc.ready = new Promise<void>((resolve, reject) => {
      onReady = resolve;
      child.on('close', (code) =>
        reject(new Error(`${script} exited (${code}) before it was ready:\n${stderr}`)),
      );
    });
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === 'ready') onReady();
      else if (line.startsWith('{')) {
        const m = JSON.parse(line) as M;
        proc.messages.push(m);
        proc.onMessage?.(m);
      }
    });
    return proc;
  });
  const kill = () => started.forEach((p) => p.child.exitCode == null && p.child.kill('SIGKILL'));
  const timer = setTimeout(kill, timeoutMs);
  timer.unref();
  void Promise.all(started.map((p) => p.exited)).then(() => clearTimeout(timer));
  try {
    await Promise.all(started.map((p) => p.ready));
  } catch (err) {
    kill();
    throw err;
  }
  return {
    procs: started, // the same objects: `onMessage` set on them is seen by the line reader
    go: () => started.forEach((p) => p.child.stdin.write('go\n')),
    kill,
  };
}

/** Waits for every process to exit 0 and returns the last JSON line each printed. */
export async function lastMessages<M>(procs: WorkerProc<M>[]): Promise<M[]> {
  const codes = await Promise.all(procs.map((p) => p.exited));
  codes.forEach((code, i) => {
    if (code !== 0) throw new Error(`worker ${i} exited ${code}:\n${procs[i]!.stderr()}`);
  });
  return procs.map((p) => {
    const last = p.messages.at(-1);
    if (!last) throw new Error(`a worker printed no result:\n${p.stderr()}`);
    return last;
  });
}

/** In a worker: prints `ready` and resolves at `go` on stdin. */
export function goSignal(): Promise<void> {
  print('ready');
  return new Promise((resolve) => {
    const lines = createInterface({ input: process.stdin });
    lines.on('line', (line) => {
      if (line.trim() === 'go') {
        lines.close();
        resolve();
      }
    });
  });
}

/** In a worker: one line on stdout (a JSON value, or `ready`). */
export function print(value: unknown): void {
  process.stdout.write(`${typeof value === 'string' ? value : JSON.stringify(value)}\n`);
}

/** In a worker: runs `main`, prints its result and exits 0, or prints the error and exits 1. */
export function runWorker<T>(main: (task: T) => Promise<unknown>): void {
  const task = JSON.parse(process.argv[2] ?? '{}') as T;
  main(task).then(
    (result) => {
      if (result !== undefined) print(result);
      process.exit(0);
    },
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}

const LIBFAKETIME_CANDIDATES = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/faketime/libfaketimeMT.so.1',
];

/**
 * The environment that sets a process's wall clock `offset` seconds off (libfaketime, Debian
 * package `faketime`, as test/helpers/cli.ts does): only the wall clock; timers count real time.
 * Null when libfaketime is not installed.
 */
export function skewedClockEnv(offset: string): Record<string, string> | null {
  const lib = LIBFAKETIME_CANDIDATES.find((p) => existsSync(p));
  return lib ? { LD_PRELOAD: lib, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1' } : null;
}
