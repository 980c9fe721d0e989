/**
 * Whether baton's own background work — its timers and its database sockets — keeps the process
 * alive. A daemon's (`baton start`) does: it is the process's work. An application using library
 * mode with `keepAlive: false` (docs/library-mode.md) says that its own handles decide: when it
 * has closed its server and ended its work, the process exits even if the scheduler was never
 * stopped, as with an `unref()`'d timer. What a job's run does itself (a handler's own I/O, a
 * child process) is the job's, not background work, and is never unref'd here.
 */

let keep = true;

/** Sets the policy for this process (library mode, before its scheduler starts). */
export function keepProcessAlive(value: boolean): void {
  keep = value;
}

/** Whether background timers should be ref'd (for `timers/promises`' `ref` option). */
export function backgroundRef(): boolean {
  return keep;
}

/** `handle` (a timer, a socket), unref'd when baton's background work must not hold the process. */
export function background<T extends { unref(): unknown }>(handle: T): T {
  if (!keep) handle.unref();
  return handle;
}

/**
 * `work`, holding the process until it settles even when background work does not: what the
 * application asked for (a start, a stop) or what it must not lose half-done (a fire, from its
 * claim to its verdict). A no-op when background work holds the process anyway.
 */
export function holdWhile<T>(work: Promise<T>): Promise<T> {
  if (keep) return work;
  const hold = setInterval(() => {}, 60_000);
  return work.finally(() => clearInterval(hold));
}
