/**
 * The fault soak's plan (test/soak/plan.ts): a seed names one plan, and every plan keeps the
 * rules the soak's verdicts rely on — a fault every 4–8 s, each undone inside the window, never
 * two at once on one runner or two server restarts at once, `freeze` only on the proxied runner.
 */
import { describe, expect, it } from 'vitest';
import { FAULT_KINDS, mulberry32, planFaults } from '../soak/plan.js';

const options = { windowMs: 180_000, runners: 5, proxied: 1, warmupMs: 3_000 };

describe('the soak plan', () => {
  it('is the same for the same seed, and differs between seeds', () => {
    expect(planFaults({ ...options, seed: 7 })).toEqual(planFaults({ ...options, seed: 7 }));
    expect(planFaults({ ...options, seed: 7 })).not.toEqual(planFaults({ ...options, seed: 8 }));
    expect(Array.from({ length: 3 }, mulberry32(1))).toEqual(
      Array.from({ length: 3 }, mulberry32(1)),
    );
  });

  it('keeps its rules for many seeds', () => {
    const seen = new Set<string>();
    for (let seed = 0; seed < 200; seed++) {
      const plan = planFaults({ ...options, seed });
      expect(plan.length, `seed ${seed}`).toBeGreaterThanOrEqual(20);
      for (let i = 0; i < plan.length; i++) {
        const f = plan[i]!;
        seen.add(f.kind);
        expect(f.atMs + f.holdMs, `seed ${seed} #${f.n} ends in the window`).toBeLessThanOrEqual(
          options.windowMs,
        );
        if (f.kind === 'freeze') expect(f.runner).toBe(options.proxied);
        if (i > 0) {
          const gap = f.atMs - plan[i - 1]!.atMs;
          // A gap may be a multiple when no fault was possible at a turn.
          expect(gap, `seed ${seed} #${f.n}`).toBeGreaterThanOrEqual(4_000);
        }
        // No earlier fault still holds this one's runner (or the server).
        for (const e of plan.slice(0, i)) {
          if (e.runner === f.runner) {
            expect(e.atMs + e.holdMs, `seed ${seed}: #${e.n} and #${f.n}`).toBeLessThan(f.atMs);
          }
        }
      }
    }
    expect([...seen].sort()).toEqual([...FAULT_KINDS].sort());
  });
});
