/**
 * A bound on how many fires a runner contends for at once. Contentions are batched per turn of
 * the event loop (store/batcher.ts), so a whole instant contends together in a few statements —
 * but not without limit: a schedule of thousands of jobs on one second still takes turns, and
 * never holds thousands of contentions (and their pool statements) at once.
 */

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
