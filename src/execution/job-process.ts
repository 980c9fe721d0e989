/**
 * Runs one job in a child process and reports how it ended.
 *
 * Command jobs are spawned from their argv (no shell unless `shell: true`); module jobs run in
 * `module-host.js` (through tsx for TypeScript files). The child gets a session of its own so
 * that stopping a run stops everything it started (run-processes.ts), not just the first process.
 * stdout and stderr are kept as a bounded tail for the history; with `tee` they are also passed
 * through to this process (`baton run` in the foreground). job-launch.ts starts the process and
 * sees it end, wherever it runs.
 *
 * Where the process is spawned: the daemon's command and shell jobs go through the runner's
 * spawner (spawner.ts), because spawn() blocks the runner's event loop, longer the bigger the
 * runner, and a storm of fires would wait behind it. The spawner is also their watchdog. Two
 * kinds of run are still spawned here, with a watchdog each (below): module jobs, which talk to
 * the runner over an IPC channel of their own (`ctx.db`'s connection settings), and `tee` runs
 * (`baton run` in the foreground), whose output goes to this process's terminal — one run per
 * process, where a spawner would cost a process more and save nothing.
 *
 * A daemon's module run starts in a warm host when one is waiting (warm-hosts.ts): the process
 * was spawned ahead of need, and the run is handed to it here; from then on it is watched exactly
 * like a process spawned for the run (the same pid and process group, watchdog, lease, output).
 *
 * A run never outlives its runner: a run spawned here gets a watchdog of its own (watchdog.ts),
 * started before it, which stops all its processes when the runner dies or its lease lapses. The
 * spawner does the same for all its runs at once, with its IPC channel as the pipe, and keeps the
 * lease of its runs itself.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { JobDefinition } from '../config/schema.js';
import type { FinalStatus } from '../run-status.js';
import { truncate } from '../text.js';
import { TSX_MISSING, TYPESCRIPT_FILE, tsxLoader } from '../typescript-jobs.js';
import { fireEnvironment, type FireInfo } from './job-context.js';
import { inheritedEnvironment } from './job-environment.js';
import type { DatabaseTarget } from '../config/database-url.js';
import {
  spawnGroupChild,
  watchGroupChild,
  type GroupChild,
  type Launch,
  type LaunchEnd,
  type OutputSink,
} from './job-launch.js';
import type { HostMessage, InitMessage, WarmRun } from './module-host.js';
import { OutputTail } from './output-tail.js';
import { LEFTOVER_GRACE_MS } from './run-processes.js';
import { maskText } from './secret-mask.js';
import { lapsedLeaseReason, type RunLease } from './run-lease.js';
import type { Spawner } from './spawner-client.js';
import { hostKind, type WarmHost, type WarmHosts } from './warm-hosts.js';
import { startWatchdog, type Watchdog } from './watchdog.js';

export interface JobResult {
  /** `done` or `failed` by the job's own exit; the others when the runner stopped it. */
  status: FinalStatus;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** One line for the history's `error` column; null on success. */
  error: string | null;
  outputTail: string;
  /** When the process ended (this host's clock). */
  endedAt: Date;
  /**
   * The job may still be running: an in-process handler (library mode) that ignored its abort
   * past the grace. No retry may start beside it (fire/run-fire.ts: `retryable`).
   */
  mayStillRun?: boolean;
}

export interface RunningJob {
  /** The job's first process's id (and its session's), once `started` has settled. */
  readonly pid: number | undefined;
  /** Settles when the process exists or could not be started (the spawner answers later). */
  readonly started: Promise<void>;
  readonly result: Promise<JobResult>;
  /**
   * Asks the run to stop: SIGTERM to all its processes, SIGKILL after `graceMs`. Resolves when
   * no process of the group is alive any more. `why` becomes the run's error and `status` its status (the first
   * stop request wins: a timeout that is then interrupted stays a timeout).
   */
  stop(why: string, graceMs: number, status: StopStatus): Promise<JobResult>;
}

