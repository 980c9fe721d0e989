/**
 * What a library-mode replica asks the database once a second, in one statement: the run requests
 * it may take (`baton run <job>`: store/run-requests.ts) and its namespace's revision of the
 * schedules created at run time (store/schedules.ts), which says whether any changed since the
 * replica last read them. One read for both, because an idle replica's statements are its cost
 * to the server (bench idle: a heartbeat, this, and the registry's few), and the schedules' watch
 * would otherwise double what the request watch alone costs.
 *
 * The revision's arm is one primary-key read of a one-row-per-namespace table; it never waits
 * for a writer (a consistent read takes no lock).
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';
import { openRunRequestsQuery, toOpenRunRequest, type OpenRunRequest } from './run-requests.js';

export interface ReplicaInbox {
  requests: OpenRunRequest[];
  /** The namespace's schedules revision (0 before its first schedule). */
  schedulesRevision: number;
}

export async function readReplicaInbox(
  db: Queryable,
  q: { namespace: string; host: string; jobs: readonly string[] },
): Promise<ReplicaInbox> {
  const requests = openRunRequestsQuery(q.namespace, q.host, q.jobs);
  // A request always has a job; the revision's row is the one without.
  const [rows] = await db.query<RowDataPacket[]>(
    `(${requests.sql})
     UNION ALL
     (SELECT revision, NULL, NULL, NULL FROM baton_schedule_revisions WHERE namespace = ?)`,
    [...requests.values, q.namespace],
  );
  const revision = rows.find((r) => r.job == null);
  return {
    requests: rows.filter((r) => r.job != null).map(toOpenRunRequest),
    schedulesRevision: revision ? Number(revision.id) : 0,
  };
}
