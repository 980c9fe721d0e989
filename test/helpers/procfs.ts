/**
 * What /proc says about a process: whether it is gone, and who its parent is. For tests that
 * check real processes (a job, its grandchild, the spawner) after kills.
 */
import { readFileSync } from 'node:fs';

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
