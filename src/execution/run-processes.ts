/**
 * A run's processes, and when the run is over.
 *
 * Every run is started as a session of its own (`detached`: setsid), so its first process is the
 * leader of a session and of a process group, both numbered by its pid. The run's processes are
 * the session's: a wrapper script's children, and what moved into a process group of its own
 * within it — GNU `timeout`, a shell with job control (`set -m`) and `sudo` call setpgid and so
 * leave the first group, but never the session. Only a process that starts a new session
 * (`setsid`, a daemonising script) leaves the run; baton does not follow it.
 *
 * A run is over when no process of its session is alive, not when its first process exits. A job
 * is often a wrapper — `sh job.sh` that starts `child &` and `wait`s — and a stop's SIGTERM reaches
 * the whole run at once: the wrapper dies at once, its child may take seconds to clean up, or
 * ignore SIGTERM altogether. Were the run over at the wrapper's exit, its lock would be released
 * (or its retry started) beside that child: two runs of one job at once. So whoever watches a run
 * (job-launch.ts) waits here until nothing of it runs; until then the watchdog, the spawner and the
 * lease keep covering it, and no verdict is written. What is left when the first process exits is
 * stopped by the run's owner (job-process.ts: SIGTERM, SIGKILL after LEFTOVER_GRACE_MS, or a
 * stop's own grace when one is under way).
 *
 * How: `kill(-sid, …)` reaches the first group at once; the other groups of the session and
 * whether any member still lives are read from /proc (Linux: each process's stat has its session).
 * One read of /proc serves every run being waited for (a storm of runs ending costs one read, not
 * one each), and a run whose first group still has a live member needs none. A zombie is not
 * alive: a process whose parent died is reparented to init, and an init that does not reap —
 * some container inits, this project's CI VM's — leaves it a zombie for good. Where /proc cannot be
 * read (not Linux), the run is its first process group. One that cannot be killed (stuck in the
 * kernel, a setuid member this user may not signal) keeps the run — and its job's lock — until it
 * is gone: the safe side.
 *
 * The state here (the runs being waited for, the last read of /proc) is a `RunProcesses`, built by
 * its root: the spawner process's for its runs, a runner's (its spawner's, execution/
 * spawner-client.ts) for the runs it starts itself. Imports stay within node: the spawner loads
 * this file.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** How often the runs still being waited for are looked at. */
export const RUN_POLL_MS = 50;
/** How often, at most, /proc is read for a run whose first group still answers kill(2). */
const PROC_LOOK_MS = 250;
/**
 * How long what a run left behind gets between SIGTERM and SIGKILL once its first process has
 * exited by itself (a stop's SIGKILL comes at the stop's own grace: job-process.ts).
 */
export const LEFTOVER_GRACE_MS = 5_000;

/** A process as /proc/<pid>/stat tells it. */
interface ProcStat {
  alive: boolean;
  pgid: number;
  sid: number;
}

/** Every process's state, group and session; null where /proc cannot be read. */
function readProc(): ProcStat[] | null {
  if (process.platform !== 'linux') return null;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  const found: ProcStat[] = [];
  for (const entry of entries) {
    if (entry.charCodeAt(0) > 57) continue; // not a pid: 'self', 'sys', …
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
    } catch {
      continue; // gone meanwhile
    }
    // "pid (comm) state ppid pgrp session …": comm may hold spaces and parentheses.
    const [state, , pgrp, session] = stat.slice(stat.lastIndexOf(')') + 2).split(' ', 4);
    found.push({ alive: state !== 'Z' && state !== 'X', pgid: Number(pgrp), sid: Number(session) });
  }
  return found;
}

/** Whether kill(2) finds a member of the process group `pgid` (zombies included). */
function groupFound(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    // EPERM: a member this user may not signal (a setuid program) is still a member.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Already gone.
  }
}

/**
 * The runs of one root being waited for, and the reads of /proc they share — a root's (a runner's
 * spawner's, shared with its warm hosts and the runs it starts itself; a foreground session's; the
 * spawner process's own): several runners in one process each have theirs, and a root's end
 * closes it (`close`). Reads are shared: in a storm of runs ending at once (500 jobs on one
 * second), a read per run — a thousand stat files each — would hold up the spawner's and the
 * runner's event loops for seconds.
 */
export class RunProcesses {
  /** The last read of /proc, and when it was made. */
  private lastRead: { at: number; procs: ProcStat[] | null } | null = null;
  /** The runs being waited for, by session, and when /proc last said they live. */
  private readonly waiting = new Map<number, { done: () => void; seenAt: number }>();
  private poll: NodeJS.Timeout | undefined;
  private lookSoon: NodeJS.Immediate | undefined;

