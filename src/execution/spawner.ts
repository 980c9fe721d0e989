/**
 * The spawner: a small long-lived process beside each runner that starts the daemon's command
 * jobs, and the watchdog of all of them.
 *
 * Why a process of its own: `child_process.spawn()` is synchronous in Node (fork, then wait for
 * the child's exec), and its cost grows with the parent's memory — about 1 ms for a 50 MiB
 * process, 15 ms for a 250 MiB runner with hundreds of jobs. When hundreds of fires come on the
 * same second, a runner that spawns them itself spends seconds inside spawn(), and every fire
 * behind them waits: its claim is written late. This process holds nothing but its runs, so a
 * spawn costs it little, and the runner's event loop only sends a message.
 *
 * The protocol (IPC, JSON): the runner sends `spawn` {id, file, args, cwd, env}, `kill`
 * {id, signal} and `lease` {ms}; the spawner answers `started` {pid} or `spawn-error` {code,
 * message}, `output` {chunks} while it runs (when asked for with `outputMax`), `leader-exit` when
 * its first process has exited (what that left behind is the runner's to stop: job-process.ts),
 * and at the end, when none of its processes is alive (run-processes.ts), `exit` {code, signal,
 * outputTail, endedAt, lapsedMs}. Each run is started, tailed and ended by job-launch.ts exactly
 * as the runner does it for the jobs it spawns itself (a session of its own, output drained at
 * most OUTPUT_DRAIN_MS). A run stays in `runs` until its end, so a kill, a lapsed lease or the
 * runner's death still reaches what it left behind. Messages arrive in order, so a `kill` always
 * finds the run its `spawn` started.
 *
 * The watchdog: a run never outlives its runner (job-process.ts says why). The kernel closes the
 * IPC channel when the runner dies, however it dies (`kill -9` too); the spawner then SIGTERMs
 * every process of every live run, SIGKILLs them a second later, and exits. It lives in a session
 * of its own (the runner starts it detached), so a Ctrl-C at the runner's terminal does not take
 * it down before the runner. The other way round — the spawner dies under live runs — is the
 * runner's to notice (spawner-client.ts).
 *
 * The lease (run-lease.ts says why): a runner that is alive but stalled closes no channel, so the
 * runner renews its runs' lease with a `lease` message at every heartbeat its lock session gets
 * answered. When a lease lapses (or is revoked: `ms` 0), the spawner stops every run as it does
 * for a dead runner, reports their ends with `lapsedMs` (how long the runner had been silent),
 * and refuses new spawns (`spawn-error` ELEASE) until the next renewal. Before the first
 * renewal there is no lease to lapse.
 *
 * Imports stay within node: and this folder (no mysql2, pino, zod): its memory is what makes its
 * spawns cheap. It is started with an empty environment: the runner's (and its database URL) is
 * none of its business; each job's environment comes with its `spawn` message.
 */
import { spawnGroupChild, type Launch } from './job-launch.js';
import { RunProcesses } from './run-processes.js';
import { ExitCode } from '../exit-codes.js';
import { inGroups, toWire, type WireChunk } from './output-capture.js';
import { OutputTail } from './output-tail.js';

/** Output bytes per `output` message at most. */
const WIRE_GROUP_BYTES = 1024 * 1024;

/** Runner → spawner. */
export type SpawnerRequest =
  | {
      kind: 'spawn';
      id: number;
      file: string;
      args: string[];
      cwd: string;
      env: Record<string, string>;
      tailBytes: number | undefined;
      /** Keep the run's whole output up to this many bytes and send it on; null: the tail only. */
      outputMax: number | null;
      /** Masked in what is kept of the output. */
      secrets: string[];
    }
  | { kind: 'kill'; id: number; signal: NodeJS.Signals }
  /** The runner vouches for its lock session for `ms` from now; 0 revokes (the session is gone). */
  | { kind: 'lease'; ms: number };

/** Spawner → runner. */
export type SpawnerReport =
  | { kind: 'started'; id: number; pid: number }
  /** The run's first process has exited; its group may live on until `exit`. */
  | { kind: 'leader-exit'; id: number }
  | { kind: 'spawn-error'; id: number; code: string | undefined; message: string }
  /** Output of a run, in order; always before its `exit`. */
  | { kind: 'output'; id: number; chunks: WireChunk[]; final: boolean }
  | {
      kind: 'exit';
      id: number;
      code: number | null;
      signal: NodeJS.Signals | null;
      outputTail: string;
      /** Epoch milliseconds. */
      endedAt: number;
      /** The run was stopped because the lease lapsed, this long after its last renewal. */
      lapsedMs?: number;
    };

/** SIGTERM → SIGKILL delay for the runs of a runner that died (as the old `sh` watchdog). */
const ORPHAN_KILL_MS = 1_000;

