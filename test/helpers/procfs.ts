/**
 * Real processes, for tests that check them (a job, its grandchild, the spawner) after kills: what
 * /proc says about one (gone or alive, its parent, blocked on a FIFO), the pid a job wrote down,
 * and a last SIGKILL.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { waitFor } from './wait.js';

/** The fields of /proc/<pid>/stat after "pid (comm) " (comm may hold spaces and parentheses). */
function statFields(pid: number): string[] | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/**
 * Whether the process is gone. A killed process whose parent is gone too waits for init to reap
 * it; on this VM init may take its time, so a zombie (state Z) counts as gone: it runs nothing.
 */
export function processGone(pid: number): boolean {
  const state = statFields(pid)?.[0];
  return state == null || state === 'Z' || state === 'X';
}

/** The parent pid of a live process. */
export function parentOf(pid: number): number {
  const fields = statFields(pid);
  if (!fields) throw new Error(`process ${pid} is gone`);
  return Number(fields[1]);
}

/**
 * Whether a thread of the process is blocked opening a FIFO that has no writer yet (its wchan is
 * the kernel's `wait_for_partner`): the moment a test knows a reader has reached the FIFO.
 */
export function blockedOnFifo(pid: number): boolean {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return tasks.some((tid) => {
    try {
      return readFileSync(`/proc/${pid}/task/${tid}/wchan`, 'utf8').trim() === 'wait_for_partner';
    } catch {
      return false;
    }
  });
}

/** Whether the process runs: it exists and is not a zombie (the opposite of `processGone`). */
export function alive(pid: number): boolean {
  return !processGone(pid);
}

/** Reads a pid a job wrote into `dir` (waits for the whole line: the file may be half written). */
export function pidFile(dir: string, name: string): Promise<number> {
  return waitFor(`pid file ${name}`, () => {
    const file = path.join(dir, name);
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
    return text.endsWith('\n') ? Number(text.trim()) : undefined;
  });
}

/** SIGKILL to a process group the test found alive where it should not be (gone already: fine). */
export function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/**
 * Whether no process of the process group `pgid` runs any more (`kill -0 -PGID` would count the
 * zombies a slow init has not reaped yet, which run nothing): every /proc/<pid>/stat is read.
 */
export function groupGone(pgid: number): boolean {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(Number(entry));
    if (fields && Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X') {
      return false;
    }
  }
  return true;
}

/** The run watchdogs (watchdog.ts: `bash -c … baton-watchdog`) that `parent` started and that run. */
export function watchdogsOf(parent: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(Number(entry));
    if (!fields || Number(fields[1]) !== parent || fields[0] === 'Z') continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv.includes('baton-watchdog')) found.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}
