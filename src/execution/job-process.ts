/**
 * Runs one job in a child process and reports how it ended.
 *
 * Command jobs are spawned from their argv (no shell unless `shell: true`); module jobs run in
 * `module-host.js` (through tsx for TypeScript files). The child gets its own process group so
 * that stopping a run stops everything it started (`kill(-pgid)`), not just the first process.
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
 * A run never outlives its runner. If the runner dies (even `kill -9`), its lock session dies with
 * it and another host may start the job's next fire, so the old run must stop too. Node has no
 * parent-death signal, and one would reach only the first process anyway; instead every run gets a
 * watchdog: a tiny `sh` holding a pipe from the runner. The kernel closes that pipe when the runner
 * dies, for whatever reason; the watchdog reads end-of-file and kills the run's process group
 * (SIGTERM, SIGKILL a second later). When the run ends normally the runner tells the watchdog
 * "done" and it exits without doing anything. The spawner does the same for all its runs at once,
 * with its IPC channel as the pipe.
 *
 * A runner that is alive but stalled closes no pipe, so each run also goes on under the runner's
 * lease (run-lease.ts): the watchdog hears every renewal as a line `renew` and stops the run when
 * none comes in time (or on `revoke`), telling the runner `lapsed` on its way. A `read` with a
 * timeout needs bash (dash has none); without bash the watchdog watches for the runner's death
 * only. The spawner keeps the lease of its runs itself.
 */
import { spawn } from 'node:child_process';
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
import { maskText } from './secret-mask.js';
import { lapsedLeaseReason, type RunLease } from './run-lease.js';
import { launchInSpawner } from './spawner-client.js';
import { hostKind, takeModuleHost, type WarmHost } from './warm-hosts.js';

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
  /** An in-process handler that ignored its abort may still run: no retry beside it. */
  mayStillRun?: boolean;
}

export interface RunningJob {
  /** The job's process (and process group) id, once `started` has settled. */
  readonly pid: number | undefined;
  /** Settles when the process exists or could not be started (the spawner answers later). */
  readonly started: Promise<void>;
  readonly result: Promise<JobResult>;
  /**
   * Asks the run to stop: SIGTERM to its process group, SIGKILL after `graceMs`. Resolves when
   * the process has exited. `why` becomes the run's error and `status` its status (the first
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
  /**
   * Variables of the runner's environment that no job inherits: those that hold the URLs of
   * `connections:` (with their passwords). A job reaches its database through `ctx.db`.
   */
  withholdEnv?: readonly string[];
  /** The runner's lease on its runs: a run whose lease lapses is stopped and recorded `lost`. */
  lease?: RunLease | undefined;
}

/** The built host; the path works from src/execution (tests) and dist/execution alike. */
const MODULE_HOST = fileURLToPath(new URL('../../dist/execution/module-host.js', import.meta.url));
/** The process of a module job that cannot run: it reports `argv[1]` as the run's error. */
const CANNOT_RUN =
  "const message = process.argv[1]; process.stderr.write(message + '\\n'); " +
  "process.send({ kind: 'error', message }, () => process.exit(78));";
/**
 * The watchdog (see the header). It is started before the run, so that no moment exists when the
 * run lives and its watchdog does not (a runner killed between the two spawns — one spawn of a
 * big Node process takes milliseconds — would leave the run behind). Its first line is the run's
 * process group, written as soon as the run exists; end-of-file before it (the run never started,
 * or the runner died before it could say) leaves nothing to stop. Then `read` returns on "done"
 * from the runner, or fails at end-of-file when the runner is gone. `kill -s SIG -- -PGID` is the
 * form every POSIX shell accepts (dash, Debian's /bin/sh, refuses `kill -TERM -- -PGID`).
 */
const READ_THE_RUN = 'IFS= read -r pgid || exit 0; case "$pgid" in ""|*[!0-9]*) exit 0 ;; esac; ';
/** How both watchdogs stop the run: its process group `$pgid`, SIGTERM, SIGKILL a second later. */
const STOP_THE_RUN =
  'kill -s TERM -- "-$pgid" 2>/dev/null; sleep 1; kill -s KILL -- "-$pgid" 2>/dev/null; exit 0';
const WATCHDOG_SCRIPT = READ_THE_RUN + 'read line; [ "$line" = done ] && exit 0; ' + STOP_THE_RUN;
/**
 * The watchdog under a lease (bash: `read -t`). `$1` is the term of one renewal in seconds, `$2`
 * the first wait (what is left of the lease now; empty before its first renewal: wait without a
 * timeout until one comes). A read that times out (status > 128) is a lapse: it says `lapsed`
 * to the runner before it stops the run; end-of-file is the runner's death, as above.
 */
const LEASED_WATCHDOG_SCRIPT =
  READ_THE_RUN +
  't="$2"; while :; do ' +
  'if [ -n "$t" ]; then IFS= read -r -t "$t" line; else IFS= read -r line; fi; rc=$?; ' +
  'if [ $rc -eq 0 ]; then case "$line" in done) exit 0 ;; renew) t="$1" ;; revoke) break ;; esac; ' +
  'continue; fi; [ $rc -gt 128 ] && echo lapsed; break; done; ' +
  STOP_THE_RUN;
const BASH = ['/bin/bash', '/usr/bin/bash'].find((p) => existsSync(p)) ?? null;
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

/** Library mode's start of a run in this process (in-process.ts installs it); see startJob. */
type InProcessStart = (job: JobDefinition, fire: FireInfo, options: StartOptions) => RunningJob;
let inProcessStart: InProcessStart | null = null;
export function setInProcessStart(start: InProcessStart | null): void {
  inProcessStart = start;
}

