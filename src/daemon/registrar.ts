/**
 * The runner's row in `baton_runners`: registered when it connects, refreshed every
 * `registryMs` (with the clock check, which shares the tick), rewritten with the schedule on a
 * reload and when the hour its next fires are counted from changes, and marked stopped when it
 * stops. `baton status` and the dashboard read it.
 *
 * A row that another live process took over means two runners share one host id — history could
 * not tell them apart — so that is reported, not fought over: the row is taken back only when
 * its owner is gone.
 */
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import {
  heartbeatRunner,
  markRunnerStopped,
  registerRunner,
  registryOwner,
  type LoadedJob,
  type RunnerHeartbeat,
} from '../store/runners.js';
import { upcomingAnchor } from '../schedule/upcoming.js';
import { version } from '../version.js';
import type { FleetClock } from './fleet-clock.js';
import type { DatabaseLink } from './link.js';
export const DEFAULT_REGISTRY_MS = 5_000;

/** The registry's pace; the runner sets it (timings.ts, `baton start --registry-interval`). */
export interface RegistrarTimings {
  /** DEFAULT_REGISTRY_MS: time between two refreshes of the runner's row (its heartbeat). */
  refreshMs: number;
}

export const REGISTRAR_TIMINGS: Readonly<RegistrarTimings> = { refreshMs: DEFAULT_REGISTRY_MS };

export interface RegistrarOptions {
  host: string;
  /** Its tags (config/placement.ts), shown by `baton status`. */
  tags: readonly string[];
  namespace: () => string;
  link: DatabaseLink;
  clock: FleetClock;
  log: Logger;
  /**
   * Every job of the loaded file with its fingerprint and since when this runner runs it, and its
   * next fires counted from `anchor` (schedule/upcoming.ts).
   */
  loadedJobs: (anchor: Date) => Promise<Record<string, LoadedJob>>;
}

export class Registrar {
  private hostClashReported = false;
  /**
   * Another runner of this process (its own lock session, alive) held this host id's row at the
   * first registration: two schedulers of one application with one identity. This one neither
   * registers nor marks the row stopped — it is the other's — and its runner's start is refused.
   */
  private heldHere = false;
  /** The anchor of the next fires the row has (ms); null: not written yet, or the write failed. */
  private writtenAnchor: number | null = null;

  constructor(private readonly o: RegistrarOptions) {
    // `baton status` against this server says so at once, not at the next heartbeat.
    o.link.fleet.whenChanged(() => void this.register(false, false));
  }

  private async heartbeat(withSchedule = true): Promise<RunnerHeartbeat> {
    const anchor = upcomingAnchor(this.o.clock.now());
    const schedule = withSchedule ? await this.o.loadedJobs(anchor) : {};
    if (withSchedule) this.writtenAnchor = anchor.getTime();
    const lock = this.o.link.lock;
    return {
      namespace: this.o.namespace(),
      host: this.o.host,
      pid: process.pid,
      version,
      // The registry says how far the runner is ahead of the database, the way operators ask.
      clockOffsetMs: this.o.clock.hostAheadMs,
      lockConnectionId: lock?.connectionId ?? null,
      dbServer: this.o.link.serverIdentity,
      detached: this.o.link.fleet.detachedReason,
      schedule,
      tags: this.o.tags,
    };
  }

  /** Registers (`fresh`: at connect) or refreshes the row; a failure is logged, not thrown. */
  async register(fresh: boolean, withSchedule = true): Promise<void> {
    const pool = this.o.link.anyPool;
    if (!pool) return;
    const namespace = this.o.namespace();
    if (this.heldHere) return;
    try {
      if (fresh) {
        const owner = await registryOwner(pool, namespace, this.o.host);
        const mine = this.o.link.lock?.connectionId ?? null;
        // Another runner of this very process: same pid, registered since this process began
        // (two durations compared, free of clock offsets; only a step of the database's clock
        // between the registration and now could misjudge it), and
        // alive on another lock session. A previous incarnation with the same pid (pid 1 in a
        // restarted container) registered before this process began: its host is taken over,
        // as from any other process.
        if (
          owner?.alive &&
          owner.pid === process.pid &&
          owner.registeredMsAgo <= process.uptime() * 1000 &&
          owner.lockConnectionId != null &&
          owner.lockConnectionId !== mine
        ) {
          this.heldHere = true;
          return;
        }
        // This runner's own row, on this very lock session: another registration of this same
        // connect that landed first (seen on a slow link, where two of them overlap).
        const own = owner?.pid === process.pid && owner.lockConnectionId === mine;
        if (owner?.alive && !own) this.reportHostClash(owner.pid);
        await registerRunner(pool, await this.heartbeat());
        return;
      }
      if (await heartbeatRunner(pool, await this.heartbeat(withSchedule), { withSchedule })) return;
      const owner = await registryOwner(pool, namespace, this.o.host);
      if (owner?.alive) {
        this.reportHostClash(owner.pid);
        return;
      }
      await registerRunner(pool, await this.heartbeat());
    } catch (err) {
      this.writtenAnchor = null;
      this.o.log.warn({ err: errorMessage(err) }, 'could not register in baton_runners');
    }
  }

  /** The registry tick: the clock check, then the heartbeat while the runner can coordinate. */
  async refresh(): Promise<void> {
    this.o.clock.check();
    if (!this.o.link.usable) return;
    // The schedule only changes on reload, which registers it at once; its next fires are
    // counted again from each new hour, so that the runners count from the same anchor.
    const anchor = upcomingAnchor(this.o.clock.now()).getTime();
    await this.register(false, anchor !== this.writtenAnchor);
  }

  /** The row says the runner stopped (best effort: the database may be gone). */
  async markStopped(pool: Queryable | null): Promise<void> {
    if (!pool || !this.o.link.everConnected || this.heldHere) return;
    await markRunnerStopped(pool, this.o.namespace(), this.o.host, process.pid).catch(() => {});
  }

  /** Whether another runner of this process runs as this host id in this namespace. */
  get identityHeldHere(): boolean {
    return this.heldHere;
  }

  private reportHostClash(otherPid: number): void {
    if (this.hostClashReported) return;
    this.hostClashReported = true;
    this.o.log.error(
      { otherPid },
      `another runner uses the host id "${this.o.host}" (pid ${otherPid}): give every ` +
        'runner its own --host, or history and status cannot tell them apart',
    );
  }
}
