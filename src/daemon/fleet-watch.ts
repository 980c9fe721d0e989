/**
 * A split brain, as far as one runner can see it: after a failover (a reconnect that reached
 * another server than before), is the rest of the fleet on this server too, or has this runner
 * reached a server the fleet has left — an old primary back and writable, found through a stale
 * DNS cache or a VIP that did not move for every host?
 *
 * The evidence is the runner registry, of both servers. While with the fleet, the runner looks
 * every COMPANIONS_MS at who else is alive (heartbeated within DEFAULT_GONE_AFTER_MS) on its
 * server: its *companions*. After a failover with companions, it *holds* its fires (`holding`:
 * the link gives no fire context, so nothing runs and no claim is written) until another runner
 * of the namespace (not stopped gracefully) has heartbeated on the server it reached since it lost
 * its old session: the fleet is here. When none has for DETACH_GRACE_MS after it arrived, the
 * runner is *detached*: it goes on holding, tells it at error level (`db:detached`), in its
 * registry row (`baton status` against this server: critical `detached`) and in
 * `baton_database_detached`. It keeps looking, and lets go as soon as another runner heartbeats
 * here. Without companions (a fleet of one, or the others already gone) it does not hold: there
 * is no fleet to lose.
 *
 * The rows such a runner still writes on that server (its registry row, the in-doubt and missed
 * rows of its recovery) cannot make anything run twice: they are on a server the fleet has left.
 *
 * The same look tells which jobs each companion runs (the keys of its registered schedule, read
 * again only when its digest changed): who may ask first for a fire (coordination/first-asker.ts).
 *
 * What this cannot see: a runner that reaches the old primary at its first connect (it has no
 * "before" to compare with) — nor one restarted while detached; a fleet of one; and a runner that
 * the others joined on the wrong server (they all hold nothing then: a whole fleet on the old
 * primary is no split brain through baton, but its history misses the new primary's). Only the
 * operator's fence closes these: docs/runbook.md, "The database: maintenance, outages, failover".
 */
import { delay } from '../delay.js';
import type { KeepAlive } from '../keep-alive.js';

import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import { DEFAULT_GONE_AFTER_MS, fleetPeers, jobsOfRunners } from '../store/runners.js';
import type { RunnerEvents } from './runner-events.js';

/**
 * The wait for the fleet after a failover before a runner counts as detached: the others find
 * their sessions lost within a heartbeat window (4 s by default) and reconnect within about a
 * second of the name moving; each heartbeats in the registry as it connects. It counts only
 * while this runner is connected and the server writable (a replica not yet promoted takes no
 * heartbeat from anyone).
 */
export const DETACH_GRACE_MS = 10_000;
/** How often a runner with the fleet looks at who is alive with it. */
const COMPANIONS_MS = 5_000;
/**
 * How often a holding runner looks at the registry: often during the grace (a legitimate failover
 * holds a runner only until its peers' first heartbeats, which they write as they connect, so a
 * catch-up's retry a second later finds it let go), then at the pace of the registry.
 */
const HOLDING_CHECK_MS = 200;
const DETACHED_CHECK_MS = 2_000;

/** The fleet watch's pace; the runner sets it (timings.ts), these are the defaults. */
export interface FleetWatchTimings {
  /** COMPANIONS_MS: how often a runner with the fleet looks at who is alive with it. */
  companionsMs: number;
  /** DEFAULT_GONE_AFTER_MS: a runner not heartbeated for this long is no companion. */
  goneAfterMs: number;
  /** DETACH_GRACE_MS: the wait for the fleet after a failover before a runner is detached. */
  detachGraceMs: number;
  /** HOLDING_CHECK_MS and DETACHED_CHECK_MS: the looks while holding, and once detached. */
  holdingCheckMs: number;
  detachedCheckMs: number;
}

