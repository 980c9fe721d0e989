/**
 * The lease under which a runner's jobs run: how long they may go on without fresh news that the
 * runner's lock session — the thing that keeps every other runner out — is alive.
 *
 * Why a lease: a run must stop soon after its lock stops excluding others. The runner itself sees
 * a lost session (a connection event, or a heartbeat missing its deadline) and aborts its runs,
 * but only while its own event loop runs. A runner that is stopped (SIGSTOP, a frozen VM, a host
 * swapping hard) sees nothing: its session can be killed or cut off, the server frees its locks,
 * another runner starts the job's next fire, and the stalled runner's job keeps running beside it
 * for as long as the stall lasts. So the runs are watched by someone else too — the spawner (for
 * command jobs) and each run's watchdog (module jobs, `baton run`) — and the runner must renew
 * their lease at every heartbeat the server answers. A lease that lapses stops the runs (SIGTERM,
 * SIGKILL after a second) whatever the runner is doing, and no new run is started under it.
 *
 * The term is the heartbeat interval plus its deadline, plus a small margin: the next heartbeat
 * goes out `intervalMs` after an answer and the session counts as lost `deadlineMs` after that, so
 * a lapse means the runner has not done in time what a live runner would have done by then —
 * either renewed or aborted its runs. The margin keeps a live runner's own verdict first: its
 * abort carries the real reason (the heartbeat's error), the lapse only "the runner did not
 * vouch". That makes the bound on a run outliving its lock `interval + deadline + margin + 1 s`
 * from the last answered heartbeat, independent of the runner's event loop (docs/design.md).
 *
 * Monotonic time only: a lease is a duration, and the holders measure it on their own clocks
 * from when each renewal reached them.
 */

/** Added to the term so that a live runner's own loss detection comes first (see the header). */
export const LEASE_MARGIN_MS = 250;

/** Hears each renewal (the term from now) and the revocation (0). */
type LeaseListener = (validForMs: number) => void;

export class RunLease {
  /** `performance.now()` until which the runs are vouched for; null until the first renewal (a
   * process that never watches a session, like `baton run` until its lock is won, holds its
   * runs to nothing but their lock's own checks until then). */
  private until: number | null = null;
  private readonly listeners = new Set<LeaseListener>();

  /** `termMs`: how long one renewal is good for (the heartbeat interval plus its deadline). */
  constructor(readonly termMs: number) {}

  /** The holders' term: the runner's plus the margin. */
  get holderTermMs(): number {
    return this.termMs + LEASE_MARGIN_MS;
  }

  /** The lock session answered a heartbeat (or was just opened): the runs may go on. */
  renew(): void {
    this.until = performance.now() + this.termMs;
    for (const listener of this.listeners) listener(this.holderTermMs);
  }

  /** The lock session is gone: no run may go on, none may start, until the next renewal. */
  revoke(): void {
    this.until = performance.now();
    for (const listener of this.listeners) listener(0);
  }

  /** The term a new holder gets now: what is left of the current renewal, with the margin. */
  get remainingMs(): number | null {
    if (this.until == null) return null;
    return Math.max(0, this.until - performance.now() + LEASE_MARGIN_MS);
  }

  /** Listens to renewals until the returned function is called. */
  hold(listener: LeaseListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** The reason a run stopped by a lapsed lease is recorded `lost` with. */
export function lapsedLeaseReason(stalledMs: number): string {
  const seconds = (stalledMs / 1000).toFixed(1);
  return (
    `lost: the runner did not renew its runs' lease for ${seconds} s (it was stalled or cut ` +
    `off from the database), so its watchdog stopped the run: its lock may no longer have ` +
    `kept other runners out`
  );
}