/** Why the runner stopped a run. */
export type StopStatus = Exclude<FinalStatus, 'done'>;

export interface StartOptions {
  /** See GroupChildOptions.tee. */
  tee?: boolean | 'stderr';
  tailBytes?: number;
  /** Where the run's whole output goes (bounded), as it comes; without it only the tail. */
  output?: OutputSink | undefined;
  /** Masked as `***` in the kept output and tail: passwords, `secretEnv` values. */
  secrets?: readonly string[] | undefined;
  /** The database a module job gets as `ctx.db` (sent over IPC, never put in the environment). */
  database?: DatabaseTarget | null;
  /** baton's own database's name: where a run's fence is checked (sdk/fence.ts). */
  batonDatabase?: string;
  /**
   * Variables of the runner's environment that no job inherits: those that hold the URLs of
   * `connections:` (with their passwords) and of the notification targets (config/connections.ts:
   * withheldVariables). A job reaches its database through `ctx.db`.
   */
  withholdEnv?: readonly string[];
  /** The runner's lease on its runs: a run whose lease lapses is stopped and recorded `lost`. */
  lease?: RunLease | undefined;
  /** Where the process comes from: the root's spawner and warm hosts. */
  launchers: Launchers;
}

/**
 * What a composition root (a runner, a foreground session) owns to start its jobs' processes:
 * its spawner, the module hosts it keeps warm (none for a root that warms none), and in library
 * mode the application's handlers (in-process.ts), which run in this process.
 */
export interface Launchers {
  spawner: Spawner;
  warmHosts?: WarmHosts;
  inProcess?: InProcessLauncher;
}

/** Starts a run of a handler job in this process (in-process.ts: `InProcessJobs`). */
export interface InProcessLauncher {
  start(job: JobDefinition, fire: FireInfo, options: StartOptions): RunningJob;
}

/** The built host; the path works from src/execution (tests) and dist/execution alike. */
const MODULE_HOST = fileURLToPath(new URL('../../dist/execution/module-host.js', import.meta.url));
/** The process of a module job that cannot run: it reports `argv[1]` as the run's error. */
const CANNOT_RUN =
  "const message = process.argv[1]; process.stderr.write(message + '\\n'); " +
  "process.send({ kind: 'error', message }, () => process.exit(78));";
/** The spawner's `spawn-error` code for a spawn refused under a lapsed lease. */
const LEASE_REFUSED = 'ELEASE';
/** The history's `error` is one line for humans; the details are in the output tail. */
const ERROR_MAX = 2_000;

function describeSpawnError(
  err: { code: string | undefined; message: string },
  file: string,
  cwd: string,
): string {
  if (err.code === 'ENOENT') {
    return existsSync(cwd) ? `command not found: ${file}` : `working directory not found: ${cwd}`;
  }
  if (err.code === 'EACCES') return `permission denied: ${file}`;
  return `cannot start ${file}: ${err.message}`;
}

function commandLine(job: JobDefinition): { file: string; args: string[] } {
  const { target } = job;
  switch (target.kind) {
    case 'command':
      return { file: target.argv[0]!, args: target.argv.slice(1) };
    case 'shell':
      return { file: '/bin/sh', args: ['-c', target.script] };
    case 'module': {
      if (!TYPESCRIPT_FILE.test(target.path))
        return { file: process.execPath, args: [MODULE_HOST] };
      // Checked when the schedules file was loaded; tsx may have been removed since. Then the
      // run fails (exit 78) with the reason as its error, like a job that threw.
      const loader = tsxLoader();
      if (loader == null) {
        return {
          file: process.execPath,
          args: ['-e', CANNOT_RUN, `${target.path} ${TSX_MISSING}`],
        };
      }
      return { file: process.execPath, args: ['--import', loader, MODULE_HOST] };
    }
    case 'handler':
      throw new Error(`${job.name} is an in-process handler: it has no process to start`);
  }
}

