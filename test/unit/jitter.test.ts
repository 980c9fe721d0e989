import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { jitterDelayMs, plannedStart } from '../../src/schedule/jitter.js';

const at = new Date('2027-03-01T12:00:00.000Z');
const fires = (count: number) =>
  Array.from({ length: count }, (_, i) => new Date(at.getTime() + i * 60_000));

describe('jitterDelayMs', () => {
  it('is the documented derivation: sha256 of namespace, job and instant, 6 bytes, mod jitter', () => {
    const digest = createHash('sha256')
      .update('prod\0settle\0' + at.toISOString())
      .digest();
    expect(jitterDelayMs('prod', 'settle', at, 30_000)).toBe(digest.readUIntBE(0, 6) % 30_000);
  });

  it('is the same on every call (every runner computes the same delay)', () => {
    const a = jitterDelayMs('prod', 'settle', at, 30_000);
    expect(jitterDelayMs('prod', 'settle', new Date(at.getTime()), 30_000)).toBe(a);
  });

  it('is in [0, jitter) and a whole number of ms', () => {
    for (const fire of fires(2_000)) {
      const d = jitterDelayMs('prod', 'settle', fire, 2_000);
      expect(Number.isInteger(d)).toBe(true);
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThan(2_000);
    }
  });

  it('spreads over the range across fires', () => {
    const buckets = new Array<number>(10).fill(0);
    for (const fire of fires(5_000)) {
      buckets[Math.floor(jitterDelayMs('prod', 'settle', fire, 30_000) / 3_000)]! += 1;
    }
    // 500 expected per bucket; a constant or clustered delay would leave buckets empty.
    for (const n of buckets) expect(n).toBeGreaterThan(400);
    for (const n of buckets) expect(n).toBeLessThan(600);
  });

  it('is 0 without jitter', () => {
    expect(jitterDelayMs('prod', 'settle', at, 0)).toBe(0);
    expect(plannedStart('prod', 'settle', at, 0)).toEqual(at);
  });

  it('differs between jobs, and between namespaces', () => {
    const list = fires(50);
    const of = (ns: string, job: string) => list.map((f) => jitterDelayMs(ns, job, f, 30_000));
    expect(of('prod', 'settle')).not.toEqual(of('prod', 'report'));
    expect(of('prod', 'settle')).not.toEqual(of('staging', 'settle'));
  });

  it('plannedStart is the instant plus the delay', () => {
    const d = jitterDelayMs('prod', 'settle', at, 30_000);
    expect(plannedStart('prod', 'settle', at, 30_000).getTime()).toBe(at.getTime() + d);
  });
});
