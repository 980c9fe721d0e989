/**
 * Warm module hosts: a module job's process started ahead of need, so that a fire does not wait
 * for Node, the TypeScript loader and the host's own imports to load (some 100 ms for a `.mjs`
 * job, 250 ms and more through tsx, on a 2-core machine — ten times a command job's start).
 *
 * A warm host is `module-host.js --warm` (module-host.ts), spawned exactly as a cold run's process
 * would be — detached (its own process group and session), stdout/stderr piped, an IPC channel —
 * in the job's directory, with the runner's environment minus what no job inherits. It waits.
 * When a fire is won, job-process.ts takes it, sends it the run (the module, the run's whole
 * environment, the database) and watches it as it would a process it just spawned: watchdog,
 * lease, output, stop and kill all work on the same pid and process group (the run's watchdog is
 * started with the host, off the fire's path, and told the host's pid at the take: watchdog.ts).
 * Each waiting host costs a waiting bash beside it: 3.2 MiB resident, 0.5 MiB proportional (its
 * pages are bash's own, shared). A host serves one run and exits with it, so a run's isolation
 * is that of a fresh process: nothing of one run (a crash, a leak, a global) can touch another.
 * A replacement is started a moment after each take.
 *
 * Two warm hosts per kind of module job the runner warms (the frequent ones: the daemon's
 * warm-policy.ts; a rare job starts cold), a kind being the loader (none, or tsx)
 * and the directory (tsx reads `tsconfig.json` from it when it starts), at most MAX_HOSTS in
 * all. Two, because a host takes 0.2–1 s to load on a busy 2-core machine (tsx's the longer): a
 * job firing every second would otherwise often meet its replacement still loading, and two jobs
 * of one kind may fire on the same instant. A fire takes a loaded host first. A fire that
 * finds none waiting (more runs of one kind at once, a host that died, a kind beyond the cap, a
 * job whose `env:` sets a variable Node reads when it starts) starts cold, as before.
 *
 * A host for TypeScript jobs also warms tsx up before it says it is warm (tsx-warm-up.ts): it
 * imports baton's own `.ts` files, so that tsx's and Node's first use of their TypeScript paths is
 * not the job's import. The runner logs each host's warm-up at debug level, and a failed one (the
 * run then pays that first use) once per kind as a warning.
 *
 * Staleness: a warm host has loaded only baton's own code and tsx, never the job's; the module is
 * imported when the run starts, so a file changed on disk runs as changed. What a host read when
 * it started is its environment and tsx's `tsconfig.json`: every (re)load of the schedule
 * replaces all warm hosts, so they are never older than the schedule in force.
 *
 * A warm host never outlives its runner: it exits when its channel closes (the runner died,
 * however — `kill -9` too), and a runner that stops kills them. A host that dies while it waits is
 * replaced, after a pause that grows while replacements keep dying (a broken install must not
 * become a fork loop). None of them keeps the runner's event loop alive.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { JobDefinition } from '../config/schema.js';
import type { Logger } from '../log.js';
import { TYPESCRIPT_FILE, tsxLoader } from '../typescript-jobs.js';
import type { OutputStream } from './output-capture.js';
import { inheritedEnvironment } from './job-environment.js';
import type { EarlyOutput } from './job-launch.js';
import { RunProcesses } from './run-processes.js';
import type { HostMessage } from './module-host.js';
import { TSX_WARM_UP_FLAG, type WarmUpReport } from './tsx-warm-up.js';
import { startWatchdog, type Watchdog } from './watchdog.js';

/** The built host; the path works from src/execution (tests) and dist/execution alike. */
const MODULE_HOST = fileURLToPath(new URL('../../dist/execution/module-host.js', import.meta.url));
/** Warm hosts at most, and per kind (each is a Node process at idle: docs/design.md). */
const MAX_HOSTS = 4;
const PER_KIND_MAX = 2;
/** How long after a take its replacement is spawned: off the fire's path (spawn() blocks). */
const REPLACE_AFTER_MS = 50;
/** The pause before replacing a host that died waiting, doubled per death in a row, capped. */
const RESPAWN_MS = 1_000;
const RESPAWN_MAX_MS = 60_000;
/** A host that lived this long before it died resets the doubling. */
const HEALTHY_MS = 10_000;
/** Output kept from a host before its run (Node's warnings; nothing, normally). */
const EARLY_MAX_BYTES = 64 * 1024;

