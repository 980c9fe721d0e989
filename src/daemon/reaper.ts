/**
 * The reaper: marks `running` rows whose runner is gone as `lost`, so that history never claims a
 * run is going on when nobody runs it. Every runner reaps its namespace at an interval; with
 * several runners the rows are found sooner, and the conditional update makes sure each row is
 * declared once. A row's runner is alive exactly as long as its lock session holds its session
 * lock (`sessionLockName`), so no timeout has to be guessed.
 */
import type { Logger } from '../log.js';
import type { Queryable } from '../store/deadline.js';
import { findOrphanRuns, markLost } from '../store/runs.js';

export async function reapOrphanRuns(
  db: Queryable,
  namespace: string,
  serverStartedBefore: Date,
  noticedBy: string,
  log: Logger,
): Promise<number> {
  let reaped = 0;
  for (const run of await findOrphanRuns(db, namespace, serverStartedBefore)) {
    const session =
      run.lockConnectionId == null ? 'no lock session' : `lock session ${run.lockConnectionId}`;
    const error =
      `lost: its runner on ${run.host} is gone (${session} ended, or the server restarted); ` +
      `noticed by ${noticedBy} at ${new Date().toISOString()}`;
    if (await markLost(db, run.id, error)) {
      reaped++;
      log.warn({ job: run.job, runId: run.id, runnerHost: run.host }, 'run declared lost');
    }
  }
  return reaped;
}
