/**
 * Run ids that name one run only, also across a failover. `baton_runs.id` is what operators,
 * jobs (`BATON_RUN_ID`, `ctx.runId`) and alerts key on. A promoted replica continues its
 * AUTO_INCREMENT from the last row it replicated, so an id that the old primary gave a run whose
 * row was lost with the replication lag would be handed out again, to another run.
 *
 * So a runner that reaches a promoted server (daemon/failover.ts), before it contends for any fire
 * there, moves the counter past every id the old primary can have handed out: to
 * MAX(id) + RUN_ID_GAP. It needs neither the ALTER privilege nor DDL: it inserts a placeholder row
 * with that explicit id and rolls the insert back. InnoDB's counter follows an explicit id at
 * the insert and is never rolled back (its persistent counter, MariaDB 10.2.4+ and MySQL 8.0+,
 * keeps it across a restart too); the row is never seen by anyone, nor binlogged, and needs no
 * DELETE grant. The first run after the move carries its id in its row events, so the replicas'
 * counters follow it.
 *
 * The move is recorded in `baton_failovers` (this module owns the table): the fleet's other
 * runners, under the same named lock, find it done since their own loss and leave the ids alone.
 * Moving twice would only skip another gap.
 */
import type { RowDataPacket } from 'mysql2/promise';
import { inTransaction, type Queryable } from './deadline.js';

/**
 * How far past the new server's highest id the ids move: more than any replication lag can hold
 * (a fleet writing 5,000 rows a second fills it in 55 hours). BIGINT UNSIGNED leaves room for
 * billions of failovers, and ids stay exact JavaScript numbers for millions.
 */
export const RUN_ID_GAP = 1_000_000_000;

/**
 * The placeholder's fire: in no namespace (a namespace is never empty) and a job name no
 * schedules file can give (they start with a letter or digit), so it meets the unique fire key of
 * no real fire — and it is rolled back anyway.
 */
const PLACEHOLDER_JOB = '#failover';

export interface FailoverMove {
  /** The promoted server and the one before (`ServerFacts.identity`). */
  server: string;
  fromServer: string;
  /** The runner that moves the ids. */
  host: string;
}

/**
 * Whether the run ids were moved on `server` within the last `withinMs` (by the server's clock):
 * another runner of this failover did it since this runner lost its old session.
 */
export async function runIdsMovedWithin(
  db: Queryable,
  server: string,
  withinMs: number,
): Promise<boolean> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SELECT 1 FROM baton_failovers
      WHERE server = ? AND moved_at >= NOW(3) - INTERVAL ? MICROSECOND LIMIT 1`,
    [server, Math.max(0, Math.round(withinMs * 1000))],
  );
  return rows.length > 0;
}

/**
 * Moves baton_runs' AUTO_INCREMENT to MAX(id) + RUN_ID_GAP (see the header) and records it.
 * Returns the highest id before (null: no rows) and the floor every later run id is above.
 */
export async function moveRunIds(
  db: Queryable,
  move: FailoverMove,
): Promise<{ before: number | null; floor: number }> {
  const moved = await inTransaction(db, async (tx) => {
    const [[top]] = await tx.query<RowDataPacket[]>('SELECT MAX(id) AS id FROM baton_runs');
    const before = top?.id == null ? null : Number(top.id);
    const floor = (before ?? 0) + RUN_ID_GAP;
    await tx.query(
      `INSERT INTO baton_runs (id, namespace, job, scheduled_at, triggered_by, status, host,
         started_at)
       VALUES (?, '', ?, NOW(3), 'failover', 'placeholder', ?, NOW(3))`,
      [floor, PLACEHOLDER_JOB, move.host],
    );
    // The counter has moved with the insert; the row goes (inTransaction's COMMIT then ends no
    // transaction).
    await tx.query('ROLLBACK');
    return { before, floor };
  });
  await db.query(
    `INSERT INTO baton_failovers
       (server, from_server, moved_at, host, runs_id_before, runs_id_floor)
     VALUES (?, ?, NOW(3), ?, ?, ?)`,
    [move.server, move.fromServer, move.host, moved.before, moved.floor],
  );
  return moved;
}