/** A kind of module job: which loader (`--import` URL, or none) in which directory. */
export interface HostKind {
  loader: string | null;
  cwd: string;
}

/**
 * Variables a Node process reads when it starts (its options, the loader's): a job whose `env:`
 * sets one starts cold, since a warm host started without them.
 */
const STARTUP_VARIABLE = /^(NODE_|UV_|TSX_|ESBUILD_)/;

/** The kind of warm host a module job runs in, or null: it starts cold (see warm-hosts.ts). */
export function hostKind(job: JobDefinition): HostKind | null {
  if (job.target.kind !== 'module') return null;
  if (Object.keys(job.env).some((key) => STARTUP_VARIABLE.test(key))) return null;
  if (!TYPESCRIPT_FILE.test(job.target.path)) return { loader: null, cwd: job.cwd };
  const loader = tsxLoader();
  return loader == null ? null : { loader, cwd: job.cwd };
}

/** A warm host handed to a run: the process, what it wrote before, and its run's watchdog. */
export interface WarmHost {
  child: ChildProcess;
  earlier: EarlyOutput[];
  watchdog: Watchdog;
}

function keyOf(kind: HostKind): string {
  return `${kind.loader ?? ''}\0${kind.cwd}`;
}

type Handle = { ref(): void; unref(): void };
/** `loaded`: it said it has loaded all it loads before a run (module-host.ts, `warm`). */
type Host = WarmHost & { bornAt: number; loaded: boolean };

/** One kind's hosts: those waiting, and how it keeps `size` of them there. */
class Slot {
  private readonly hosts: Host[] = [];
  private timer: NodeJS.Timeout | undefined;
  private deaths = 0;
  private closed = false;

  /** A failed warm-up was logged: once per kind, not at every host. */
  private toldWarmUpFailed = false;

  constructor(
    readonly kind: HostKind,
    private readonly env: NodeJS.ProcessEnv,
    private readonly size: number,
    private readonly log: Logger | undefined,
    private readonly processes: RunProcesses,
  ) {
    this.fill();
  }

  /** A waiting host, if one is alive (a loaded one first); a replacement follows. */
  take(): WarmHost | null {
    const live = this.hosts.filter((h) => alive(h.child));
    const host = live.find((h) => h.loaded) ?? live[0];
    if (!host) return null;
    this.hosts.splice(this.hosts.indexOf(host), 1);
    this.deaths = 0;
    const { child } = host;
    child.stdout?.removeAllListeners('data');
    child.stderr?.removeAllListeners('data');
    child.removeAllListeners('exit');
    child.removeAllListeners('error');
    child.removeAllListeners('message');
    // From now on it is a run: it keeps the runner alive like a process spawned for it.
    holdRunner(child, true);
    this.later(REPLACE_AFTER_MS);
    return { child, earlier: host.earlier, watchdog: host.watchdog };
  }

  /** Kills the waiting hosts and starts no more. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    for (const host of this.hosts.splice(0)) {
      if (host.child.pid != null) this.processes.signalRun(host.child.pid, 'SIGKILL');
      host.watchdog.dismiss();
    }
  }

  private later(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fill(), ms);
    this.timer.unref();
  }

  private fill(): void {
    while (!this.closed && this.hosts.length < this.size) {
      if (!this.spawn()) return;
    }
  }

  private spawn(): boolean {
    const args = [...(this.kind.loader ? ['--import', this.kind.loader] : []), MODULE_HOST];
    let child: ChildProcess;
    try {
      const warmUp = this.kind.loader ? [TSX_WARM_UP_FLAG] : [];
      child = spawn(process.execPath, [...args, '--warm', ...warmUp], {
        cwd: this.kind.cwd,
        env: this.env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      });
    } catch {
      this.died();
      return false;
    }
    // The run's watchdog, started now so that the fire's path has no spawn of its own.
    const watchdog = startWatchdog();
    const host: Host = { child, earlier: [], watchdog, bornAt: performance.now(), loaded: false };
    child.on('message', (msg: HostMessage) => {
      if (msg?.kind !== 'warm') return;
      host.loaded = true;
      this.tell(child.pid, msg.warmUp);
    });
    let kept = 0;
    const keep = (stream: OutputStream) => (bytes: Buffer) => {
      if (kept + bytes.length > EARLY_MAX_BYTES) return;
      kept += bytes.length;
      host.earlier.push({ stream, bytes });
    };
    child.stdout?.on('data', keep(1));
    child.stderr?.on('data', keep(2));
    child.on('error', () => {
      if (child.pid == null) this.forget(host);
    });
    child.once('exit', () => this.forget(host));
    holdRunner(child, false);
    this.hosts.push(host);
    return true;
  }

  /** A host is warm: at debug level what it did (the e2e tests' proof), a failure once. */
  private tell(hostPid: number | undefined, warmUp: WarmUpReport | undefined): void {
    const { cwd } = this.kind;
    this.log?.debug({ hostPid, cwd, tsx: this.kind.loader != null, warmUp }, 'module host warm');
    if (warmUp?.error == null || this.toldWarmUpFailed) return;
    this.toldWarmUpFailed = true;
    this.log?.warn(
      { cwd, error: warmUp.error },
      "a warm module host could not warm tsx up: its .ts runs pay tsx's first use (they run)",
    );
  }

