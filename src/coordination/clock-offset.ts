/**
 * How far the database's clock is from this host's, estimated from round trips that read
 * `NOW(3)` (the lock session's first statement and every heartbeat).
 *
 * One sample per round trip: the server read its clock about halfway between sending and
 * receiving, so a sample's error is at most half its round trip. Samples are kept against the
 * monotonic clock (`performance.now()`), not the wall clock: a wall clock that is stepped (NTP,
 * an operator) would otherwise corrupt both the round trip and the offset. Of the last few
 * samples the one with the shortest round trip is used, as NTP does.
 *
 * That choice assumes the database's clock moves with the monotonic one. When it is stepped (NTP
 * or an operator on the database host), the best sample is from before the step and would be kept
 * for up to OFFSET_SAMPLES heartbeats, however old: a clock stepped back by more than a claim waits
 * for it (5 s) had every fire of that span given up as "still in the future", with no row. So a
 * sample that disagrees with the estimate by more than both samples' error bounds allow (half of
 * each round trip, plus a millisecond for `NOW(3)`'s resolution) says the clock moved: the window
 * restarts from it.
 *
 * Pure: the clocks are injected (the system's by default), and the caller does the round trips.
 */

/** The clocks an estimate is made and used with. */
export interface OffsetClocks {
  /** A monotonic clock in ms (`performance.now()`): round trips are timed on it. */
  monotonic(): number;
  /** This host's wall clock in ms since the epoch (`Date.now()`). */
  wall(): number;
}

export const SYSTEM_CLOCKS: OffsetClocks = {
  monotonic: () => performance.now(),
  wall: () => Date.now(),
};

/** One round trip's estimate: database time minus the monotonic clock, and its round trip. */
export interface OffsetSample {
  offsetMs: number;
  roundTripMs: number;
}

/** How many recent samples the offset is estimated from. */
export const OFFSET_SAMPLES = 8;

/** `NOW(3)` reads the server's clock to the millisecond, truncated: a sample's extra error. */
const DATABASE_CLOCK_RESOLUTION_MS = 1;

export class OffsetEstimator {
  private readonly samples: OffsetSample[] = [];

  constructor(
    private readonly clocks: OffsetClocks = SYSTEM_CLOCKS,
    private readonly keep = OFFSET_SAMPLES,
  ) {}

  /** The monotonic clock's reading: take one when a round trip is sent and one when answered. */
  monotonicNow(): number {
    return this.clocks.monotonic();
  }

  /**
   * Records the round trip sent at `sentAt` and answered at `receivedAt` (both `monotonicNow()`)
   * in which the server read its clock as `dbNow`. An answer without a date is no sample.
   */
  addSample(sentAt: number, receivedAt: number, dbNow: Date | undefined): void {
    if (!(dbNow instanceof Date)) return;
    const sample = {
      offsetMs: dbNow.getTime() - (sentAt + receivedAt) / 2,
      roundTripMs: receivedAt - sentAt,
    };
    if (this.stepped(sample)) this.samples.length = 0;
    this.samples.push(sample);
    if (this.samples.length > this.keep) this.samples.shift();
  }

  /**
   * Whether `sample` and the current estimate cannot both be right about one clock: each is off
   * the truth by at most half its round trip (and the clock's resolution), so a wider gap means
   * the database's clock was stepped (or drifted that far) between them.
   */
  private stepped(sample: OffsetSample): boolean {
    const best = this.best();
    if (!best) return false;
    const bound = (sample.roundTripMs + best.roundTripMs) / 2 + DATABASE_CLOCK_RESOLUTION_MS;
    return Math.abs(sample.offsetMs - best.offsetMs) > bound;
  }

  /** The kept sample with the shortest round trip (the earliest of equals); null before one. */
  best(): OffsetSample | null {
    let best: OffsetSample | null = null;
    for (const s of this.samples) if (!best || s.roundTripMs < best.roundTripMs) best = s;
    return best;
  }

  /** Now by the database's clock; null before the first sample. */
  databaseNow(): Date | null {
    const best = this.best();
    return best ? new Date(this.clocks.monotonic() + best.offsetMs) : null;
  }

  /** The database's clock minus this host's wall clock, in ms; null before the first sample. */
  get clockOffsetMs(): number | null {
    const now = this.databaseNow();
    return now ? now.getTime() - this.clocks.wall() : null;
  }

  /** A moment of this host's wall clock on the database's clock; null before a sample. */
  toDatabaseTime(local: Date): Date | null {
    const offset = this.clockOffsetMs;
    return offset == null ? null : new Date(local.getTime() + offset);
  }
}
