/**
 * Runs one job in a child process and reports how it ended.
 *
 * Command jobs are spawned from their argv (no shell unless `shell: true`); module jobs run in
 * `module-host.js` (through tsx for TypeScript files). The child gets its own process group so
 * that stopping a run stops everything it started (`kill(-pgid)`), not just the first process.
 * stdout and stderr are kept as a bounded tail for the history; with `tee` they are also passed
 * through to this process (`baton run` in the foreground).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { JobDefinition } from '../config/schema.js';
import { fireEnvironment, type FireInfo } from './job-context.js';
import type { HostMessage } from './module-host.js';
import { OutputTail } from './output-tail.js';

export interface JobResult {
  status: 'done' | 'failed';
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** One line for the history's `error` column; null on success. */
  error: string | null;
  outputTail: string;
}

export interface RunningJob {
  readonly pid: number | undefined;
  readonly result: Promise<JobResult>;
  /**
   * Asks the run to stop: SIGTERM to its process group, SIGKILL after `graceMs`. Resolves when
   * the process has exited. `why` becomes the run's error.
   */
  stop(why: string, graceMs: number): Promise<JobResult>;
}

export interface StartOptions {
  tee?: boolean;
  tailBytes?: number;
}

/** The built host; the path works from src/execution (tests) and dist/execution alike. */
const MODULE_HOST = fileURLToPath(new URL('../../dist/execution/module-host.js', import.meta.url));
const TYPESCRIPT_FILE = /\.[cm]?tsx?$/;

function commandLine(job: JobDefinition): { file: string; args: string[] } {
  const { target } = job;
  switch (target.kind) {
    case 'command':
      return { file: target.argv[0]!, args: target.argv.slice(1) };
    case 'shell':
      return { file: '/bin/sh', args: ['-c', target.script] };
    case 'module': {
      const loader = TYPESCRIPT_FILE.test(target.path)
        ? ['--import', import.meta.resolve('tsx')]
        : [];
      return { file: process.execPath, args: [...loader, MODULE_HOST] };
    }
  }
}

export function startJob(
  job: JobDefinition,
  fire: FireInfo,
  options: StartOptions = {},
): RunningJob {
  const { file, args } = commandLine(job);
  const isModule = job.target.kind === 'module';
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...job.env,
    ...fireEnvironment(fire),
    ...(job.target.kind === 'module' ? { BATON_MODULE: job.target.path } : {}),
  };
  const tail = new OutputTail(options.tailBytes);
  let stopReason: string | null = null;
  let hostError: string | null = null;
  let spawnError: string | null = null;

  const child: ChildProcess = spawn(file, args, {
    cwd: job.cwd,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', ...(isModule ? (['ipc'] as const) : [])],
  });
  const capture = (sink: NodeJS.WriteStream) => (chunk: Buffer) => {
    tail.push(chunk);
    if (options.tee) sink.write(chunk);
  };
  child.stdout?.on('data', capture(process.stdout));
  child.stderr?.on('data', capture(process.stderr));
  child.on('message', (msg: HostMessage) => {
    if (msg?.kind === 'error') hostError = msg.message;
  });

  const result = new Promise<JobResult>((resolve) => {
    child.once('error', (err: NodeJS.ErrnoException) => {
      // spawn failed (ENOENT, EACCES): there is no process and 'close' may never come.
      spawnError =
        err.code === 'ENOENT'
          ? `command not found: ${file}`
          : `cannot start ${file}: ${err.message}`;
      if (child.pid == null) resolve(verdict(null, null));
    });
    child.once('close', (code, signal) => resolve(verdict(code, signal)));
  });

  function verdict(code: number | null, signal: NodeJS.Signals | null): JobResult {
    const ok = code === 0 && stopReason == null && spawnError == null;
    let error: string | null = null;
    if (!ok) {
      error =
        spawnError ??
        stopReason ??
        hostError ??
        (signal ? `killed by ${signal}` : `exited with code ${code}`);
    }
    return {
      status: ok ? 'done' : 'failed',
      exitCode: code,
      signal,
      error,
      outputTail: tail.toString(),
    };
  }

  const signalGroup = (sig: NodeJS.Signals) => {
    if (child.pid == null) return;
    try {
      process.kill(-child.pid, sig);
    } catch {
      // Already gone.
    }
  };

  return {
    pid: child.pid,
    result,
    async stop(why, graceMs) {
      stopReason ??= why;
      signalGroup('SIGTERM');
      const timer = setTimeout(() => signalGroup('SIGKILL'), graceMs);
      try {
        return await result;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
