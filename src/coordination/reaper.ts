/**
 * The reaper: marks `running` rows whose runner is gone as `lost`, so that history never claims a
 * run is going on when nobody runs it. A row's runner is alive exactly as long as its lock
 * session holds its session lock (`sessionLockName`), so no timeout has to be guessed.
 *
 * It runs in two places:
 * - every runner reaps its namespace at an interval (`--reaper-interval`); with several runners
 *   the rows are found sooner, and the conditional update declares each row once;
 * - a winner reaps its job just before it claims a fire. Holding the job's lock proves that no
 *   earlier run of the job holds it any more, so the earlier run's row gets its `lost` verdict —
 *   and its `finished_at` — before the new run's row starts. The history then never shows a dead
 *   run overlapping the next one merely because nobody had looked yet.
 *
 * A run it declares lost that is past its warn (`duration.warn`) without having been told slow
 * — its runner died first, or before the warn and nobody looked until after — is told `slow` then,
 * in the same transaction (store/run-verdicts.ts `markLost`): by whichever runner's reaper
 * writes the `lost`, once. Judged from the row's own `warn_at`, not the job's definition.
 */
import type { EventTargets } from '../config/notify-targets.js';
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import { findOrphanRuns, markLost, type OrphanRun } from '../store/run-verdicts.js';

/** Time between two looks for `running` rows whose runner is gone (the runner's reaper tick). */
export const DEFAULT_REAPER_MS = 10_000;

/** The reaper's pace; the runner sets it (daemon/timings.ts, `baton start --reaper-interval`). */
export interface ReaperTimings {
  /** DEFAULT_REAPER_MS. */
  intervalMs: number;
}

export const REAPER_TIMINGS: Readonly<ReaperTimings> = { intervalMs: DEFAULT_REAPER_MS };

export interface ReapScope {
  namespace: string;
  /** Only this job's rows (a winner about to claim); all jobs of the namespace otherwise. */
  job?: string;
  /** Rows that started before this instant belong to an earlier life of the server. */
  serverStartedBefore: Date;
  /** The runner doing it, named in the rows it marks. */
  noticedBy: string;
  /** What made it look, for the row: "at <time>" or "when it took the job's lock". */
  occasion?: string;
  /** Whom a job's `lost` (and `slow`) is told to (its `notify:`); nobody when absent. */
  targetsOf?: (job: string) => EventTargets | undefined;
}

export async function reapOrphanRuns(
  db: Queryable,
  scope: ReapScope,
  log?: Logger,
): Promise<number> {
  const orphans = await findOrphanRuns(
    db,
    scope.namespace,
    scope.serverStartedBefore,
    scope.job == null ? undefined : [scope.job],
  );
  return declareLost(db, orphans, scope, log);
}

/** Marks runs of `scope.namespace` found orphaned `lost` (each once, whoever writes first). */
export async function declareLost(
  db: Queryable,
  orphans: readonly OrphanRun[],
  scope: ReapScope,
  log?: Logger,
): Promise<number> {
  let reaped = 0;
  for (const run of orphans) {
    const session =
      run.lockConnectionId == null ? 'no lock session' : `lock session ${run.lockConnectionId}`;
    const error =
      `lost: its runner on ${run.host} is gone (${session} ended, or the server restarted); ` +
      `noticed by ${scope.noticedBy} ${scope.occasion ?? `at ${new Date().toISOString()}`}`;
    const targets = scope.targetsOf?.(run.job);
    const notices = targets && {
      scope: {
        namespace: scope.namespace,
        subject: run.job,
        fire: run.scheduledAt,
        slot: run.slot,
        rerun: run.rerun,
      },
      targets,
    };
    if (await markLost(db, scope.namespace, run.id, error, notices)) {
      reaped++;
      log?.warn({ job: run.job, runId: run.id, runnerHost: run.host }, 'run declared lost');
    }
  }
  return reaped;
}
