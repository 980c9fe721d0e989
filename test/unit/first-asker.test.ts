/**
 * coordination/first-asker.ts: which runner asks first for a fire. Every runner must find the
 * same answer from the same hosts in any order; the fires spread evenly; and a runner that joins
 * or leaves moves only its own share (rendezvous hashing), so the fleet's view may lag a little
 * without reshuffling everyone's fires.
 */
import { describe, expect, it } from 'vitest';
import { firstAsker } from '../../src/coordination/first-asker.js';

const HOSTS = ['batch-01', 'batch-02', 'batch-03', 'batch-04'];
const BASE = Date.UTC(2026, 11, 4, 0, 0, 0);

/** `count` fires: 50 jobs × whole seconds. */
function fires(count: number): { job: string; at: Date }[] {
  return Array.from({ length: count }, (_, i) => ({
    job: `job-${i % 50}`,
    at: new Date(BASE + Math.floor(i / 50) * 1000),
  }));
}

describe('firstAsker', () => {
  it('is the same whatever the order of the hosts, and null without hosts', () => {
    for (const { job, at } of fires(500)) {
      const answer = firstAsker(HOSTS, job, at);
      expect(firstAsker([...HOSTS].reverse(), job, at)).toBe(answer);
      expect(firstAsker(new Set([HOSTS[2]!, HOSTS[0]!, HOSTS[3]!, HOSTS[1]!]), job, at)).toBe(
        answer,
      );
    }
    expect(firstAsker([], 'job', new Date(BASE))).toBeNull();
    expect(firstAsker(['only'], 'job', new Date(BASE))).toBe('only');
  });

  it("spreads the fires evenly over the hosts, and a job's fires over time", () => {
    const all = fires(20_000);
    const share = new Map<string, number>();
    for (const { job, at } of all) {
      const host = firstAsker(HOSTS, job, at)!;
      share.set(host, (share.get(host) ?? 0) + 1);
    }
    // 5,000 each expected; the binomial spread is ~61, so ±400 is far outside chance.
    for (const host of HOSTS) expect(share.get(host), host).toBeGreaterThan(4_600);
    for (const host of HOSTS) expect(share.get(host), host).toBeLessThan(5_400);
    // One job's 400 fires are not all one host's either.
    const oneJob = all.filter((f) => f.job === 'job-7').map((f) => firstAsker(HOSTS, f.job, f.at));
    expect(new Set(oneJob).size).toBe(HOSTS.length);
  });

  it('moves only the share of a host that leaves or joins', () => {
    const without = HOSTS.slice(0, 3);
    let moved = 0;
    for (const { job, at } of fires(5_000)) {
      const before = firstAsker(HOSTS, job, at)!;
      const after = firstAsker(without, job, at)!;
      if (before !== 'batch-04') expect(after, `${job} ${at.toISOString()}`).toBe(before);
      else moved++;
    }
    // The leaver's fires (about a quarter) went to the others; nobody else's moved.
    expect(moved).toBeGreaterThan(1_000);
    expect(moved).toBeLessThan(1_500);
  });

  it('tells apart hosts and instants that differ only at their end', () => {
    const hosts = ['srv-1', 'srv-2', 'srv-3'];
    const picks = new Set<string>();
    for (let s = 0; s < 30; s++) picks.add(firstAsker(hosts, 'tick', new Date(BASE + s * 1000))!);
    expect(picks.size).toBe(3);
  });
});
