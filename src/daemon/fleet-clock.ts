/**
 * The fleet's clock: the database's. Every runner fires by it, so all of them wake together
 * whatever their hosts' skew, and none starts a fire before its instant by the database.
 *
 * It is this host's clock corrected by the offset that the lock session's heartbeats measure
 * (coordination/clock-offset.ts); the last offset is kept across reconnects, so the loop keeps
 * its time while the database is away. Before the first measurement it is this host's clock.
 */
import type { LockSession } from '../coordination/lock-session.js';
import type { RunnerEvents } from './runner-events.js';

export const DEFAULT_CLOCK_WARN_MS = 1_000;

/** The clock check's threshold; the runner sets it (timings.ts, `baton start --clock-warn`). */
export interface ClockTimings {
  /** DEFAULT_CLOCK_WARN_MS: an offset from the database beyond this is a warning. */
  warnMs: number;
}

export const CLOCK_TIMINGS: Readonly<ClockTimings> = { warnMs: DEFAULT_CLOCK_WARN_MS };

export class FleetClock {
  /** The database's clock minus this host's; kept across reconnects. */
  private offsetMs = 0;
  private warned = false;

  constructor(
    private readonly lock: () => LockSession | null,
    private readonly events: RunnerEvents,
    private readonly warnMs = DEFAULT_CLOCK_WARN_MS,
  ) {}

  /** Now, by the database's clock. */
  now(): Date {
    const measured = this.lock()?.databaseNow();
    if (measured) {
      this.offsetMs = measured.getTime() - Date.now();
      return measured;
    }
    return new Date(Date.now() + this.offsetMs);
  }

  /** A moment of this host's clock on the database's clock. */
  toFleetTime(local: Date): Date {
    return new Date(local.getTime() + this.offsetMs);
  }

  /** This host's clock minus the database's, the way operators ask; null until measured. */
  get hostAheadMs(): number | null {
    const offset = this.lock()?.clockOffsetMs;
    return offset == null ? null : -offset;
  }

  /** Tells once when this host's clock drifts beyond the threshold, and once when it is back. */
  check(): void {
    const ahead = this.hostAheadMs;
    if (ahead == null) return;
    const over = Math.abs(ahead) > this.warnMs;
    if (over !== this.warned) {
      this.events.emit('clock:offset', { clockOffsetMs: ahead, thresholdMs: this.warnMs, over });
    }
    this.warned = over;
  }
}
