/**
 * The link's reconnect pacing (src/daemon/link.ts): jittered waits in the upper half of a base
 * that doubles from 200 ms to a 1 s cap, so a runner is back within about a second of the server
 * and never retries in a tight loop. The e2e proof of the return is test/e2e/reconnect.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { reconnectDelayMs } from '../../src/daemon/link.js';

describe('reconnectDelayMs', () => {
  it('waits in the upper half of 200 ms doubling to a 1 s cap', () => {
    const low = (attempt: number) => reconnectDelayMs(attempt, () => 0);
    const high = (attempt: number) => reconnectDelayMs(attempt, () => 1);
    expect([0, 1, 2, 3, 4, 50, 10_000].map(low)).toEqual([100, 200, 400, 500, 500, 500, 500]);
    expect([0, 1, 2, 3, 4, 50, 10_000].map(high)).toEqual([200, 400, 800, 1000, 1000, 1000, 1000]);
  });

  it('spreads a fleet over the interval (jitter), never below its floor', () => {
    const waits = Array.from({ length: 1_000 }, () => reconnectDelayMs(10));
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(500);
    expect(Math.max(...waits)).toBeLessThanOrEqual(1_000);
    // Every 100 ms band of [500, 1000) is used: no lockstep.
    expect(new Set(waits.map((w) => Math.floor(w / 100))).size).toBeGreaterThanOrEqual(5);
  });
});
