/**
 * The run's own half of `slow` (a job's `duration.warn`, docs/configuration.md): a timer at the
 * run's warn instant that flags the row and enqueues the event (store/duration-flags.ts
 * `markSlow`), and, once the run has ended, whether its verdict must judge it instead.
 *
 * The timer is armed from this runner's own measure — the moment before the claim, which the
 * row's `started_at` (the claim's `NOW(3)`) cannot precede — so it never comes late; when it
 * comes early by the database's clock (a queued fire's wait, a relative warn set after the
 * claim) the database says how long is left, and it is armed again. The database decides; the
 * flag's conditional UPDATE makes the event one, whoever else — the verdict, a reaper that finds
 * this runner gone — flags it first.
 */
import { MAX_TIMER_MS } from '../config/defaults.js';
import type { Queryable } from '../store/deadline.js';
import { markSlow, type LimitNotice } from '../store/duration-flags.js';

/** A flag the database did not answer is asked again this much later, while the run goes on. */
export const SLOW_RETRY_MS = 1_000;

/**
 * How far this runner's measure of a run may be off the row's (its clock against the database's,
 * the claim's round trip): within it, the verdict leaves the judgement to the database.
 */
export const LIMIT_JUDGE_MARGIN_MS = 1_000;

export class SlowWatch {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;
  private warnMs: number | null = null;
  /** This watch flagged the run slow: its verdict need not judge it. */
  private flagged = false;

  /**
   * @param claimFrom `performance.now()` before the claim: the row's `started_at` is not earlier.
   * @param claimFromWall The same moment by this host's clock, for `verdictJudges`.
   */
  constructor(
    private readonly pool: Queryable,
    private readonly runId: number,
    private readonly told: LimitNotice | undefined,
    private readonly claimFrom: number,
    private readonly claimFromWall: number,
  ) {}

  /**
   * The run's warn is `warnMs` after its start: watch for it once `written` (its `warn_at` on the
   * row: a relative warn's own statement) has settled. Its verdict judges it from now on, should
   * the run end first.
   */
  arm(warnMs: number, written: Promise<unknown> = Promise.resolve()): void {
    if (this.stopped || this.warnMs != null) return;
    this.warnMs = warnMs;
    // A warn the row did not take has nothing to flag (the verdict's judgement then finds no
    // `warn_at` and changes nothing).
    written.then(
      () => this.wait(this.claimFrom + warnMs - performance.now()),
      () => {},
    );
  }

  private wait(ms: number): void {
    if (this.stopped) return;
    // A warn past a timer's range is looked at again at the range's end (the database then says
    // how long is left).
    this.timer = setTimeout(() => void this.check(), Math.min(Math.max(0, ms), MAX_TIMER_MS));
  }

  private async check(): Promise<void> {
    this.timer = null;
    if (this.stopped) return;
    try {
      const mark = await markSlow(this.pool, this.runId, this.told);
      if (mark.flagged) this.flagged = true;
      // Not due yet by the database's clock: armed again for what is left. Null: flagged by
      // someone else, or over — nothing to wait for.
      else if (mark.dueInMs != null) this.wait(mark.dueInMs);
    } catch {
      // The database did not answer: asked again while the run goes on; once it has ended, its
      // verdict judges it (verdictJudges), or a reaper if this runner dies.
      this.wait(SLOW_RETRY_MS);
    }
  }

  /**
   * Whether the run's verdict must judge `slow` (RunOutcome.limits): it has a warn, it may have
   * ended past it (by this runner's measure, within LIMIT_JUDGE_MARGIN_MS), and this watch did
   * not flag it. Asked once the run has ended at `endedAt` (this host's clock).
   */
  verdictJudges(endedAt: Date): boolean {
    if (this.warnMs == null || this.flagged) return false;
    return endedAt.getTime() - this.claimFromWall >= this.warnMs - LIMIT_JUDGE_MARGIN_MS;
  }

  /** The run has ended: no more looks (one in flight may still flag it, which is all right). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