/** A warm host for this run, if one waits (never for `tee` runs: one run per process). */
function warmHostFor(job: JobDefinition, options: StartOptions): WarmHost | null {
  const kind = options.tee ? null : hostKind(job);
  // A directory gone since the load: the cold start's spawn names it.
  return kind && existsSync(kind.cwd) ? (options.launchers.warmHosts?.take(kind) ?? null) : null;
}

export function startJob(job: JobDefinition, fire: FireInfo, options: StartOptions): RunningJob {
  const inProcess = options.launchers.inProcess;
  if (job.target.kind === 'handler' && inProcess) return inProcess.start(job, fire, options);
  const { file, args } = commandLine(job);
  const isModule = job.target.kind === 'module';
  const env: NodeJS.ProcessEnv = {
    ...inheritedEnvironment(new Set(options.withholdEnv ?? [])),
    ...job.env,
    ...fireEnvironment(fire, options.batonDatabase),
    ...(job.target.kind === 'module' ? { BATON_MODULE: job.target.path } : {}),
  };
  let stopReason: { why: string; status: StopStatus } | null = null;
  let hostError: string | null = null;
  // The module's own error: its words may hold what its output may not.
  const onHostError = (message: string) => (hostError = maskText(message, options.secrets ?? []));
  const warm = isModule ? warmHostFor(job, options) : null;

  const launch: Launch = warm
    ? startWarm(warm, { env: env as Record<string, string>, cwd: job.cwd }, options, onHostError)
    : isModule || options.tee
      ? startHere(file, args, { cwd: job.cwd, env, ipc: isModule }, options, onHostError)
      : options.launchers.spawner.launch({
          file,
          args,
          cwd: job.cwd,
          env,
          tailBytes: options.tailBytes,
          output: options.output,
          secrets: options.secrets,
          lease: options.lease,
        });

  function verdict(end: LaunchEnd): JobResult {
    if (end.kind === 'spawn-error' && end.code === LEASE_REFUSED) {
      stopReason ??= { why: `lost: not started: ${end.message}`, status: 'lost' };
      return failure(null, null, stopReason.why, '', new Date());
    }
    if (end.kind === 'spawn-error') {
      return failure(null, null, describeSpawnError(end, file, job.cwd), '', new Date());
    }
    if (end.kind === 'exit' && end.lapsedMs != null) {
      stopReason ??= { why: lapsedLeaseReason(end.lapsedMs), status: 'lost' };
    }
    if (end.kind === 'lost') {
      return failure(null, null, stopReason?.why ?? end.error, '', end.endedAt);
    }
    const { code, signal, outputTail, endedAt } = end;
    if (code === 0 && stopReason == null) {
      return { status: 'done', exitCode: 0, signal, error: null, outputTail, endedAt };
    }
    const error =
      stopReason?.why ?? hostError ?? (signal ? `killed by ${signal}` : `exited with code ${code}`);
    return failure(code, signal, error, outputTail, endedAt);
  }

  function failure(
    code: number | null,
    signal: NodeJS.Signals | null,
    error: string,
    outputTail: string,
    endedAt: Date,
  ): JobResult {
    const status = stopReason?.status ?? 'failed';
    return {
      status,
      exitCode: code,
      signal,
      error: truncate(error, ERROR_MAX),
      outputTail,
      endedAt,
    };
  }

  // The run is over when none of its processes is alive (run-processes.ts), and stopping what is
  // left of it is decided here, where stops are known. The group is sent SIGTERM once: by the
  // first stop, or — when the first process exits by itself — for what it left behind, which then
  // gets SIGKILL after LEFTOVER_GRACE_MS. A stop's SIGKILL comes at its own grace, from when it
  // was asked for, whether or not the first process has exited meanwhile: a second SIGTERM at that
  // exit would read as "force quit" to many programs, and a 5 s SIGKILL would cut a longer grace.
  let terminated = false;
  const kills: NodeJS.Timeout[] = [];
  const killAfter = (ms: number) => kills.push(setTimeout(() => launch.signal('SIGKILL'), ms));
  void launch.leaderExited.then(() => {
    if (terminated) return;
    terminated = true;
    launch.signal('SIGTERM');
    killAfter(LEFTOVER_GRACE_MS);
  });
  const result = launch.ended.then(verdict);
  void result.then(() => kills.forEach(clearTimeout));
  return {
    get pid() {
      return launch.pid;
    },
    started: launch.started,
    result,
    stop(why, graceMs, status) {
      stopReason ??= { why, status };
      if (!terminated) launch.signal('SIGTERM');
      terminated = true;
      killAfter(graceMs);
      return result;
    },
  };
}