  /** A waiting host died (or never started): another one, after a pause. */
  private forget(host: Host): void {
    const index = this.hosts.indexOf(host);
    if (index < 0) return;
    this.hosts.splice(index, 1);
    host.watchdog.dismiss();
    if (performance.now() - host.bornAt > HEALTHY_MS) this.deaths = 0;
    this.died();
  }

  private died(): void {
    if (this.closed) return;
    const pause = Math.min(RESPAWN_MS * 2 ** this.deaths, RESPAWN_MAX_MS);
    this.deaths++;
    this.later(pause);
  }
}

function alive(child: ChildProcess): boolean {
  return child.exitCode == null && child.signalCode == null && child.connected;
}

/** A waiting host must not keep the runner alive; a run does. */
function holdRunner(child: ChildProcess, hold: boolean): void {
  const handles = [child, child.stdout, child.stderr, child.channel] as (Handle | null)[];
  for (const h of handles) {
    if (hold) h?.ref?.();
    else h?.unref?.();
  }
}

/**
 * One root's warm hosts (a runner's; a foreground session warms none): a slot per kind of module
 * job, replaced at each load of the schedule.
 */
export class WarmHosts {
  private readonly slots = new Map<string, Slot>();

  /** `processes`: its root's watch of the runs' processes (the runner's spawner's). */
  constructor(private readonly processes: RunProcesses = new RunProcesses()) {}

  /**
   * Keeps a module host warm for each kind of module job in `jobs` (the daemon, at each load of
   * its schedule), with the environment every job inherits (`withholdEnv`: see
   * job-environment.ts). Hosts warm before are replaced.
   */
  warmFor(jobs: readonly JobDefinition[], withholdEnv: readonly string[], log?: Logger): void {
    const kinds = jobs.map(hostKind).filter((kind) => kind != null);
    this.warm(kinds, inheritedEnvironment(new Set(withholdEnv)), log);
  }

  /**
   * Keeps hosts warm for the module jobs whose kinds are `kinds` (one entry per job), with `env`
   * as their environment, replacing every host that was warm before (a (re)load of the schedule:
   * see the header): two per kind, at most MAX_HOSTS in all (the first round gives every kind
   * one, in the schedule's order).
   */
  warm(kinds: readonly HostKind[], env: NodeJS.ProcessEnv, log?: Logger): void {
    this.stop();
    const jobs = new Map<string, { kind: HostKind; size: number }>();
    for (const kind of kinds) jobs.set(keyOf(kind), jobs.get(keyOf(kind)) ?? { kind, size: 0 });
    let left = MAX_HOSTS;
    for (let round = 1; round <= PER_KIND_MAX; round++) {
      for (const entry of jobs.values()) {
        if (left === 0) continue;
        entry.size++;
        left--;
      }
    }
    for (const [key, { kind, size }] of jobs) {
      if (size > 0) this.slots.set(key, new Slot(kind, env, size, log, this.processes));
    }
  }

  /** A warm host of this kind for a run, or null (the run starts cold). */
  take(kind: HostKind): WarmHost | null {
    return this.slots.get(keyOf(kind))?.take() ?? null;
  }

  /** Kills every waiting host; none is started until the next `warm`. */
  stop(): void {
    for (const slot of this.slots.values()) slot.close();
    this.slots.clear();
  }
}
