/**
 * The fires this runner has sent down its jobs' chains lately: one fire is contended once per
 * runner, one row per runner per fire.
 *
 * The loop and a recovery can both reach a fire — the loop contends it just as the runner
 * reconnects, and the recovery, listing the fires without rows, lists it before the loop's row
 * exists (seen twice in catch-up tests, 2026-12-06). The second sender is then told what came of
 * the first's contention instead of contending again (daemon/dispatcher.ts).
 *
 * The two meet only in the gap between a recovery's look at the rows and its dispatch — a round
 * trip, or a stalled database's few seconds — so a fire is kept while it is contended or runs and
 * for SETTLED_KEPT_MS after, never longer: what is kept is a few numbers per fire, not the run's
 * result (its output tail). A fire that was not attempted, or stopped before its contention, is
 * forgotten at once: a catch-up may then try it. After a failover all are (`forget`): their rows
 * may be gone with the old primary.
 */
import type { FireOutcome } from '../fire/fire-types.js';

/** How long a fire is remembered once it is over. */
export const SETTLED_KEPT_MS = 60_000;

type Skipped = Extract<FireOutcome, { status: 'skipped' }>;

export interface SentFire {
  /** Settles when the fire's contention has settled (its run may go on). */
  readonly contended: Promise<unknown>;
  /** Settles when the fire is over, run included. */
  readonly over: Promise<unknown>;
  /** When it was over (monotonic ms), once it is. */
  settledAt: number | null;
  /** Its skip, when this runner skipped it (a small record, kept as it was told). */
  skipped: Skipped | null;
}

export class SentFires {
  private readonly byJob = new Map<string, Map<number, SentFire>>();

  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly keptMs = SETTLED_KEPT_MS,
  ) {}

  get(job: string, at: Date): SentFire | undefined {
    return this.byJob.get(job)?.get(at.getTime());
  }

  /** Remembers a fire just sent: `contended` and `outcome` are its chain's promises. */
  add(
    job: string,
    at: Date,
    contended: Promise<unknown>,
    outcome: Promise<FireOutcome | null>,
  ): void {
    this.prune(job);
    let fires = this.byJob.get(job);
    if (!fires) this.byJob.set(job, (fires = new Map()));
    const key = at.getTime();
    const entry: SentFire = { contended, over: outcome, settledAt: null, skipped: null };
    fires.set(key, entry);
    void outcome.then((o) => {
      if (fires.get(key) !== entry) return;
      if (o == null || o.status === 'not-attempted' || o.status === 'stopped') {
        fires.delete(key);
        if (fires.size === 0 && this.byJob.get(job) === fires) this.byJob.delete(job);
        return;
      }
      entry.settledAt = this.now();
      if (o.status === 'skipped') entry.skipped = { ...o };
    });
  }

  /** Forgets every fire (a failover). */
  forget(): void {
    this.byJob.clear();
  }

  /** How many fires are remembered (for tests). */
  get size(): number {
    let n = 0;
    for (const fires of this.byJob.values()) n += fires.size;
    return n;
  }

  /** Drops the job's fires over for longer than the window. */
  private prune(job: string): void {
    const fires = this.byJob.get(job);
    if (!fires) return;
    const before = this.now() - this.keptMs;
    for (const [key, entry] of fires) {
      if (entry.settledAt != null && entry.settledAt < before) fires.delete(key);
    }
    if (fires.size === 0) this.byJob.delete(job);
  }
}