/** This process's watch of its runs' processes (run-processes.ts). */
const processes = new RunProcesses();

/** The runs started and not yet reported ended, by the runner's id. */
const runs = new Map<number, Launch>();
/** Runs stopped by a lapsed lease: how long the runner had been silent then. */
const lapsed = new Map<number, number>();

/** The lease (see the header): null until the first renewal. */
let lease: { renewedAt: number; until: number; timer: NodeJS.Timeout | undefined } | null = null;

function leaseValid(): boolean {
  return lease == null || performance.now() < lease.until;
}

function renewLease(ms: number): void {
  const now = performance.now();
  clearTimeout(lease?.timer);
  if (ms <= 0) {
    lease = { renewedAt: lease?.renewedAt ?? now, until: now, timer: undefined };
    stopUnderLapsedLease();
    return;
  }
  lease = { renewedAt: now, until: now + ms, timer: setTimeout(stopUnderLapsedLease, ms) };
}

/** The lease lapsed: no run of this runner may go on (see the header). */
function stopUnderLapsedLease(): void {
  const silentMs = performance.now() - (lease?.renewedAt ?? performance.now());
  const stopping = [...runs].filter(([id]) => !lapsed.has(id));
  for (const [id, run] of stopping) {
    lapsed.set(id, silentMs);
    run.signal('SIGTERM');
  }
  if (stopping.length === 0) return;
  setTimeout(() => {
    for (const [id, run] of stopping) if (runs.has(id)) run.signal('SIGKILL');
  }, ORPHAN_KILL_MS);
}

function report(msg: SpawnerReport): void {
  // The runner is gone: the disconnect handler takes care of what is left.
  if (process.connected) process.send!(msg, (err: Error | null) => void err);
}

function start(req: Extract<SpawnerRequest, { kind: 'spawn' }>): void {
  const { id } = req;
  if (!leaseValid()) {
    const message = "the runner's lease had lapsed: it could not vouch for its lock session";
    report({ kind: 'spawn-error', id, code: 'ELEASE', message });
    return;
  }
  let run: Launch;
  try {
    run = spawnGroupChild(req.file, req.args, {
      cwd: req.cwd,
      env: req.env,
      tail: new OutputTail(req.tailBytes),
      secrets: req.secrets,
      processes,
      output:
        req.outputMax == null
          ? undefined
          : {
              maxBytes: req.outputMax,
              // At most a MiB a message: a run's tail of many MiB would block both event loops
              // while it is serialised and parsed, heartbeats included.
              deliver: (chunks, final) => {
                const groups = inGroups(chunks, WIRE_GROUP_BYTES);
                if (groups.length === 0) groups.push([]);
                groups.forEach((group, i) =>
                  report({
                    kind: 'output',
                    id,
                    chunks: toWire(group),
                    final: final && i === groups.length - 1,
                  }),
                );
              },
            },
    });
  } catch (err) {
    // A synchronous throw (an argument spawn() refuses): one failed run, not a dead spawner.
    const code = (err as NodeJS.ErrnoException).code;
    report({ kind: 'spawn-error', id, code, message: (err as Error).message });
    return;
  }
  runs.set(id, run);
  if (run.pid != null) report({ kind: 'started', id, pid: run.pid });
  void run.leaderExited.then(() => {
    if (runs.has(id)) report({ kind: 'leader-exit', id });
  });
  void run.ended.then((end) => {
    runs.delete(id);
    const lapsedMs = lapsed.get(id);
    lapsed.delete(id);
    if (end.kind === 'spawn-error') report({ id, ...end });
    else if (end.kind === 'exit') {
      const { code, signal, outputTail, endedAt } = end;
      report({
        kind: 'exit',
        id,
        code,
        signal,
        outputTail,
        endedAt: endedAt.getTime(),
        ...(lapsedMs != null ? { lapsedMs } : {}),
      });
    }
  });
}

/** The runner died: its runs go with it (see the header). */
function killOrphans(): void {
  const orphans = [...runs.values()];
  for (const run of orphans) run.signal('SIGTERM');
  if (orphans.length === 0) process.exit(0);
  setTimeout(() => {
    for (const run of orphans) run.signal('SIGKILL');
    process.exit(0);
  }, ORPHAN_KILL_MS);
}

if (!process.send || !process.connected) {
  process.stderr.write('the spawner is started by `baton start`, with an IPC channel\n');
  process.exit(ExitCode.Usage);
}
process.on('message', (req: SpawnerRequest) => {
  if (req?.kind === 'spawn') start(req);
  else if (req?.kind === 'kill') runs.get(req.id)?.signal(req.signal);
  else if (req?.kind === 'lease') renewLease(req.ms);
});
process.once('disconnect', killOrphans);