/** A warm host for this run, if one waits (never for `tee` runs: one run per process). */
function warmHostFor(job: JobDefinition, options: StartOptions): WarmHost | null {
  const kind = options.tee ? null : hostKind(job);
  // A directory gone since the load: the cold start's spawn names it.
  return kind && existsSync(kind.cwd) ? takeModuleHost(kind) : null;
}

export function startJob(
  job: JobDefinition,
  fire: FireInfo,
  options: StartOptions = {},
): RunningJob {
  if (job.target.kind === 'handler' && inProcessStart) return inProcessStart(job, fire, options);
  const { file, args } = commandLine(job);
  const isModule = job.target.kind === 'module';
  const env: NodeJS.ProcessEnv = {
    ...inheritedEnvironment(new Set(options.withholdEnv ?? [])),
    ...job.env,
    ...fireEnvironment(fire),
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
      : launchInSpawner({
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

  const result = launch.ended.then(verdict);
  return {
    get pid() {
      return launch.pid;
    },
    started: launch.started,
    result,
    async stop(why, graceMs, status) {
      stopReason ??= { why, status };
      launch.signalGroup('SIGTERM');
      const timer = setTimeout(() => launch.signalGroup('SIGKILL'), graceMs);
      try {
        return await result;
      } finally {
        clearTimeout(timer);
      }
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
  const watchdog = startWatchdog(options.lease);
  const run = spawnGroupChild(file, args, {
    ...where,
    tail: new OutputTail(options.tailBytes),
    output: options.output,
    secrets: options.secrets,
    tee: options.tee ?? false,
    onExit: () => watchdog.dismiss(),
  });
  return supervise(run, watchdog, onHostError, (child) =>
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
  const watchdog = startWatchdog(options.lease);
  const launch = watchGroupChild(
    host.child,
    {
      tail: new OutputTail(options.tailBytes),
      output: options.output,
      secrets: options.secrets,
      onExit: () => watchdog.dismiss(),
    },
    host.earlier,
  );
  const supervised = supervise(launch, watchdog, onHostError, () => {});
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
  onHostError: (message: string) => void,
  listen: (child: GroupChild['child']) => void,
): Launch {
  const { child } = run;
  child.on('message', (msg: HostMessage) => {
    if (msg?.kind === 'error') onHostError(msg.message);
  });
  listen(child);
  if (child.pid != null) watchdog.guard(child.pid);
  else watchdog.dismiss();
  // The watchdog's `lapsed` comes before the kill it announces, so it is in by the run's end.
  const ended = run.ended.then((end) =>
    end.kind === 'exit' && watchdog.lapsedMs != null
      ? { ...end, lapsedMs: watchdog.lapsedMs }
      : end,
  );
  return { ...run, pid: run.pid, ended };
}

/** A run's watchdog (see the header), started before the run. */
interface Watchdog {
  /** The run exists: the watchdog stops its process group `pgid` if the runner dies or stalls. */
  guard(pgid: number): void;
  /** The run ended, or never started: the watchdog exits and stops nothing. */
  dismiss(): void;
  /** How long the runner had been silent when the lease lapsed, if it did. */
  readonly lapsedMs: number | undefined;
}

/**
 * Starts a watchdog for a run about to be started. It runs in a session of its own, so a Ctrl-C
 * aimed at the runner's terminal does not take it down before the runner.
 */
function startWatchdog(lease: RunLease | undefined): Watchdog {
  const leased = lease != null && BASH != null;
  // Never 0: `read -t 0` only polls, and would spin on a pipe with data in it.
  const seconds = (ms: number) => (Math.max(ms, 1) / 1000).toFixed(3);
  const remaining = lease?.remainingMs;
  const [shell, script, extra] = leased
    ? [
        BASH!,
        LEASED_WATCHDOG_SCRIPT,
        [seconds(lease.holderTermMs), remaining != null ? seconds(remaining) : ''],
      ]
    : ['/bin/sh', WATCHDOG_SCRIPT, []];
  const dog = spawn(shell, ['-c', script, 'baton-watchdog', ...extra], {
    detached: true,
    stdio: ['pipe', leased ? 'pipe' : 'ignore', 'ignore'],
  });
  dog.on('error', () => {}); // no shell: the run goes on, just without this safety net
  dog.stdin?.on('error', () => {});
  let lapsedMs: number | undefined;
  let lastRenewal = performance.now();
  dog.stdout?.on('data', (d: Buffer) => {
    if (d.toString().includes('lapsed')) lapsedMs = performance.now() - lastRenewal;
  });
  let release = () => {};
  let state: 'armed' | 'guarding' | 'dismissed' = 'armed';
  // The runner must not wait for its watchdogs when it exits.
  dog.unref();
  (dog.stdout as { unref?: () => void } | null)?.unref?.();
  (dog.stdin as { unref?: () => void } | null)?.unref?.();
  return {
    guard(pgid) {
      if (state !== 'armed') return;
      state = 'guarding';
      dog.stdin?.write(`${pgid}\n`);
      if (leased) {
        release = lease.hold((ms) => {
          if (ms > 0) lastRenewal = performance.now();
          if (dog.stdin?.writable) dog.stdin.write(ms > 0 ? 'renew\n' : 'revoke\n');
        });
      }
    },
    dismiss() {
      if (state === 'dismissed') return;
      release();
      // Before `guard`, end-of-file alone: the watchdog has no run to stop.
      dog.stdin?.end(state === 'guarding' ? 'done\n' : undefined);
      state = 'dismissed';
    },
    get lapsedMs() {
      return lapsedMs;
    },
  };
}
