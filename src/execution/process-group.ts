/**
 * A run's process group, and when it is over.
 *
 * A run is over when its process group is empty, not when its first process exits. A job is
 * often a wrapper — `sh job.sh` that starts `child &` and `wait`s — and a stop's SIGTERM reaches
 * the whole group at once: the wrapper dies at once, its child may take seconds to clean up, or
 * ignore SIGTERM altogether. Were the run over at the wrapper's exit, its lock would be released
 * (or its retry started) beside that child: two runs of one job at once. So whoever watches a run
 * (job-launch.ts) waits here until nothing of the group runs; until then the watchdog, the
 * spawner and the lease keep covering it, and no verdict is written. What is left when the first
 * process exits is stopped by the run's owner (job-process.ts: SIGTERM, SIGKILL after
 * LEFTOVER_GRACE_MS, or a stop's own grace when one is under way).
 *
 * "Nothing runs" means no member of the group is alive: a zombie is not. A process whose parent
 * has died is reparented to init (or a subreaper), and an init that does not reap — some container
 * inits, this project's CI VM's — leaves it a zombie for good; `kill(-pgid, 0)` counts it, so on
 * Linux a group it still finds is looked up in /proc, at most every ZOMBIE_LOOK_MS (the look
 * reads every process's stat file). A process that leaves the group on purpose (`setsid`, a
 * double-forking daemon) is out of any group's reach; baton does not follow it. One that cannot be
 * killed (stuck in the kernel, a setuid member this user may not signal) keeps the run — and its
 * job's lock — until it is gone: that is the safe side.
 *
 * Imports stay within node: the spawner loads this file and must stay small.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** How often a group that outlived its first process is asked about (`kill(-pgid, 0)`). */
export const GROUP_POLL_MS = 50;
/** How often, at most, /proc is read for a group whose members may all be zombies. */
const ZOMBIE_LOOK_MS = 250;
/**
 * How long what a run left behind gets between SIGTERM and SIGKILL once its first process has
 * exited by itself (a stop's SIGKILL comes at the stop's own grace: job-process.ts).
 */
export const LEFTOVER_GRACE_MS = 5_000;

/** Sends `signal` to the process group `pgid` (a job and all it started); gone is fine. */
export function signalProcessGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Already gone.
  }
}

/** Whether kill(2) finds a member of the group `pgid` (zombies included). */
function groupFound(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    // EPERM: a member this user may not signal (a setuid program) is still a member.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * True when /proc shows members of the group and all of them are zombies. A group it cannot see
 * at all (hidepid, or its last member gone meanwhile) is not called dead here: kill(2) said it
 * has a member, and the next look asks again.
 */
function onlyZombiesIn(pgid: number): boolean {
  if (process.platform !== 'linux') return false;
  let seen = false;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return false;
  }
  for (const entry of entries) {
    if (entry.charCodeAt(0) > 57) continue; // not a pid: 'self', 'sys', …
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
    } catch {
      continue; // gone meanwhile
    }
    // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ', 3);
    if (Number(fields[2]) !== pgid) continue;
    if (fields[0] !== 'Z' && fields[0] !== 'X') return false;
    seen = true;
  }
  return seen;
}

/** Resolves once no process of the group `pgid` is alive (see the header); signals nothing. */
export function whenGroupGone(pgid: number): Promise<void> {
  if (!groupFound(pgid)) return Promise.resolve();
  let lookedAt = -Infinity;
  const gone = () => {
    if (!groupFound(pgid)) return true;
    if (performance.now() - lookedAt < ZOMBIE_LOOK_MS) return false;
    lookedAt = performance.now();
    return onlyZombiesIn(pgid);
  };
  if (gone()) return Promise.resolve();
  return new Promise((resolve) => {
    const poll = setInterval(() => {
      if (!gone()) return;
      clearInterval(poll);
      resolve();
    }, GROUP_POLL_MS);
  });
}

/**
 * Stops the group `pgid` — SIGTERM now, SIGKILL after `graceMs` — and resolves once none of it is
 * alive. For a group nobody else is stopping (a dead spawner's orphans: spawner-client.ts).
 */
export function endGroup(pgid: number, graceMs: number): Promise<void> {
  signalProcessGroup(pgid, 'SIGTERM');
  const kill = setTimeout(() => signalProcessGroup(pgid, 'SIGKILL'), graceMs);
  return whenGroupGone(pgid).finally(() => clearTimeout(kill));
}
