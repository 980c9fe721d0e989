/**
 * Verdicts the database could not take when their runs ended (the pool timed out, the server
 * went away). The run is over and its lock released, but its row still says `running`: the
 * verdict is kept here and written once the database answers again — after a reconnect, or at
 * the reaper's next tick — with the `finished_at` of when the run really ended.
 *
 * Kept in memory only: if this process dies first, the reaper of a surviving runner marks the
 * row `lost` (its lock session is gone), which is the truth as far as anyone can tell.
 */
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import { finishRun, type RunOutcome } from '../store/run-verdicts.js';

export class VerdictBacklog {
  private readonly verdicts = new Map<number, RunOutcome>();
  /** The write going on, which a second caller joins. */
  private writing: Promise<void> | null = null;

  constructor(private readonly log: Logger) {}

  keep(runId: number, outcome: RunOutcome): void {
    this.verdicts.set(runId, outcome);
  }

  /**
   * Writes the kept verdicts in order; stops at the first the database still refuses. A call
   * while a write is going joins it (a verdict kept meanwhile is written by it too): the
   * reconnect, the reaper's tick and the stop each call this, and two writes of one backlog
   * wrote every verdict twice, one statement each, which a stop over a slow link waited out.
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
  }
}
