/**
 * The capability probe: before a runner (or `baton run`) contends for a fire, it proves on the
 * real connection path that a named lock means what baton needs it to mean. Engines that speak
 * MySQL's protocol answer `GET_LOCK` very differently (docs/runbook.md, "Where baton may run"):
 * TiDB before 6.1 has no-op lock functions that return 1 to every session (or an error unless a
 * switch is on); TiDB 6.1+ clamps the timeout to at least 1 s, releases a held lock after
 * `max-txn-ttl` (1 h by default) and answers `IS_USED_LOCK` from another session with 1, not the
 * holder; ProxySQL answers `CONNECTION_ID()` itself; older OceanBase has no `GET_LOCK`. A version
 * string does not tell all of that, and a proxy in between changes it, so the probe asks:
 *
 *   session A takes a fresh lock; session B asks for it with `GET_LOCK(name, 0)` and must get 0,
 *   at once; B's `IS_USED_LOCK(name)` must name A's `CONNECTION_ID()`.
 *
 * - B gets the lock too, or `GET_LOCK` fails: locks exclude no one here. Refused (exit 78): every
 *   runner would run every fire.
 * - The holder is not named: baton still coordinates (the locks exclude), but what reads the
 *   holder by its connection id is degraded. The reaper falls back to the registry's heartbeats
 *   (store/run-verdicts.ts, RUNNER_GONE_SQL); the registry's "alive", the host-clash check, the
 *   skip reasons' holder and the ending of a lost session do not. A warning says so.
 * - B's answer took a second or more (TiDB's clamp): every lost contention costs that long on the
 *   lock session. A warning says so.
 * - The engine can release a held lock under its holder (TiDB's `max-txn-ttl`): `lockTtlMs`; the
 *   runner warns about each job whose timeout could outlive it (daemon/runner.ts).
 *
 * Cost: one more connection and four short statements per connect, on the connection the
 * migrations open anyway (A) and one opened for the probe (B), closed at once.
 */
import { randomBytes } from 'node:crypto';
import type { RowDataPacket } from 'mysql2/promise';
import type { DatabaseTarget } from '../config/database-url.js';
import { longestRetryWaitsMs, type RetryPolicy } from '../config/retry-delay.js';
import { dbErrorCategory, errorMessage } from '../errors.js';
import { openConnection } from '../store/connect.js';
import { queryWithDeadline, type Queryable } from '../store/deadline.js';
import { MIGRATION_CHECK_DEADLINE_MS } from '../store/migrate.js';
import type { KeepAlive } from '../keep-alive.js';
import { UnsupportedServerError } from '../store/server-check.js';

/** An answer of B's `GET_LOCK(name, 0)` slower than this is worth a warning (TiDB: ≥ 1 s). */
export const SLOW_REFUSAL_MS = 900;
/** TiDB's `max-txn-ttl` default, 1 h: a lock held longer may be released under its holder. */
export const TIDB_LOCK_TTL_MS = 60 * 60 * 1000;

export interface LockCapability {
  /** The engine as it names itself: `VERSION()` and `@@version_comment`. */
  engine: string;
  /** `IS_USED_LOCK` from another session names the holder's `CONNECTION_ID()`. */
  holderNamed: boolean;
  /** How long B's refused `GET_LOCK(name, 0)` took to answer. */
  refusalMs: number;
  /** A held lock may be released under its holder after this long; null: never. */
  lockTtlMs: number | null;
  /** What is degraded on this server, for the log; empty on MySQL and MariaDB. */
  warnings: string[];
}

const WHAT_TO_DO =
  "Run baton against MySQL or MariaDB (one primary, or a proxy that sends all of baton's " +
  'traffic to one writer); see "Where baton may run" in docs/runbook.md';

