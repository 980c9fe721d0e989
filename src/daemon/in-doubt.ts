/**
 * Fires in doubt after a database failover (recovery.ts asks, once per job, after a reconnect that
 * reached another server: failover.ts's `Failover`).
 *
 * With asynchronous replication the rows written on the old primary just before it died — winner
 * rows, verdicts — may never have reached the promoted replica. On the new primary such a fire
 * looks as if nobody attempted it, and catch-up would run it again. So every fire of the job's
 * look-back window up to the moment this runner found its old session lost that the new primary
 * has no row of is *in doubt*: it is recorded `missed` with the kind `in-doubt` at once (before
 * any catch-up, so that no other runner catches it up either), and left out of catch-up — unless
 * the job says `onFailover: catchUp` (an idempotent batch), when it is caught up as any fire
 * nobody attempted.
 *
 * With semi-synchronous replication acknowledged on the old server (semi-sync.ts: on, AFTER_SYNC,
 * no fallback from the runner's first sample of that server to its last, shortly before the
 * loss), every commit of that stretch reached a replica before it returned: only fires before its
 * start (`settledSince`) can be in doubt — in practice none, as the stretch starts when the runner
 * reached the server, before its first claim there.
 *
 * What this cannot know: whether the fire really ran (only the old primary's binlog or the job's
 * own records can say), and a runner that first connects after the failover has no old server to
 * compare with — it relies on the in-doubt rows the runners that lived through it wrote first.
 */
import type { JobDefinition } from '../config/schema.js';
import { eventTargets } from '../config/notify-targets.js';
import type { Queryable } from '../store/deadline.js';
import { insertMissed } from '../store/fire-writes.js';
import { firesWithRows } from '../store/fire-reads.js';
import type { Failover } from './failover.js';

/** The failover as recovery needs it: the old server's loss, in database time. */
export interface FailoverWindow {
  from: string;
  to: string;
  /** Fires up to this instant may have run on the old server. */
  until: Date;
  /** From this instant on semi-sync vouches for the old server's commits (semi-sync.ts). */
  settledSince: Date | null;
}

/** A failover (failover.ts) in database time (`toFleet`: this host's clock to the database's). */
export function failoverWindow(
  f: Failover | null,
  toFleet: (hostTime: Date) => Date,
): FailoverWindow | null {
  if (!f) return null;
  const settledSince = f.settledSince && toFleet(f.settledSince);
  return { from: f.from, to: f.to, until: toFleet(f.lostAt), settledSince };
}

export interface InDoubtScope {
  pool: Queryable;
  namespace: string;
  host: string;
}

/**
 * Records the fires in doubt of `job` among `fires` (the look-back window from `from`) and
 * returns the fires left for catch-up. Without a failover, or with `onFailover: catchUp`, that is
 * every one of them.
 */
export async function setAsideInDoubt(
  s: InDoubtScope,
  failover: FailoverWindow | null,
  job: JobDefinition,
  fires: Date[],
  from: Date,
): Promise<{ left: Date[]; inDoubt: Date[] }> {
  if (!failover || job.onFailover === 'catchUp') return { left: fires, inDoubt: [] };
  const until = failover.until;
  // With semi-sync acknowledged since `settledSince`, only fires before it can have lost rows.
  const settled = failover.settledSince?.getTime() ?? Infinity;
  const candidates = fires.filter((at) => at.getTime() <= until.getTime() && +at < settled);
  if (candidates.length === 0) return { left: fires, inDoubt: [] };
  const seen = await firesWithRows(s.pool, s.namespace, job.name, from, until);
  const doubt = new Set(candidates.filter((at) => !seen.has(at.getTime())).map((at) => +at));
  const recorded: Date[] = [];
  for (const at of doubt) {
    const reason =
      `in doubt: the database failed over (from ${failover.from} to ${failover.to}) after ` +
      'this fire, and the new primary has no row of it: it may have run on the old primary ' +
      "and its rows lost with the replication lag, so it is not caught up (the job's " +
      `onFailover: skip; recorded by ${s.host})`;
    const attempt = {
      namespace: s.namespace,
      job: job.name,
      scheduledAt: new Date(at),
      trigger: 'schedule' as const,
      host: s.host,
      pid: process.pid,
    };
    if (await insertMissed(s.pool, attempt, reason, eventTargets(job.notify), 'in-doubt')) {
      recorded.push(new Date(at));
    }
  }
  return { left: fires.filter((at) => !doubt.has(at.getTime())), inDoubt: recorded };
}