export const FLEET_WATCH_TIMINGS: Readonly<FleetWatchTimings> = {
  companionsMs: COMPANIONS_MS,
  goneAfterMs: DEFAULT_GONE_AFTER_MS,
  detachGraceMs: DETACH_GRACE_MS,
  holdingCheckMs: HOLDING_CHECK_MS,
  detachedCheckMs: DETACHED_CHECK_MS,
};

export type FleetState = 'with-fleet' | 'holding' | 'detached';

export interface FleetWatchOptions {
  host: string;
  namespace: () => string;
  /** The pool, while the lock session is up. */
  pool: () => Queryable | null;
  /** The server is read-only: nobody can heartbeat there (the grace waits for it). */
  readOnly: () => boolean;
  events: RunnerEvents;
  log: Logger;
  signal: AbortSignal;
  /** FLEET_WATCH_TIMINGS when not given. */
  timings?: FleetWatchTimings | undefined;
  /** Whether its sleeps hold the process (keep-alive.ts). */
  keepAlive?: KeepAlive | undefined;
}

export class FleetWatch {
  private stateNow: FleetState = 'with-fleet';
  private why: string | null = null;
  /** Each failover starts a new watch; the older one stops. */
  private generation = 0;
  private readonly listeners: (() => void)[] = [];
  /** The other runners alive on this runner's server at its last look (see the header). */
  private companions: string[] = [];
  /** The jobs each of them registered, and the digest of its schedule they were read at. */
  private companionJobs = new Map<string, { digest: string; jobs: ReadonlySet<string> }>();

  /** When the last look succeeded (this host's clock); null before the first. */
  private lookedAtMs: number | null = null;

  private watching = false;

  private readonly t: FleetWatchTimings;

  constructor(private readonly o: FleetWatchOptions) {
    this.t = o.timings ?? FLEET_WATCH_TIMINGS;
  }

  /**
   * Starts looking at the companions every COMPANIONS_MS, until the runner stops: at the first
   * connect, not at construction — a runner that never starts (its `--http` address refused)
   * must not be kept alive by this loop.
   */
  start(): void {
    if (this.watching) return;
    this.watching = true;
    const o = this.o;
    void (async () => {
      while (!o.signal.aborted) {
        const pool = this.stateNow === 'with-fleet' ? o.pool() : null;
        const generation = this.generation;
        if (pool) {
          const alive = await this.lookAtCompanions(pool).catch(() => null);
          // A look that a failover overtook is about the old server: not kept.
          if (alive && generation === this.generation && this.stateNow === 'with-fleet') {
            const hosts = alive.map((p) => p.host).sort();
            if (hosts.join('\n') !== [...this.companionJobs.keys()].sort().join('\n')) {
              o.events.emit('fleet:companions', { hosts });
            }
            this.companions = hosts;
            this.companionJobs = new Map(alive.map((p) => [p.host, p.known]));
            this.lookedAtMs = Date.now();
          }
        }
        await delay(this.t.companionsMs, o.signal, o.keepAlive);
      }
    })();
  }

  /**
   * The other runners alive with this one that run `job`, as the registry showed them at the
   * last look (every COMPANIONS_MS): who may ask first for its fires (coordination/first-asker.ts).
   */
  companionsRunning(job: string): string[] {
    const hosts: string[] = [];
    for (const [host, { jobs }] of this.companionJobs) if (jobs.has(job)) hosts.push(host);
    return hosts;
  }

  /**
   * The other runners alive with this one at the last look (every COMPANIONS_MS), and when that
   * look was (this host's clock; null before the first): daemon/placement-watch.ts judges "no
   * live runner may run this job" only from a look newer than its own start.
   */
  get lastLook(): { hosts: readonly string[]; atMs: number } | null {
    return this.lookedAtMs == null ? null : { hosts: this.companions, atMs: this.lookedAtMs };
  }

