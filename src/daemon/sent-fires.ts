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
 * for SETTLED_KEPT_MS after, never longer: what is kept once it is over is its time and its skip,
 * not the run's result (its output tail). A fire that was not attempted, or stopped before its
 * contention, is forgotten at once: a catch-up may then try it. After a failover all are
 * (`forget`): their rows may be gone with the old primary, and the recovery that follows decides.
 */
import type { FireOutcome } from '../fire/fire-types.js';

/** How long a fire is remembered once it is over. */
export const SETTLED_KEPT_MS = 60_000;

type Skipped = Extract<FireOutcome, { status: 'skipped' }>;

/** What the sender reports once a fire is over. */
export interface FireSettled {
  /** Nothing was claimed (not attempted, stopped first): forget it, a catch-up may try it. */
  forget: boolean;
  /** This runner's skip, when it skipped the fire. */
  skipped: Skipped | null;
}

/** Why a fire is no longer remembered (read by a second sender that was waiting on it). */
export type Forgotten = 'not-attempted' | 'failover';

export interface SentFire {
  /** Settles when the fire's contention has settled (its run may go on). */
  contended: Promise<unknown>;
  /** Settles when the fire is over, run included. */
  over: Promise<unknown>;
  /** When it was over (monotonic ms), once it is. */
  settledAt: number | null;
  /** Its skip, when this runner skipped it (a small record, kept as it was told). */
  skipped: Skipped | null;
  /** Set when the fire is forgotten, and why. */
  forgotten: Forgotten | null;
}

/** What a settled fire's promises become: nothing of the run is held through them. */
const OVER: Promise<void> = Promise.resolve();

export class SentFires {
  private readonly byJob = new Map<string, Map<number, SentFire>>();
  private lastSweep: number;

  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly keptMs = SETTLED_KEPT_MS,
  ) {
    this.lastSweep = now();
  }

  get(job: string, at: Date): SentFire | undefined {
    return this.byJob.get(job)?.get(at.getTime());
  }

  /** Remembers a fire just sent: `contended` is its chain's promise, `settled` its end. */
  add(job: string, at: Date, contended: Promise<unknown>, settled: Promise<FireSettled>): void {
    this.prune();
    let fires = this.byJob.get(job);
    if (!fires) this.byJob.set(job, (fires = new Map()));
    const key = at.getTime();
    const entry: SentFire = {
      contended,
      over: settled,
      settledAt: null,
      skipped: null,
      forgotten: null,
    };
    fires.set(key, entry);
    void settled.then(({ forget, skipped }) => {
      entry.contended = OVER;
      entry.over = OVER;
      if (fires.get(key) !== entry) return;
      if (forget) {
        entry.forgotten = 'not-attempted';
        fires.delete(key);
        if (fires.size === 0 && this.byJob.get(job) === fires) this.byJob.delete(job);
        return;
      }
      entry.settledAt = this.now();
      entry.skipped = skipped;
    });
  }

  /** Forgets every fire (a failover). */
  forget(): void {
    for (const fires of this.byJob.values()) {
      for (const entry of fires.values()) entry.forgotten = 'failover';
    }
    this.byJob.clear();
  }

  /** How many fires are remembered (for tests). */
  get size(): number {
    let n = 0;
    for (const fires of this.byJob.values()) n += fires.size;
    return n;
  }

  /**
   * Drops the fires over for longer than the window, every job's, at most once per window: a
   * job that fires rarely, or was reloaded away, keeps nothing for longer than twice the window.
   */
  private prune(): void {
    const now = this.now();
    if (now - this.lastSweep < this.keptMs) return;
    this.lastSweep = now;
    const before = now - this.keptMs;
    for (const [job, fires] of this.byJob) {
      for (const [key, entry] of fires) {
        if (entry.settledAt != null && entry.settledAt < before) fires.delete(key);
      }
      if (fires.size === 0) this.byJob.delete(job);
    }
  }
}
