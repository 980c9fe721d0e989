/**
 * The runner's side of the spawner (spawner.ts): one spawner per runner (`Spawner`, owned by the
 * runner), started on the first run that needs it, and a `Launch` per run that looks like a
 * process spawned here.
 *
 * The spawner never keeps the runner alive: while it has no run, its process and channel are
 * unref'd, and a runner that exits closes the channel — which the spawner takes as its cue to
 * exit too (no run left: at once).
 *
 * When the spawner dies under live runs (killed, out of memory), their processes are orphans
 * nobody reads or waits for. The runner kills them itself — it knows their pids — SIGTERM, then
 * SIGKILL a second later, and ends each run as failed only once none of its processes is alive,
 * so that no job is still running when its lock is released. The next run starts a new spawner.
 *
 * The runs' lease (run-lease.ts): the spawner hears every renewal of the lease its runs were
 * launched under, so it can stop them when the runner itself cannot.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { fromWire } from './output-capture.js';
import { OUTPUT_DRAIN_MS, type Launch, type LaunchEnd, type OutputSink } from './job-launch.js';
import { RunProcesses } from './run-processes.js';
import type { RunLease } from './run-lease.js';
import type { SpawnerReport, SpawnerRequest } from './spawner.js';

/** The built spawner; the path works from src/execution (tests) and dist/execution alike. */
const SPAWNER = fileURLToPath(new URL('../../dist/execution/spawner.js', import.meta.url));
/** SIGTERM → SIGKILL delay for the runs of a spawner that died. */
const ORPHAN_KILL_MS = 1_000;
/**
 * A spawner that has not answered a `spawn` for this long is wedged (stopped, swapped out): it is
 * killed, and dies as above. A fire waits for its job's start (and a runner's stop waits for the
 * fire), so it must not wait long; a healthy spawner answers in milliseconds, and a runner has at
 * most a few spawns outstanding (its contentions are bounded).
 */
const ANSWER_TIMEOUT_MS = 5_000;
/** How much of the spawner's stderr a run's error quotes. */
const STDERR_TAIL_CHARS = 500;
/** A SIGKILLed run's end is reported after its output drained (at most OUTPUT_DRAIN_MS). */
const KILL_REPORT_MS = OUTPUT_DRAIN_MS + 2_000;

export interface SpawnRequest {
  file: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  tailBytes?: number | undefined;
  /** Where the run's whole output goes; without it only the tail is kept. */
  output?: OutputSink | undefined;
  /** Masked in what is kept of the output. */
  secrets?: readonly string[] | undefined;
  /** The lease the run goes on under; the spawner stops it when the lease lapses. */
  lease?: RunLease | undefined;
}

interface PendingRun {
  pid: number | undefined;
  output: OutputSink | undefined;
  started(pid: number | undefined): void;
  leaderExited(): void;
  ended(end: LaunchEnd): void;
}

/** One spawner process and the runs it was given. */
class SpawnerProcess {
  private readonly child: ChildProcess;
  private readonly runs = new Map<number, PendingRun>();
  private nextId = 1;
  /** False from its exit on: new runs go to a new spawner. */
  alive = true;
  /** Its death has been dealt with ('error' without a process, then maybe 'close'). */
  private buried = false;
  /** Why the runner killed it, when it did. */
  private killedBecause: string | null = null;
  /** The end of what it wrote to stderr (nothing, unless it could not start or crashed). */
  private stderrTail = '';
  /** The lease its runs go on under, and how to stop hearing it. */
  private lease: { of: RunLease; release: () => void } | null = null;

