/**
 * How a runner paces its contentions when many fires come at once (500 jobs on the same second):
 *
 * - a bound (`Limiter`): contentions are batched per turn of the event loop (store/batcher.ts),
 *   so a whole instant contends at once in a few statements — but not without limit: thousands
 *   of fires on one second still take their turns;
 * - an order (`shuffleWithinInstant`): each runner takes the fires of one instant in an order of
 *   its own, so the runners mostly contend for different jobs first instead of all queueing on
 *   the same lock, one job after another.
 */
import type { DueFire } from './fire-schedule.js';

/** At most `max` holders at a time; the others wait in arrival order. */
export class Limiter {
  private holders = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly max: number) {}

  /** Resolves with the release function once a place is free. Release exactly once. */
  async acquire(): Promise<() => void> {
    if (this.holders >= this.max) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.holders++;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // The place passes straight to the next in line (holders stays the same), else frees up.
      const next = this.waiting.shift();
      if (next) next();
      else this.holders--;
    };
  }
}

/** `due` (sorted by instant) with the fires of each instant in random order. */
export function shuffleWithinInstant(due: DueFire[]): DueFire[] {
  const out = [...due];
  for (let start = 0; start < out.length;) {
    let end = start + 1;
    while (
      end < out.length &&
      out[end]!.scheduledAt.getTime() === out[start]!.scheduledAt.getTime()
    ) {
      end++;
    }
    // Fisher–Yates over [start, end).
    for (let i = end - 1; i > start; i--) {
      const j = start + Math.floor(Math.random() * (i - start + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    start = end;
  }
  return out;
}
