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
    // Offsets (database time minus the round trip's middle) 46, 40, 52, 41; round trips 20, 4,
    // 30, 4: all within each other's error bounds (one clock, read through slower and faster
    // round trips).
    estimator.addSample(0, 20, new Date(56));
    estimator.addSample(100, 104, new Date(142));
    estimator.addSample(200, 230, new Date(267));
    estimator.addSample(300, 304, new Date(343)); // as short a round trip, later: not chosen
    expect(estimator.best()).toEqual({ offsetMs: 40, roundTripMs: 4 });
    c.monotonic = 1_000;
    expect(estimator.databaseNow()!.getTime()).toBe(1_040);
  });

  it(`keeps the last ${OFFSET_SAMPLES} samples only`, () => {
    const { estimator } = clocks(0);
    // A very good sample, then OFFSET_SAMPLES worse ones that agree with it: the good one ages
    // out.
    estimator.addSample(0, 1, new Date(1_000));
    for (let i = 1; i <= OFFSET_SAMPLES; i++) {
      expect(estimator.best()!.roundTripMs, `after ${i - 1} later samples`).toBe(1);
      estimator.addSample(i * 100, i * 100 + 10 + i, new Date(i * 100 + 1_005));
    }
    // Of the kept ones (round trips 11 … 18) the shortest.
    expect(estimator.best()!.roundTripMs).toBe(11);
  });

  it("follows a step of the database's clock at the first sample after it, back or forward", () => {
    const { c, estimator } = clocks(0);
    const t0 = Date.parse('2026-01-01T00:00:00.000Z');
    // Heartbeats every second on a quick link (2 ms round trips): the database at t0 + monotonic.
    for (let m = 0; m < 4_000; m += 1_000) estimator.addSample(m, m + 2, new Date(t0 + m + 1));
    c.monotonic = 4_000;
    expect(estimator.databaseNow()!.getTime()).toBe(t0 + 4_000);
    // NTP on the database host steps its clock back 8 s; the link is slower now (100 ms round
    // trips), so every later sample is worse than the ones from before the step.
    const stepMs = -8_000;
    estimator.addSample(4_000, 4_100, new Date(t0 + 4_050 + stepMs));
    c.monotonic = 4_100;
    expect(estimator.databaseNow()!.getTime()).toBe(t0 + 4_100 + stepMs);
    expect(estimator.best()!.roundTripMs).toBe(100);
    // Samples that agree with the new clock keep it (the slower link is no step).
    estimator.addSample(5_000, 5_090, new Date(t0 + 5_045 + stepMs + 20));
    c.monotonic = 6_000;
    expect(estimator.databaseNow()!.getTime()).toBe(t0 + 6_000 + stepMs + 20);
    // And forward again, by 3 s.
    estimator.addSample(6_000, 6_002, new Date(t0 + 6_001 + stepMs + 3_000));
    c.monotonic = 7_000;
    expect(estimator.databaseNow()!.getTime()).toBe(t0 + 7_000 + stepMs + 3_000);
  });

  it('takes a sample within the error bounds for the same clock, not a step', () => {
    const { estimator } = clocks(0);
    // Offset 1,000 with a 2 ms round trip, then 1,030 with a 60 ms one: 30 ms apart, within
    // (2 + 60) / 2 + 1 = 32 ms. The quick one stays the estimate.
    estimator.addSample(0, 2, new Date(1_001));
    estimator.addSample(1_000, 1_060, new Date(2_060));
    expect(estimator.best()).toEqual({ offsetMs: 1_000, roundTripMs: 2 });
    // 40 ms apart with the same round trips: beyond the bound, so the clock moved.
    estimator.addSample(2_000, 2_060, new Date(3_070));
    expect(estimator.best()).toEqual({ offsetMs: 1_040, roundTripMs: 60 });
  });
});