  /** The companions alive now, with their jobs: read again only for a schedule that changed. */
  private async lookAtCompanions(
    pool: Queryable,
  ): Promise<{ host: string; known: { digest: string; jobs: ReadonlySet<string> } }[]> {
    const namespace = this.o.namespace();
    const peers = await fleetPeers(pool, namespace, this.o.host);
    const alive = peers.filter((p) => p.agoMs <= this.t.goneAfterMs);
    const stale = alive.filter((p) => this.companionJobs.get(p.host)?.digest !== p.scheduleDigest);
    const fresh = await jobsOfRunners(
      pool,
      namespace,
      stale.map((p) => p.host),
    );
    return alive.map((p) => {
      const read = fresh.get(p.host);
      const known = read
        ? { digest: p.scheduleDigest, jobs: new Set(read) }
        : (this.companionJobs.get(p.host) ?? { digest: '', jobs: new Set<string>() });
      return { host: p.host, known };
    });
  }

  /** Calls `listener` when the runner turns detached or lets go (the registrar writes it). */
  whenChanged(listener: () => void): void {
    this.listeners.push(listener);
  }

  get state(): FleetState {
    return this.stateNow;
  }

  /** Why the runner is detached (for its registry row); null while it is not. */
  get detachedReason(): string | null {
    return this.stateNow === 'detached' ? this.why : null;
  }

  /**
   * The runner reached `server` by a failover from `from`; `lostAt` is when it found its old
   * session lost (this host's clock). Holds at once, until the first look says otherwise.
   */
  arrived(from: string, server: string, lostAt: Date): void {
    const generation = ++this.generation;
    // Without companions there is no fleet to lose (and a detached runner keeps its own).
    const companions = this.companions;
    if (companions.length === 0) return;
    if (this.stateNow === 'with-fleet') this.stateNow = 'holding';
    let arrivedAt = Date.now();
    void (async () => {
      while (!this.o.signal.aborted && generation === this.generation) {
        const pool = this.o.pool();
        if (pool) {
          try {
            const peers = await fleetPeers(pool, this.o.namespace(), this.o.host);
            if (generation !== this.generation) return;
            const sinceLoss = Date.now() - lostAt.getTime();
            // A promoted replica not yet writable takes no heartbeat: the grace starts after.
            if (this.o.readOnly()) arrivedAt = Date.now();
            const here = peers.filter((p) => p.agoMs <= sinceLoss);
            if (here.length > 0) {
              this.companions = here.map((p) => p.host);
              this.set('with-fleet', null);
              return;
            }
            if (Date.now() - arrivedAt >= this.t.detachGraceMs && this.stateNow !== 'detached') {
              const seen = peers.length > 0 ? Math.min(...peers.map((p) => p.agoMs)) : null;
              this.set(
                'detached',
                `after a failover from ${from}, none of the runners alive with it there ` +
                  `(${companions.join(', ')}) has heartbeated on this server (${server}) since` +
                  (seen != null
                    ? ` (the last runner seen here: ${Math.round(seen / 1000)} s ago)`
                    : '') +
                  ': the fleet has left it (an old primary back and writable?), so this runner ' +
                  'holds its fires',
              );
            }
          } catch (err) {
            this.o.log.debug({ err: errorMessage(err) }, 'could not look for the fleet');
          }
        } else {
          // Not connected: the others cannot heartbeat here either.
          arrivedAt = Date.now();
        }
        const detached = this.stateNow === 'detached';
        await delay(
          detached ? this.t.detachedCheckMs : this.t.holdingCheckMs,
          this.o.signal,
          this.o.keepAlive,
        );
      }
    })();
  }

  private set(state: FleetState, why: string | null): void {
    const was = this.stateNow;
    this.stateNow = state;
    this.why = why;
    if (state !== 'detached' && was !== 'detached') return;
    this.o.events.emit('db:detached', { detached: state === 'detached', reason: why ?? '' });
    for (const listener of this.listeners) listener();
  }
}
