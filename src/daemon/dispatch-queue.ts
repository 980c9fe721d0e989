/**
 * The fires a runner's wakes have made ready to dispatch, in the order they became ready,
 * dispatched DISPATCH_SLICE at a time, a slice per turn of the event loop (the first in the turn
 * that made them ready, when nothing is waiting before them).
 *
 * Why slices: a fire's statements go out only once the turn that dispatched it ends (its steps
 * are batched per turn: store/batcher.ts). 10,000 fires due at once, dispatched in one turn, kept
 * the server idle while the runner set every one of them up (0.6 s of CPU), and the fires after a
 * lead held up the answers to the first ones as long. Sliced, the first claims are on the server
 * while the later fires are still being set up.
 *
 * Why one queue for every wake, first in first out: a job's fires must reach its chain in order
 * (a later fire chained first would run, and the earlier one be skipped as overlapping it). A
 * wake's lead groups join after their lead (dispatcher.ts `groupByLead`), and a wake that comes
 * while an earlier one's slices are still waiting joins behind them.
 */

/**
 * Fires dispatched in one turn: as many as may contend at once (dispatcher.ts MAX_CONTENTIONS),
 * so a wake that all contends at once is one turn as before. Smaller slices cost more: a storm of
 * 500 fires in slices of 250 made its steps' batches smaller and more (bench many-jobs:
 * statements 0.05 → 0.14 per fire per runner, lag p99 192 → 293 ms).
 */
export const DISPATCH_SLICE = 1_000;

export interface ReadyFire {
  job: string;
}

export class DispatchQueue<T extends ReadyFire> {
  private readonly ready: T[] = [];
  /** How many fires of each job are waiting here (an operator's fire must not pass them). */
  private readonly waiting = new Map<string, number>();
  private draining = false;

  constructor(
    private readonly dispatch: (fire: T) => void,
    private readonly signal: AbortSignal,
  ) {}

  /** Adds fires behind those waiting; the first slice goes in this turn if none wait. */
  push(fires: readonly T[]): void {
    if (this.signal.aborted) return;
    for (const f of fires) {
      this.ready.push(f);
      this.waiting.set(f.job, (this.waiting.get(f.job) ?? 0) + 1);
    }
    if (!this.draining) this.drain();
  }

  /** Whether a fire of `job` waits here for its turn. */
  has(job: string): boolean {
    return this.waiting.has(job);
  }

  private drain(): void {
    this.draining = false;
    if (this.signal.aborted) {
      this.ready.length = 0;
      this.waiting.clear();
      return;
    }
    for (const f of this.ready.splice(0, DISPATCH_SLICE)) {
      const left = this.waiting.get(f.job)! - 1;
      if (left > 0) this.waiting.set(f.job, left);
      else this.waiting.delete(f.job);
      this.dispatch(f);
    }
    if (this.ready.length > 0) {
      this.draining = true;
      setImmediate(() => this.drain());
    }
  }
}