  constructor(private readonly processes: RunProcesses) {
    this.child = spawn(process.execPath, [SPAWNER], {
      // Its own session (see spawner.ts), and nothing of the runner's environment.
      detached: true,
      env: {},
      // stderr: what Node says when it cannot start it (a missing shared library, say) is the
      // only clue to why every command run fails; its tail goes into the runs' error.
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.child.stderr?.on('data', (d: Buffer) => {
      this.stderrTail = (this.stderrTail + d.toString()).slice(-STDERR_TAIL_CHARS);
    });
    this.child.on('message', (msg: SpawnerReport) => this.receive(msg));
    this.child.once('exit', () => {
      this.alive = false;
      this.lease?.release();
    });
    this.child.on('error', (err) => {
      // No process at all (spawn failed): 'close' may never come.
      if (this.child.pid == null) this.died(`could not be started: ${err.message}`);
    });
    // 'close' comes after the channel's last message: every report sent before it died is in.
    this.child.once('close', (code, signal) => {
      const how =
        this.killedBecause ?? (signal ? `killed by ${signal}` : `exited with code ${code}`);
      const said = this.stderrTail.trim();
      this.died(said ? `${how}: ${said}` : how);
    });
    this.hold(false);
  }

  launch(req: SpawnRequest): Launch {
    if (req.lease) this.followLease(req.lease);
    const id = this.nextId++;
    let resolveStarted!: () => void;
    let resolveLeaderExited!: () => void;
    let resolveEnded!: (end: LaunchEnd) => void;
    const started = new Promise<void>((resolve) => (resolveStarted = resolve));
    const leaderExited = new Promise<void>((resolve) => (resolveLeaderExited = resolve));
    const ended = new Promise<LaunchEnd>((resolve) => (resolveEnded = resolve));
    const run: PendingRun = {
      pid: undefined,
      output: req.output,
      started(pid) {
        run.pid = pid;
        resolveStarted();
      },
      leaderExited: resolveLeaderExited,
      ended(end) {
        resolveStarted();
        resolveLeaderExited();
        resolveEnded(end);
      },
    };
    const unanswered = setTimeout(() => {
      this.killedBecause ??= `it did not answer for ${ANSWER_TIMEOUT_MS / 1000} s and was killed`;
      this.child.kill('SIGKILL');
    }, ANSWER_TIMEOUT_MS);
    void started.then(() => clearTimeout(unanswered));
    this.runs.set(id, run);
    this.hold(true);
    const { file, args, cwd, env, tailBytes } = req;
    this.send({
      kind: 'spawn',
      id,
      file,
      args,
      cwd,
      env: env as Record<string, string>,
      tailBytes,
      outputMax: req.output?.maxBytes ?? null,
      secrets: [...(req.secrets ?? [])],
    });
    return {
      get pid() {
        return run.pid;
      },
      started,
      leaderExited,
      ended,
      signal: (signal) => {
        if (!this.runs.has(id)) return;
        // With its pid known the runner signals the group itself (as when the spawner died): a
        // spawner that is stopped or stuck in a spawn() must not keep a timeout, a lost lock
        // session or a stop from reaching the run. Before that, the kill follows the spawn.
        if (run.pid == null) this.send({ kind: 'kill', id, signal });
        else this.processes.signalRun(run.pid, signal);
        if (signal !== 'SIGKILL') return;
        // The end of a killed run is the spawner's to report; one that does not is wedged.
        const unreported = setTimeout(() => {
          if (!this.runs.has(id)) return;
          this.killedBecause ??= 'it did not report a killed run and was killed';
          this.child.kill('SIGKILL');
        }, KILL_REPORT_MS);
        void ended.then(() => clearTimeout(unreported));
      },
    };
  }

  /** Closes the channel: the spawner exits (see Spawner.close). */
  close(): void {
    // A run still going ends as at a runner's death, and its error says who let the spawner go.
    this.killedBecause ??= 'its runner let it go';
    if (this.child.connected) this.child.disconnect();
  }

  /** From now on the spawner hears every renewal of `lease`, starting with what is left of it. */
  private followLease(lease: RunLease): void {
    if (this.lease?.of === lease) return;
    this.lease?.release();
    const release = lease.hold((ms) => this.send({ kind: 'lease', ms }));
    this.lease = { of: lease, release };
    const remaining = lease.remainingMs;
    if (remaining != null) this.send({ kind: 'lease', ms: remaining });
  }

  private send(msg: SpawnerRequest): void {
    // A send that fails means the spawner is dying: its 'close' ends the runs.
    if (this.child.connected) this.child.send(msg, (err) => void err);
  }

  private receive(msg: SpawnerReport): void {
    const run = this.runs.get(msg.id);
    if (!run) return;
    switch (msg.kind) {
      case 'started':
        run.started(msg.pid);
        return;
      case 'leader-exit':
        run.leaderExited();
        return;
      case 'output':
        run.output?.deliver(fromWire(msg.chunks), msg.final);
        return;
      case 'spawn-error':
        this.finish(msg.id, { kind: 'spawn-error', code: msg.code, message: msg.message });
        return;
      case 'exit': {
        const { code, signal, outputTail, lapsedMs } = msg;
        this.finish(msg.id, {
          kind: 'exit',
          code,
          signal,
          outputTail,
          endedAt: new Date(msg.endedAt),
          ...(lapsedMs != null ? { lapsedMs } : {}),
        });
        return;
      }
    }
  }

  private finish(id: number, end: LaunchEnd): void {
    const run = this.runs.get(id);
    if (!run) return;
    this.runs.delete(id);
    if (this.runs.size === 0) this.hold(false);
    run.ended(end);
  }

  /** Keeps the runner's event loop alive for the spawner while it has runs, and only then. */
  private hold(live: boolean): void {
    // Its stderr pipe never keeps the runner alive: it says something only when it dies.
    (this.child.stderr as { unref?: () => void } | null)?.unref?.();
    if (live) {
      this.child.ref();
      this.child.channel?.ref();
    } else {
      this.child.unref();
      this.child.channel?.unref();
    }
  }

  /** The spawner is gone: its live runs are killed here and end failed (see the header). */
  private died(how: string): void {
    this.alive = false;
    if (this.buried) return;
    this.buried = true;
    if (this.runs.size === 0) return;
    const error = `baton's spawner process died (${how}); the run's processes were killed`;
    for (const [id, run] of this.runs) {
      // Each run ends when the last of its processes is gone (run-processes.ts), not before.
      const over =
        run.pid == null ? Promise.resolve() : this.processes.endRun(run.pid, ORPHAN_KILL_MS);
      void over.then(() => this.finish(id, { kind: 'lost', error, endedAt: new Date() }));
    }
  }
}

/**
 * A root's spawner (a runner's, a foreground session's: each has its own, so that several runners
 * in one process — library mode, the in-process tests — each keep their own runs and lease): one
 * process, started by `prepare` or by the first run that needs one, and again after one died.
 */
export class Spawner {
  private process: SpawnerProcess | null = null;

  /**
   * `processes`: the watch of its runs' processes (run-processes.ts), its own unless its root
   * gives one; the root's other launchers (warm hosts, runs started in the runner) share it.
   */
  constructor(readonly processes: RunProcesses = new RunProcesses()) {}

  /**
   * Starts the spawner now if there is none alive. A runner calls it at start, so that its first
   * run does not wait for Node to boot the spawner (some 50 ms); without it, the first run does.
   */
  prepare(): SpawnerProcess {
    if (!this.process?.alive) this.process = new SpawnerProcess(this.processes);
    return this.process;
  }

  /** Starts a job's process through this spawner. */
  launch(req: SpawnRequest): Launch {
    return this.prepare().launch(req);
  }

  /**
   * Lets the spawner go (the root stops): its channel is closed, so it exits — at once with no
   * run left, and a run still going is stopped as at a runner's death (spawner.ts).
   */
  close(): void {
    this.process?.close();
    this.process = null;
    this.processes.close();
  }
}