  /** The process table, read again unless the last read is younger than `maxAgeMs`. */
  private procTable(maxAgeMs: number): ProcStat[] | null {
    const now = performance.now();
    if (this.lastRead == null || now - this.lastRead.at >= maxAgeMs)
      this.lastRead = { at: now, procs: readProc() };
    return this.lastRead.procs;
  }

  /**
   * Sends `signal` to every process of the run whose session is `sid` (its first process's pid):
   * its first group, and every other group of the session (see the header). Gone is fine. A
   * SIGTERM goes by a read of /proc up to RUN_POLL_MS old (a group made since gets the SIGKILL
   * that follows it); a SIGKILL by a fresh one.
   */
  signalRun(sid: number, signal: NodeJS.Signals): void {
    signalGroup(sid, signal);
    const groups = new Set<number>();
    const procs = this.procTable(signal === 'SIGKILL' ? 0 : RUN_POLL_MS) ?? [];
    for (const p of procs) if (p.sid === sid && p.pgid !== sid) groups.add(p.pgid);
    for (const pgid of groups) signalGroup(pgid, signal);
  }

  /**
   * Ends the waits of the runs nothing of which is alive any more. A run whose first group still
   * has a live-looking member needs no /proc read unless PROC_LOOK_MS passed; the others share
   * one read, made after every wait it decides (an older one may not show a run that started
   * after it).
   */
  private look(): void {
    this.lookSoon = undefined;
    const now = performance.now();
    const unsure = [...this.waiting].filter(
      ([sid, w]) => !groupFound(sid) || now - w.seenAt >= PROC_LOOK_MS,
    );
    if (unsure.length > 0) {
      const procs = this.procTable(0);
      const alive = new Set<number>();
      if (procs) for (const p of procs) if (p.alive) alive.add(p.sid);
      for (const [sid, w] of unsure) {
        w.seenAt = now;
        if (procs ? alive.has(sid) : groupFound(sid)) continue;
        this.waiting.delete(sid);
        w.done();
      }
    }
    if (this.waiting.size === 0) this.stopPolling();
    else this.poll ??= setInterval(() => this.look(), RUN_POLL_MS);
  }

  private stopPolling(): void {
    clearInterval(this.poll);
    this.poll = undefined;
  }

  /**
   * Resolves once no process of the run whose session is `sid` is alive (see the header);
   * signals nothing. The first look comes at once unless /proc was read less than RUN_POLL_MS
   * ago; then with the next poll, together with every other run that ended meanwhile.
   */
  whenRunGone(sid: number): Promise<void> {
    return new Promise((resolve) => {
      const earlier = this.waiting.get(sid);
      const done = earlier
        ? () => {
            earlier.done();
            resolve();
          }
        : resolve;
      const now = performance.now();
      this.waiting.set(sid, { done, seenAt: -Infinity });
      const readRecently = this.lastRead != null && now - this.lastRead.at < RUN_POLL_MS;
      if (readRecently) this.poll ??= setInterval(() => this.look(), RUN_POLL_MS);
      else this.lookSoon ??= setImmediate(() => this.look());
    });
  }

  /**
   * Stops the run whose session is `sid` — SIGTERM now, SIGKILL after `graceMs` — and resolves
   * once none of it is alive. For a run nobody else is stopping (a dead spawner's:
   * spawner-client.ts).
   */
  endRun(sid: number, graceMs: number): Promise<void> {
    this.signalRun(sid, 'SIGTERM');
    const kill = setTimeout(() => this.signalRun(sid, 'SIGKILL'), graceMs);
    return this.whenRunGone(sid).finally(() => clearTimeout(kill));
  }

  /**
   * The root's end: no timer of this watch is left once no run is waited for. A run still waited
   * for (its root's runs have ended before it closes this, so normally none) is not given up —
   * its wait is answered only when the run is gone, the safe side — and the poll stops after it.
   */
  close(): void {
    if (this.waiting.size === 0) {
      this.stopPolling();
      clearImmediate(this.lookSoon);
      this.lookSoon = undefined;
    }
  }

  /** Whether a timer of this watch is pending (a poll, or a look soon): for tests. */
  get polling(): boolean {
    return this.poll != null || this.lookSoon != null;
  }

  /** How many runs are waited for (for tests). */
  get waitingFor(): number {
    return this.waiting.size;
  }
}
