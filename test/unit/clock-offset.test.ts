import { describe, expect, it } from 'vitest';
import { OFFSET_SAMPLES, OffsetEstimator } from '../../src/coordination/clock-offset.js';

/** Clocks the test moves by hand: a monotonic one and this host's wall clock. */
function clocks(monotonic = 1_000, wall = Date.parse('2026-01-01T00:00:00.000Z')) {
  const c = { monotonic, wall };
  return {
    c,
    estimator: new OffsetEstimator({ monotonic: () => c.monotonic, wall: () => c.wall }),
  };
}

const at = (iso: string) => new Date(iso);

describe('OffsetEstimator', () => {
  it('knows nothing before a sample, and a round trip without a date is none', () => {
    const { estimator } = clocks();
    estimator.addSample(1_000, 1_002, undefined);
    expect(estimator.best()).toBeNull();
    expect(estimator.databaseNow()).toBeNull();
    expect(estimator.clockOffsetMs).toBeNull();
    expect(estimator.toDatabaseTime(new Date())).toBeNull();
  });

  it('puts the server reading at the middle of the round trip', () => {
    const { c, estimator } = clocks(1_000);
    // Sent at 1,000, answered at 1,010: the server read 00:00:05.000 at about 1,005.
    estimator.addSample(1_000, 1_010, at('2026-01-01T00:00:05.000Z'));
    expect(estimator.best()!.roundTripMs).toBe(10);
    c.monotonic = 1_005;
    expect(estimator.databaseNow()).toEqual(at('2026-01-01T00:00:05.000Z'));
    // Database time moves with the monotonic clock.
    c.monotonic = 3_505;
    expect(estimator.databaseNow()).toEqual(at('2026-01-01T00:00:07.500Z'));
  });

  it("gives the database's clock minus the wall clock, and moves wall times by it", () => {
    const { c, estimator } = clocks(1_000, Date.parse('2026-01-01T00:00:00.000Z'));
    // The database is 2.5 s ahead of this host's wall clock.
    estimator.addSample(1_000, 1_000, at('2026-01-01T00:00:02.500Z'));
    expect(estimator.clockOffsetMs).toBe(2_500);
    expect(estimator.toDatabaseTime(at('2026-01-01T03:00:00.000Z'))).toEqual(
      at('2026-01-01T03:00:02.500Z'),
    );
    // Time passes on both clocks alike: the same offset.
    c.monotonic += 60_000;
    c.wall += 60_000;
    expect(estimator.clockOffsetMs).toBe(2_500);
  });

  it('is not moved by a step of the wall clock, only the offset to it is', () => {
    const { c, estimator } = clocks(1_000, Date.parse('2026-01-01T00:00:00.000Z'));
    estimator.addSample(1_000, 1_000, at('2026-01-01T00:00:00.000Z'));
    const before = estimator.databaseNow();
    c.wall -= 2_000; // NTP steps this host's clock 2 s back
    expect(estimator.databaseNow()).toEqual(before);
    expect(estimator.clockOffsetMs).toBe(2_000);
    expect(estimator.toDatabaseTime(new Date(c.wall))).toEqual(before);
  });

  it('uses the sample with the shortest round trip, the earliest of equals', () => {
    const { c, estimator } = clocks(0);
    // Offsets (database time minus the round trip's middle) 100, 40, 70, 41; round trips 20, 4,
    // 30, 4.
    estimator.addSample(0, 20, new Date(110));
    estimator.addSample(100, 104, new Date(142));
    estimator.addSample(200, 230, new Date(285));
    estimator.addSample(300, 304, new Date(343)); // as short a round trip, later: not chosen
    expect(estimator.best()).toEqual({ offsetMs: 40, roundTripMs: 4 });
    c.monotonic = 1_000;
    expect(estimator.databaseNow()!.getTime()).toBe(1_040);
  });

  it(`keeps the last ${OFFSET_SAMPLES} samples only`, () => {
    const { estimator } = clocks(0);
    // A very good sample, then OFFSET_SAMPLES worse ones: the good one ages out.
    estimator.addSample(0, 1, new Date(500));
    for (let i = 1; i <= OFFSET_SAMPLES; i++) {
      expect(estimator.best()!.roundTripMs, `after ${i - 1} later samples`).toBe(1);
      estimator.addSample(i * 100, i * 100 + 10 + i, new Date(i * 100 + 1_000));
    }
    // Of the kept ones (round trips 11 … 18) the shortest.
    expect(estimator.best()!.roundTripMs).toBe(11);
  });
});
