/**
 * Whether baton's own background work — its timers and its database sockets — keeps the process
 * alive. A daemon's (`baton start`) does: it is the process's work. An application using library
 * mode with `keepAlive: false` (docs/library-mode.md) says that its own handles decide: when it
 * has closed its server and ended its work, the process exits even if the scheduler was never
 * stopped, as with an `unref()`'d timer. What a job's run does itself (a handler's own I/O, a
 * child process) is the job's, not background work, and is never unref'd here.
 *
 * The policy is an object, not a setting of the process: the composition root builds it (the
 * daemon's `Runner` from `RunnerOptions.keepAlive`, library mode's `Scheduler` from its
 * `keepAlive` option) and hands it down with the options of what it builds — the pool and the
 * lock session (store/connect.ts, coordination/lock-session.ts), the loop, the dispatcher, every
 * background sleep (delay.ts). Two schedulers of one process, one with `keepAlive: false`, each
 * keep their own. Whatever is given none (the CLI's commands, a foreground fire) holds the process:
 * `HOLDS_PROCESS`.
 */

export class KeepAlive {
  /** `holds`: baton's background work keeps the process alive (the default everywhere). */
  constructor(readonly holds: boolean) {}

  /** Whether background timers should be ref'd (for `timers/promises`' `ref` option). */
  get ref(): boolean {
    return this.holds;
  }

  /** `handle` (a timer, a socket), unref'd when baton's background work must not hold the process. */
  background<T extends { unref(): unknown }>(handle: T): T {
    if (!this.holds) handle.unref();
    return handle;
  }

  /**
   * `work`, holding the process until it settles even when background work does not: what the
   * application asked for (a start, a stop) or what it must not lose half-done (a fire, from its
   * claim to its verdict). A no-op when background work holds the process anyway.
   */
  holdWhile<T>(work: Promise<T>): Promise<T> {
    if (this.holds) return work;
    const hold = setInterval(() => {}, 60_000);
    return work.finally(() => clearInterval(hold));
  }
}

/** The policy of everything not given one: baton's work is the process's (a daemon, the CLI). */
export const HOLDS_PROCESS: KeepAlive = Object.freeze(new KeepAlive(true));