/** Runs the probe with `a` as session A; opens and closes session B itself. */
export async function probeLocks(
  a: Queryable,
  target: DatabaseTarget,
  keepAlive?: KeepAlive,
  /** Of the second session's statement (`a`'s are the caller's): a silent link fails the probe. */
  statementDeadlineMs = MIGRATION_CHECK_DEADLINE_MS,
): Promise<LockCapability> {
  const [[self]] = await a.query<RowDataPacket[]>(
    'SELECT CONNECTION_ID() AS id, VERSION() AS version, @@version_comment AS comment',
  );
  const engine = [self?.version, self?.comment].filter((v) => v != null && v !== '').join(' ');
  const name = `baton-probe:${randomBytes(12).toString('hex')}`;
  const took = await lockFunction(engine, () =>
    a.query<RowDataPacket[]>('SELECT GET_LOCK(?, 0) AS got', [name]),
  );
  if (Number(took[0]?.got) !== 1) {
    throw new UnsupportedServerError(
      `the database server (${engine}) did not grant a free named lock (GET_LOCK answered ` +
        `${String(took[0]?.got)}): baton cannot coordinate there. ${WHAT_TO_DO}.`,
    );
  }
  try {
    const b = await openConnection(target, { create: false, ...(keepAlive ? { keepAlive } : {}) });
    try {
      const sentAt = performance.now();
      const [[other]] = await queryWithDeadline<RowDataPacket[]>(
        b,
        'SELECT GET_LOCK(?, 0) AS got, IS_USED_LOCK(?) AS holder',
        [name, name],
        statementDeadlineMs,
      );
      const refusalMs = Math.round(performance.now() - sentAt);
      if (Number(other?.got) !== 0) {
        throw new UnsupportedServerError(
          `the database server (${engine}) gave one named lock to two sessions at once ` +
            `(GET_LOCK answered ${String(other?.got)} to the second): its lock functions ` +
            'exclude no one (TiDB before 6.1 has no-op ones), so every runner would run every ' +
            `fire. ${WHAT_TO_DO}.`,
        );
      }
      return judge(engine, Number(self?.id), other?.holder, refusalMs);
    } finally {
      // Ended, not dropped: a dropped connection is an "Aborted connection" in the server's log
      // at every runner start.
      await b.end().catch(() => b.destroy());
    }
  } finally {
    await a.query('SELECT RELEASE_LOCK(?)', [name]).catch(() => {});
  }
}

/** A lock function the server refuses (no such function, a no-op switched off): refused. */
async function lockFunction(
  engine: string,
  query: () => Promise<[RowDataPacket[], unknown]>,
): Promise<RowDataPacket[]> {
  try {
    return (await query())[0];
  } catch (err) {
    if (dbErrorCategory(err) !== 'server') throw err;
    throw new UnsupportedServerError(
      `the database server (${engine}) refused GET_LOCK (${errorMessage(err)}): baton ` +
        `coordinates with named locks and cannot run there. ${WHAT_TO_DO}.`,
    );
  }
}

function judge(
  engine: string,
  holderId: number,
  holder: unknown,
  refusalMs: number,
): LockCapability {
  const warnings: string[] = [];
  const holderNamed = holder != null && Number(holder) === holderId;
  if (!holderNamed) {
    warnings.push(
      `IS_USED_LOCK from another session answers ${String(holder)}, not the holder's ` +
        `CONNECTION_ID() ${holderId} (TiDB 6.1+, or a proxy such as ProxySQL that answers ` +
        'CONNECTION_ID() itself). The locks still exclude; degraded: the reaper judges a run ' +
        "by its runner's registry heartbeat (gone after 15 s without one, not at once; a " +
        "`baton run`'s run, which has no registry row, may be marked lost while it runs), the " +
        'registry and `baton status` may show live runners as gone and miss a host clash, ' +
        "skips do not name the lock's holder, and a lost lock session is left to its idle " +
        'timeout (60 s) instead of being ended by its runner',
    );
  }
  if (refusalMs >= SLOW_REFUSAL_MS) {
    warnings.push(
      `GET_LOCK(name, 0) took ${refusalMs} ms to refuse a held lock (TiDB waits at least 1 s): ` +
        'every fire lost to another runner holds up the lock session that long',
    );
  }
  // TiDB's own documentation: a lock is released once held longer than max-txn-ttl. The setting is
  // not readable over SQL on every version; its default is what a deployment most likely has.
  const lockTtlMs = /tidb/i.test(engine) ? TIDB_LOCK_TTL_MS : null;
  return { engine, holderNamed, refusalMs, lockTtlMs, warnings };
}

/**
 * The jobs a run of which may outlive its lock where a lock can expire under its holder after
 * `lockTtlMs`: no timeout, or attempts that together may hold the lock that long (retries keep
 * the job's lock: every attempt at its timeout, and the waits between them — a backoff's at
 * their longest, config/retry-delay.ts).
 */
export function jobsOutlivingLocks(
  jobs: Iterable<RetryPolicy & { timeoutMs: number | null }>,
  lockTtlMs: number,
): string[] {
  return [...jobs]
    .filter(
      (j) =>
        j.timeoutMs == null || j.timeoutMs * (j.retries + 1) + longestRetryWaitsMs(j) >= lockTtlMs,
    )
    .map((j) => j.name);
}
