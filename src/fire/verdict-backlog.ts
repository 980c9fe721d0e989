/**
 * What the database could not take when it happened, kept to be written once it answers again —
 * after a reconnect, at the reaper's next tick, or at the stop:
 *
 * - Verdicts (the pool timed out, the server went away). The run is over and its lock released,
 *   but its row still says `running`: the verdict is written late, with the `finished_at` of when
 *   the run really ended.
 * - Fires whose claim could not be written (`ClaimNotRecordedError`,
 *   coordination/fire-protocol.ts: a table lock, an ALTER, a backup's global read lock, an
 *   fsync stall; or a database clock that had not reached the fire). The runner held the job's lock
 *   and gave it back without running the job; with its lock session up, no look-back would ever
 *   mark the fire `missed`, so it is recorded here: a claim that did commit unseen is closed first
 *   (`abandonClaim`), then the fire gets a `missed` row of kind `not-claimed` that says why — in
 *   the fire key's `winner = 0` slot, and only while the fire has no winner, so a fire another
 *   runner recorded (won, or marked missed) is left as it is: the entry yields, and no fire gets a
 *   second row of either.
 *
 * Kept in memory only: if this process dies first, the reaper of a surviving runner marks a
 * verdict's row `lost` (its lock session is gone), which is the truth as far as anyone can tell;
 * an unrecorded fire is then left as before, with the skips of the other runners naming this one.
 */
import type { EventTargets } from '../config/notify-targets.js';
import type { UnrecordedClaim } from '../coordination/fire-protocol.js';
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import { abandonClaim, insertMissed } from '../store/fire-writes.js';
import { finishRun, type RunOutcome } from '../store/run-verdicts.js';

/** A fire contended but not recorded, and what its `missed` row says. */
export interface UnrecordedFire extends UnrecordedClaim {
  reason: string;
  /** Whom the job's `missed` event is told to. */
  targets?: EventTargets;
}

export class VerdictBacklog {
  private readonly verdicts = new Map<number, RunOutcome>();
  private readonly fires: UnrecordedFire[] = [];
  /** The write going on, which a second caller joins. */
  private writing: Promise<void> | null = null;

  constructor(private readonly log: Logger) {}

  keep(runId: number, outcome: RunOutcome): void {
    this.verdicts.set(runId, outcome);
  }

  /** A fire whose claim could not be written: recorded `missed` (`not-claimed`) later. */
  keepUnrecordedFire(fire: UnrecordedFire): void {
    this.fires.push(fire);
    const { job, scheduledAt } = fire.attempt;
    this.log.warn({ job, scheduledAt }, 'fire not recorded: kept to record it missed later');
  }

  /**
   * Writes the kept verdicts in order, then the unrecorded fires; stops at the first the database
   * still refuses. A call while a write is going joins it (a verdict kept meanwhile is written by
   * it too): the reconnect, the reaper's tick and the stop each call this, and two writes of one
   * backlog wrote every verdict twice, one statement each, which a stop over a slow link waited out.
   */
  write(pool: Queryable | null): Promise<void> {
    if (!pool) return Promise.resolve();
    this.writing ??= this.writeAll(pool).finally(() => (this.writing = null));
    return this.writing;
  }

  private async writeAll(pool: Queryable): Promise<void> {
    for (const [runId, outcome] of this.verdicts) {
      try {
        const wrote = await finishRun(pool, runId, outcome);
        this.verdicts.delete(runId);
        this.log.info({ runId, status: outcome.status, wrote }, 'late verdict written');
      } catch (err) {
        this.log.warn({ runId, err: errorMessage(err) }, 'late verdict not written yet');
        return;
      }
    }
    while (this.fires.length > 0) {
      const fire = this.fires[0]!;
      const { job, scheduledAt } = fire.attempt;
      try {
        if (!fire.abandoned) {
          await abandonClaim(pool, fire.attempt, fire.lockConnectionId, fire.reason);
          fire.abandoned = true;
        }
        const wrote = await insertMissed(
          pool,
          fire.attempt,
          fire.reason,
          fire.targets,
          'not-claimed',
        );
        this.fires.shift();
        this.log.info({ job, scheduledAt, wrote }, 'late missed row written');
      } catch (err) {
        this.log.warn(
          { job, scheduledAt, err: errorMessage(err) },
          'late missed row not written yet',
        );
        return;
      }
    }
  }
}
