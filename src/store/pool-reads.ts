/**
 * Who holds a pool's slots (docs/pools.md). A slot is a named lock on a runner's lock session
 * (lock-names.ts `poolSlotLockName`), so the truth of "taken" is the server's, `IS_USED_LOCK`;
 * the rows say who the holder is: the `running` rows of the pool (`baton_runs.pool`) on that lock
 * session, or, for a holder between taking its slot and writing its claim, the runner whose
 * session it is. One statement for the slots of every pool asked.
 */
import type { RowDataPacket } from 'mysql2/promise';
import type { Queryable } from './deadline.js';

/** A run that holds a slot of the pool. */
export interface PoolHolderRun {
  id: number;
  job: string;
  host: string;
  startedAt: Date;
}

/** One pool's slots as the server has them now. */
export interface PoolUse {
  /** How many of the slots asked for are taken. */
  used: number;
  /** Of the slots asked for. */
  slots: number;
  /** The runs holding them (a lock session may hold several, one per run), oldest first. */
  runs: PoolHolderRun[];
  /**
   * The holders no run of the pool was found for (taking their slot, about to claim): the host
   * by its registry row (a connection id when no runner row names the session), and how many
   * slots it holds.
   */
  claiming: { holder: string; slots: number }[];
}

/** A pool asked about: its name (the `pool` column) and the lock names of its slots. */
export interface PoolAsk {
  pool: string;
  slotNames: readonly string[];
}

export async function poolUses(
  db: Queryable,
  namespace: string,
  asks: readonly PoolAsk[],
): Promise<PoolUse[]> {
  if (asks.length === 0) return [];
  const slots = asks.flatMap((a, i) => a.slotNames.map((name, k) => [i, k, a.pool, name]));
  const held = slots
    .map(() => 'SELECT ? AS ask, ? AS slot, ? AS pool, IS_USED_LOCK(?) AS holder')
    .join(' UNION ALL ');
  // Each slot's holder, with the pool's running rows on its session (a session holding two
  // slots has two such rows, each met on both slots: told apart by the run's id below) and the
  // live runner whose session it is.
  const [rows] = await db.query<RowDataPacket[]>(
    // The runner is named by its registry row whatever its heartbeat's age: the session holds
    // the slot, so it is alive (a runner whose heartbeat is late on a loaded host is still the
    // holder). One row at most: a row of an earlier server life may carry the same id.
    `SELECT s.ask, s.slot, s.holder, r.id, r.job, r.host, r.started_at,
            (SELECT n.host FROM baton_runners n
              WHERE n.namespace = ? AND n.lock_connection_id = s.holder AND n.stopped_at IS NULL
              ORDER BY n.last_seen_at DESC LIMIT 1) AS runner
       FROM (${held}) AS s
       LEFT JOIN baton_runs r
         ON s.holder IS NOT NULL AND r.namespace = ? AND r.status = 'running'
        AND r.lock_connection_id = s.holder AND r.pool = s.pool`,
    [namespace, ...slots.flat(), namespace],
  );
  return asks.map((ask, i) => {
    const taken = rows.filter((r) => Number(r.ask) === i && r.holder != null);
    const runs = new Map<number, PoolHolderRun>();
    const claiming = new Map<number, { holder: string; slots: number }>();
    for (const r of taken) {
      const holder = Number(r.holder);
      if (r.id == null) {
        const name = r.runner != null ? String(r.runner) : `connection ${holder}`;
        const seen = claiming.get(holder);
        claiming.set(holder, { holder: name, slots: (seen?.slots ?? 0) + 1 });
        continue;
      }
      runs.set(Number(r.id), {
        id: Number(r.id),
        job: String(r.job),
        host: String(r.host),
        startedAt: r.started_at as Date,
      });
    }
    return {
      used: new Set(taken.map((r) => Number(r.slot))).size,
      slots: ask.slotNames.length,
      runs: [...runs.values()].sort((x, y) => x.startedAt.getTime() - y.startedAt.getTime()),
      claiming: [...claiming.values()],
    };
  });
}
