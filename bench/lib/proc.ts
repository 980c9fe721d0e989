/**
 * What a process costs, read from /proc (Linux): resident memory (VmRSS now, VmHWM the kernel's
 * peak) and CPU time (utime + stime from /proc/<pid>/stat, in clock ticks).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

let ticks: number | undefined;

/** Clock ticks per second (`getconf CLK_TCK`, 100 on Linux nearly always). */
export function clockTicks(): number {
  if (ticks == null) {
    try {
      ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticks = 100;
    }
  }
  return ticks;
}

export interface ProcSnapshot {
  /** performance.now() of the reading. */
  at: number;
  rssKiB: number;
  /** The kernel's high-water mark of RSS (VmHWM) since the process started. */
  hwmKiB: number;
  /** utime + stime, seconds. */
  cpuSeconds: number;
  threads: number;
}

/** One reading of /proc/<pid>; throws when the process is gone. */
export function readProc(pid: number): ProcSnapshot {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1]);
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces and parentheses).
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state): utime is field 14, stime field 15.
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  return {
    at: performance.now(),
    rssKiB: kib('VmRSS'),
    hwmKiB: kib('VmHWM'),
    cpuSeconds: (utime + stime) / clockTicks(),
    threads: kib('Threads'),
  };
}

export interface ProcUsage {
  pid: number;
  seconds: number;
  /** Peak RSS seen by the sampler over the window, MiB. */
  rssPeakMiB: number;
  /** RSS at the end of the window, MiB. */
  rssEndMiB: number;
  /** RSS at the start of the window, MiB. */
  rssStartMiB: number;
  /** The kernel's peak RSS since the process started (VmHWM), MiB. */
  hwmMiB: number;
  /** CPU time over the window / wall time, in % of one core. */
  cpuPercent: number;
  cpuSeconds: number;
  samples: number;
}

export interface ProcSampler {
  /** Ends sampling and returns the window's usage. */
  stop(): ProcUsage;
}

/** Samples `pid` every `intervalMs` (default 500 ms) until stop(). */
export function sampleProcess(pid: number, intervalMs = 500): ProcSampler {
  const first = readProc(pid);
  let last = first;
  let peak = first.rssKiB;
  let samples = 1;
  const timer = setInterval(() => {
    try {
      last = readProc(pid);
      peak = Math.max(peak, last.rssKiB);
      samples++;
    } catch {
      clearInterval(timer);
    }
  }, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      try {
        last = readProc(pid);
        peak = Math.max(peak, last.rssKiB);
        samples++;
      } catch {
        // gone: the last reading stands
      }
      const seconds = (last.at - first.at) / 1000;
      const cpu = last.cpuSeconds - first.cpuSeconds;
      return {
        pid,
        seconds,
        rssPeakMiB: peak / 1024,
        rssEndMiB: last.rssKiB / 1024,
        rssStartMiB: first.rssKiB / 1024,
        hwmMiB: last.hwmKiB / 1024,
        cpuPercent: seconds > 0 ? (100 * cpu) / seconds : NaN,
        cpuSeconds: cpu,
        samples,
      };
    },
  };
}