/**
 * Spawns the run from this process, with a watchdog of its own (see the header). A module job's
 * host asks for its init message over the IPC channel, and may report its error there.
 */
function startHere(
  file: string,
  args: string[],
  where: { cwd: string; env: NodeJS.ProcessEnv; ipc: boolean },
  options: StartOptions,
  onHostError: (message: string) => void,
): Launch {
  const watchdog = startWatchdog();
  let run: GroupChild;
  try {
    run = spawnGroupChild(file, args, {
      ...where,
      tail: new OutputTail(options.tailBytes),
      output: options.output,
      secrets: options.secrets,
      tee: options.tee ?? false,
      onGroupGone: () => watchdog.dismiss(),
      processes: options.launchers.spawner.processes,
    });
  } catch (err) {
    watchdog.dismiss(); // spawn() refused its arguments: no run, nothing to guard
    throw err;
  }
  return supervise(run, watchdog, options.lease, onHostError, (child) =>
    child.on('message', (msg: HostMessage) => {
      if (msg?.kind === 'ready') child.send(initMessage(options), () => {});
    }),
  );
}

/** Hands the run to a warm host (warm-hosts.ts) and watches it as if it had just been spawned. */
function startWarm(
  host: WarmHost,
  run: WarmRun,
  options: StartOptions,
  onHostError: (message: string) => void,
): Launch {
  // Its watchdog was started with it, off the fire's path (warm-hosts.ts).
  const { watchdog } = host;
  const launch = watchGroupChild(
    host.child,
    {
      tail: new OutputTail(options.tailBytes),
      output: options.output,
      secrets: options.secrets,
      onGroupGone: () => watchdog.dismiss(),
      processes: options.launchers.spawner.processes,
    },
    host.earlier,
  );
  const supervised = supervise(launch, watchdog, options.lease, onHostError, () => {});
  // A host that died before it could hear: its exit (watched now) ends the run.
  host.child.send(initMessage(options, run), () => {});
  return supervised;
}

/** What a module host is told: the database for `ctx.db`, and to a warm host its run. */
function initMessage(options: StartOptions, run?: WarmRun): InitMessage {
  return {
    kind: 'init',
    database: options.database
      ? { connection: options.database.connection, database: options.database.database }
      : null,
    ...(run ? { run } : {}),
  };
}

/** The watchdog and the host's messages for a run started here. */
function supervise(
  run: GroupChild,
  watchdog: Watchdog,
  lease: RunLease | undefined,
  onHostError: (message: string) => void,
  listen: (child: GroupChild['child']) => void,
): Launch {
  const { child } = run;
  child.on('message', (msg: HostMessage) => {
    if (msg?.kind === 'error') onHostError(msg.message);
  });
  listen(child);
  if (child.pid != null) watchdog.guard(child.pid, lease);
  else watchdog.dismiss();
  // The watchdog's `lapsed` comes before the kill it announces, so it is in by the run's end.
  const ended = run.ended.then((end) =>
    end.kind === 'exit' && watchdog.lapsedMs != null
      ? { ...end, lapsedMs: watchdog.lapsedMs }
      : end,
  );
  return { ...run, pid: run.pid, ended };
}
