/**
 * Failover, as the link lives through it: a reconnect that reaches another server than the
 * previous session's — a promoted replica behind the same name — told apart from a restart of the
 * same server by the server's identity (`ServerFacts.identity`).
 *
 * - **Before anything else** on the new server, the run ids move past every id the old primary can
 *   have handed out (once for the fleet, under a named lock: store/failovers.ts), so that a run id
 *   never names two runs. Until that is done the runner is not connected: the link tries again like
 *   any connect.
 * - **In doubt.** The new primary may lack the rows of fires that ran on the old one (replication
 *   lag), so the fires up to the loss are in doubt (recovery.ts, in-doubt.ts) — unless semi-sync
 *   vouched for the old server's commits (semi-sync.ts: sampled here at the heartbeat pace).
 * - **Remembered.** The last failover is handed to every later connect (`last`): a link that drops
 *   again before the recovery after the failover wrote its in-doubt rows comes back to the same
 *   server, and those fires must still not be caught up.
 *
 * The fleet watch holds the fires until the fleet is seen on the new server (fleet-watch.ts).
 */
import type { LockSession } from '../coordination/lock-session.js';
import { failoverLockName } from '../lock-names.js';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import { moveRunIds, runIdsMovedWithin } from '../store/failovers.js';
import type { ServerFacts } from '../store/server-check.js';
import type { KeepAlive } from '../keep-alive.js';
import { SemiSyncSeries, watchSemiSync } from './semi-sync.js';

/**
 * How long a runner that reached a promoted server waits for another that is moving the run ids
 * (two statements and a transaction: milliseconds).
 */
const FAILOVER_LOCK_WAIT_SECONDS = 10;

/** A reconnect that reached another server than the previous session's. */
export interface Failover {
  from: string;
  to: string;
  /** The new server's GTID position when the runner arrived (null: none). */
  toGtid: string | null;
  /** When the old server's session was found lost (this host's clock). */
  lostAt: Date;
  /**
   * Since when semi-synchronous replication vouches that every commit on the old server up to
   * the loss reached a replica (this host's clock; semi-sync.ts); null: it cannot.
   */
  settledSince: Date | null;
}

export interface FailoverWatchOptions {
  /** The database whose failover lock the fleet's runners share. */
  database: string;
  host: string;
  log: Logger;
  /** The link's heartbeat pace: how old the old server's last semi-sync sample may be. */
  heartbeatMs: number;
  heartbeatDeadlineMs: number;
  /** Whether the semi-sync sampling holds the process (library mode's `keepAlive`). */
  keepAlive?: KeepAlive;
}

/** Which server the link talks to, and the failovers between servers (see the header). */
export class FailoverWatch {
  /** The identity of the server of the current (or last) session; null before the first. */
  private server: string | null = null;
  /** When the last session was found lost (this host's clock). */
  private lostAt: Date | null = null;
  private lastFailover: Failover | null = null;
  /** The semi-sync state of the current server, sampled with each heartbeat (semi-sync.ts). */
  private readonly semiSync = new SemiSyncSeries();

  constructor(private readonly o: FailoverWatchOptions) {}

  /** Which server the runner talks (or last talked) to: `ServerFacts.identity`. */
  get serverIdentity(): string | null {
    return this.server;
  }

  /** The last failover this runner lived through; null: none. */
  get last(): Failover | null {
    return this.lastFailover;
  }

  /** The lock session was found lost now. */
  sessionLost(): void {
    this.lostAt = new Date();
  }

  /**
   * A new session reached the server of `facts`, not current yet: if that is another server than
   * the last session's, moves the run ids past the old primary's (throws when it cannot: the
   * connect fails and is tried again). Returns the server failed over from; null: none.
   */
  async prepare(lock: LockSession, pool: Queryable, facts: ServerFacts): Promise<string | null> {
    const from = this.server != null && this.server !== facts.identity ? this.server : null;
    if (from != null) await this.moveRunIdsPast(lock, pool, from, facts);
    return from;
  }

  /**
   * The session on the server of `facts` is now the link's: the failover from `from` (`prepare`'s
   * answer), remembered as the last one, or null.
   */
  arrived(from: string | null, facts: ServerFacts): Failover | null {
    const lostAt = this.lostAt ?? new Date();
    const failover: Failover | null =
      from != null
        ? {
            from,
            to: facts.identity,
            toGtid: facts.gtidPosition,
            lostAt,
            settledSince: this.semiSync.vouchedSince(from, lostAt, this.semiSyncMaxAgeMs()),
          }
        : null;
    this.server = facts.identity;
    if (failover) this.lastFailover = failover;
    return failover;
  }

  /**
   * Samples the current server's semi-sync state now, then at the heartbeat pace while `current`
   * (semi-sync.ts).
   */
  watchSemiSync(
    pool: Queryable,
    server: string,
    current: () => boolean,
    signal: AbortSignal,
  ): Promise<void> {
    return watchSemiSync(
      pool,
      server,
      this.semiSync,
      this.o.heartbeatMs,
      current,
      signal,
      this.o.keepAlive,
    );
  }

  /** How close to the loss the old server's last semi-sync sample must be (semi-sync.ts). */
  private semiSyncMaxAgeMs(): number {
    return 3 * this.o.heartbeatMs + this.o.heartbeatDeadlineMs;
  }

  /**
   * Moves the run ids on the server reached by a failover from `from` past every id the old
   * primary can have handed out — unless another runner did since this one lost its session.
   * Under a named lock, so that the fleet's runners, arriving together, move them once.
   */
  private async moveRunIdsPast(
    lock: LockSession,
    pool: Queryable,
    from: string,
    facts: ServerFacts,
  ): Promise<void> {
    const { log } = this.o;
    if (facts.readOnly) {
      throw new Error(
        `the database failed over to ${facts.identity}, which is still read-only: waiting until ` +
          "it is writable (the run ids must move past the old primary's before any fire)",
      );
    }
    const name = failoverLockName(this.o.database);
    if (!(await lock.tryAcquire(name, FAILOVER_LOCK_WAIT_SECONDS))) {
      throw new Error(
        `the database failed over to ${facts.identity}: another runner held the failover lock ` +
          `for ${FAILOVER_LOCK_WAIT_SECONDS} s`,
      );
    }
    try {
      const sinceLossMs = Date.now() - (this.lostAt?.getTime() ?? Date.now());
      if (await runIdsMovedWithin(pool, facts.identity, sinceLossMs)) {
        log.debug({ toServer: facts.identity }, 'run ids already moved by another runner');
        return;
      }
      const { before, floor } = await moveRunIds(pool, {
        server: facts.identity,
        fromServer: from,
        host: this.o.host,
      });
      log.info(
        { fromServer: from, toServer: facts.identity, highestRunId: before, runIdsAbove: floor },
        "run ids moved past the old primary's: no run id is handed out twice",
      );
    } finally {
      await lock.release(name).catch(() => {});
    }
  }
}
