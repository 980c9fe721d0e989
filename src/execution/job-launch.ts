/**
 * Starting a job's process and seeing it end, the same way wherever it is started: in the runner
 * (module jobs, `baton run`) or in the spawner (spawner.ts, the daemon's command jobs).
 *
 * The process gets a session of its own (`detached`), so that stopping a run stops everything it
 * started (run-processes.ts), not just the first process. stdout and stderr go into a bounded
 * tail, and into the run's whole output when it is kept (output-capture.ts, handed on as it
 * comes). The run ends when none of its processes is alive (run-processes.ts says why):
 * `leaderExited` tells when its first process has exited — what that left behind (`cmd &`, a
 * wrapper's child still cleaning up) is then the run's owner's to stop (job-process.ts) — and
 * `ended` comes only when nothing of the run is alive. Its output is then read until it closes,
 * for at most OUTPUT_DRAIN_MS: a process that left the run (`setsid`) may hold stdout open and
 * must not keep the run (and the job's lock) alive. Watching signals nothing: who stops what
 * stays with the owner of the run.
 *
 * Imports stay within node: and this folder: the spawner loads this file and must stay small.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { OutputCapture, type OutputChunk, type OutputStream } from './output-capture.js';
import type { OutputTail } from './output-tail.js';
import { SecretMask } from './secret-mask.js';
import type { RunProcesses } from './run-processes.js';

/** How long to wait for a job's output to close after its process exited. */
export const OUTPUT_DRAIN_MS = 1_000;
/** How often the head of a running job's output is handed on (a few writes a second at most). */
export const OUTPUT_FLUSH_MS = 250;

/**
 * Where a run's whole output goes (output-capture.ts): up to `maxBytes` of it, handed to
 * `deliver` in order — the head while the job runs, every OUTPUT_FLUSH_MS, and the rest at its
 * end, before the run is reported ended.
 */
export interface OutputSink {
  maxBytes: number;
  /** `final`: the last delivery of the run (its process has ended). */
  deliver(chunks: OutputChunk[], final: boolean): void;
}

/** How a launched process ended. */
export type LaunchEnd =
  /** There was no process: `spawn` failed (ENOENT, EACCES, …). */
  | { kind: 'spawn-error'; code: string | undefined; message: string }
  | {
      kind: 'exit';
      code: number | null;
      signal: NodeJS.Signals | null;
      /** When the process exited (this host's clock). */
      endedAt: Date;
      outputTail: string;
      /** Its watchdog stopped it: the runner's lease lapsed this long after its last renewal. */
      lapsedMs?: number;
    }
  /** The process was lost track of and killed (the spawner died); `error` says why. */
  | { kind: 'lost'; error: string; endedAt: Date };

/** A job's process as the runner sees it, wherever it was spawned. */
export interface Launch {
  /** The first process's id (and its session's), once `started` has settled; undefined without one. */
  readonly pid: number | undefined;
  /** Settles when the process exists or could not be started. */
  readonly started: Promise<void>;
  /** Settles when the first process has exited (or never started); the run may live on. */
  readonly leaderExited: Promise<void>;
  /** Settles when no process of the run is alive any more. */
  readonly ended: Promise<LaunchEnd>;
  /** Sends `signal` to every process of the run (run-processes.ts; nothing when it is gone). */
  signal(signal: NodeJS.Signals): void;
}

export interface GroupChildOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  tail: OutputTail;
  /** The whole output, bounded, for the history; without it only the tail is kept. */
  output?: OutputSink | undefined;
  /** Masked as `***` in what is kept of the output (secret-mask.ts); not in what is teed. */
  secrets?: readonly string[] | undefined;
  /**
   * Pass the output through to this process's stdout/stderr (foreground `baton run`); `stderr`:
   * both to stderr, so that stdout carries only `baton run --json`'s document.
   */
  tee?: boolean | 'stderr';
  /** An IPC channel to the child (module jobs). */
  ipc?: boolean;
  /** Called when the process group is empty (the run is over), before the drain. */
  onGroupGone?: () => void;
  /** Its root's watch of the runs' processes (run-processes.ts): signals, and the run's end. */
  processes: RunProcesses;
}

