/**
 * A run's watchdog, for the runs a runner spawns itself (module jobs, `baton run`; the spawner is
 * the watchdog of command jobs: spawner.ts).
 *
 * A run never outlives its runner. If the runner dies (even `kill -9`), its lock session dies with
 * it and another host may start the job's next fire, so the old run must stop too. Node has no
 * parent-death signal, and one would reach only the first process anyway; instead every run gets a
 * watchdog: a tiny shell holding a pipe from the runner. The kernel closes that pipe when the
 * runner dies, for whatever reason; the watchdog reads end-of-file and kills the run's process
 * group (SIGTERM, SIGKILL a second later). When the run ends normally the runner tells the
 * watchdog `done` and it exits without doing anything.
 *
 * The watchdog exists before its run: it is started first, and its first line is the run's
 * process group (`guard`), written as soon as the run exists. Started after the run, a runner
 * killed between the two spawns — one spawn from a Node process of 50–150 MiB takes 5–15 ms on a
 * busy 2-core machine — left the run without one. End-of-file before that first line (the run
 * never started, a warm host never used, or a runner dead before it could say) leaves nothing to
 * stop. A warm module host's watchdog is started with the host (warm-hosts.ts), so that the
 * spawn is not on the fire's path.
 *
 * A runner that is alive but stalled closes no pipe, so a run also goes on under the runner's
 * lease (run-lease.ts): the first line carries the lease's term and what is left of it, the
 * watchdog hears every renewal as a line `renew` and stops the run when none comes in time (or
 * on `revoke`), telling the runner `lapsed` on its way. A `read` with a timeout needs bash (dash
 * has none); without bash the watchdog watches for the runner's death only.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { RunLease } from './run-lease.js';

/** A run's watchdog (see the header). */
export interface Watchdog {
  /** The run exists: stop it (its session `pgid`) if the runner dies, or stalls past `lease`. */
  guard(pgid: number, lease: RunLease | undefined): void;
  /** The run ended, or never started: the watchdog exits and stops nothing. */
  dismiss(): void;
  /** How long the runner had been silent when the lease lapsed, if it did. */
  readonly lapsedMs: number | undefined;
}

/**
 * The first line: the run's process group, then (bash only) the lease's term and its first wait,
 * in seconds, both empty without a lease. Anything but a process group: nothing to stop.
 */
const READ_THE_RUN =
  'IFS=" " read -r pgid term t || exit 0; case "$pgid" in ""|*[!0-9]*) exit 0 ;; esac; ';
/**
 * How the watchdog stops the run: SIGTERM, SIGKILL a second later, to its process group and to
 * every process of its session (the run's processes: run-processes.ts; the run was started as a
 * session of its own, numbered like its group), which reaches what moved into a group of its own
 * (GNU `timeout`, `set -m`). `pkill -s` (procps) does the session; without it, the group alone.
 * `kill -s SIG -- -PGID` is the form every POSIX shell accepts (dash, Debian's /bin/sh, refuses
 * `kill -TERM -- -PGID`).
 */
const STOP_THE_RUN =
  'kill -s TERM -- "-$pgid" 2>/dev/null; pkill -TERM -s "$pgid" 2>/dev/null; sleep 1; ' +
  'kill -s KILL -- "-$pgid" 2>/dev/null; pkill -KILL -s "$pgid" 2>/dev/null; exit 0';
/** Without bash: `done`, or end-of-file when the runner is gone. */
const PLAIN_SCRIPT = READ_THE_RUN + 'read line; [ "$line" = done ] && exit 0; ' + STOP_THE_RUN;
/**
 * With bash: as above, and a read that times out (status > 128) is a lapse, said as `lapsed`
 * before the run is stopped. With no wait (no lease, or none renewed yet) it waits for a line.
 */
const LEASED_SCRIPT =
  READ_THE_RUN +
  'while :; do ' +
  'if [ -n "$t" ]; then IFS= read -r -t "$t" line; else IFS= read -r line; fi; rc=$?; ' +
  'if [ $rc -eq 0 ]; then case "$line" in done) exit 0 ;; renew) t="$term" ;; revoke) break ;; esac; ' +
  'continue; fi; [ $rc -gt 128 ] && echo lapsed; break; done; ' +
  STOP_THE_RUN;
const BASH = ['/bin/bash', '/usr/bin/bash'].find((p) => existsSync(p)) ?? null;

/**
 * Starts a watchdog for a run about to be started (or a warm host to be handed one). It runs in a
 * session of its own, so a Ctrl-C aimed at the runner's terminal does not take it down before the
 * runner; it never keeps the runner alive.
 */
export function startWatchdog(): Watchdog {
  const [shell, script] = BASH ? [BASH, LEASED_SCRIPT] : ['/bin/sh', PLAIN_SCRIPT];
  const dog = spawn(shell, ['-c', script, 'baton-watchdog'], {
    detached: true,
    stdio: ['pipe', BASH ? 'pipe' : 'ignore', 'ignore'],
  });
  dog.on('error', () => {}); // no shell: the run goes on, just without this safety net
  dog.stdin?.on('error', () => {});
  let lapsedMs: number | undefined;
  let lastRenewal = performance.now();
  dog.stdout?.on('data', (d: Buffer) => {
    if (d.toString().includes('lapsed')) lapsedMs = performance.now() - lastRenewal;
  });
  dog.unref();
  (dog.stdout as { unref?: () => void } | null)?.unref?.();
  (dog.stdin as { unref?: () => void } | null)?.unref?.();

  let state: 'armed' | 'guarding' | 'dismissed' = 'armed';
  let release = () => {};
  return {
    guard(pgid, lease) {
      if (state !== 'armed') return;
      state = 'guarding';
      if (lease == null || BASH == null) {
        dog.stdin?.write(`${pgid}\n`);
        return;
      }
      // Never 0: `read -t 0` only polls, and would spin on a pipe with data in it.
      const seconds = (ms: number) => (Math.max(ms, 1) / 1000).toFixed(3);
      const remaining = lease.remainingMs;
      // Before the lease's first renewal: no first wait (wait until one comes).
      const first = remaining != null ? seconds(remaining) : '';
      lastRenewal = performance.now();
      dog.stdin?.write(`${pgid} ${seconds(lease.holderTermMs)} ${first}\n`);
      release = lease.hold((ms) => {
        if (ms > 0) lastRenewal = performance.now();
        if (dog.stdin?.writable) dog.stdin.write(ms > 0 ? 'renew\n' : 'revoke\n');
      });
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