export interface GroupChild extends Launch {
  readonly child: ChildProcess;
}

/** Spawns `file` in a process group of its own (see the header). */
export function spawnGroupChild(
  file: string,
  args: readonly string[],
  options: GroupChildOptions,
): GroupChild {
  const child = spawn(file, args, {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', ...(options.ipc ? (['ipc'] as const) : [])],
  });
  return watchGroupChild(child, options);
}

/** Output a process wrote before it became a run (a warm module host: a warning of Node's). */
export interface EarlyOutput {
  stream: OutputStream;
  bytes: Buffer;
}

/**
 * Tails, captures and sees the end of `child`, spawned by spawnGroupChild or ahead of need
 * (warm-hosts.ts, `detached` as there): the run's output then starts with `earlier`, what the
 * process wrote before it was handed the run.
 */
export function watchGroupChild(
  child: ChildProcess,
  options: Omit<GroupChildOptions, 'cwd' | 'env' | 'ipc'>,
  earlier: readonly EarlyOutput[] = [],
): GroupChild {
  const { tail, tee = false } = options;
  const whole = options.output && new OutputCapture(options.output.maxBytes);
  const hand = (chunks: OutputChunk[], final = false) => {
    if (chunks.length > 0 || final) options.output!.deliver(chunks, final);
  };
  const flusher = whole && setInterval(() => hand(whole.takeLive()), OUTPUT_FLUSH_MS);
  const masks = {
    1: new SecretMask(options.secrets ?? []),
    2: new SecretMask(options.secrets ?? []),
  };
  const keep = (stream: OutputStream, bytes: Buffer) => {
    if (bytes.length === 0) return;
    tail.push(bytes);
    whole?.push(stream, bytes);
  };
  const capture = (sink: NodeJS.WriteStream, stream: OutputStream) => (chunk: Buffer) => {
    keep(stream, masks[stream].push(chunk));
    if (tee) sink.write(chunk);
  };
  const onOut = capture(tee === 'stderr' ? process.stderr : process.stdout, 1);
  const onErr = capture(process.stderr, 2);
  for (const early of earlier) (early.stream === 1 ? onOut : onErr)(early.bytes);
  child.stdout?.on('data', onOut);
  child.stderr?.on('data', onErr);
  let handedRest = false;
  const handRest = () => {
    if (handedRest) return;
    handedRest = true;
    clearInterval(flusher);
    keep(1, masks[1].end());
    keep(2, masks[2].end());
    if (whole) hand(whole.finish(), true);
  };

  const signal = (sig: NodeJS.Signals) => {
    if (child.pid != null) options.processes.signalRun(child.pid, sig);
  };
  let leaderGone!: () => void;
  const leaderExited = new Promise<void>((resolve) => (leaderGone = resolve));
  const ended = new Promise<LaunchEnd>((resolve) => {
    child.on('error', (err: NodeJS.ErrnoException) => {
      // spawn failed (ENOENT, EACCES): there is no process and 'close' may never come.
      if (child.pid != null) return; // a later error (a failed kill): the exit still comes
      clearInterval(flusher);
      leaderGone();
      resolve({ kind: 'spawn-error', code: err.code, message: err.message });
    });
    child.once('exit', (code, signal) => {
      // Listened for now: the output may close while the rest of the group is waited for.
      const closed = new Promise<void>((done) => child.once('close', done));
      leaderGone();
      // The first process is gone, and maybe not the rest of the run (see the header).
      const over = child.pid == null ? Promise.resolve() : options.processes.whenRunGone(child.pid);
      void over.then(() => {
        const endedAt = new Date();
        options.onGroupGone?.();
        const end = () => {
          handRest();
          resolve({ kind: 'exit', code, signal, endedAt, outputTail: tail.toString() });
        };
        const timer = setTimeout(() => {
          child.stdout?.destroy();
          child.stderr?.destroy();
          end();
        }, OUTPUT_DRAIN_MS);
        void closed.then(() => {
          clearTimeout(timer);
          end();
        });
      });
    });
  });
  return {
    child,
    pid: child.pid,
    // spawn() is synchronous: the process exists now, or its 'error' is on its way.
    started: Promise.resolve(),
    leaderExited,
    ended,
    signal,
  };
}
