/**
 * Names of the server-wide locks baton takes with GET_LOCK — every one of them, here, so that a
 * rename cannot blind one of their readers (the reaper finds dead runs by the session lock).
 *
 * Named locks are global to the server instance, not to a database: two environments (or two
 * test databases) on one server would block each other if a job's lock were just its name. So a
 * name is derived from (database, namespace, job): a readable prefix for operators looking at
 * `performance_schema.metadata_locks` or `IS_USED_LOCK`, plus a hash of the full triple.
 *
 * Limits: MySQL 5.7+ rejects names over 64 characters; MariaDB allows 192 bytes. MySQL compares
 * lock names case-insensitively, MariaDB case-sensitively — so the hash is lowercase hex, which
 * means the same thing under both rules, and it covers the exact (case-sensitive) job name.
 */
import { createHash } from 'node:crypto';

export const LOCK_NAME_MAX = 64;
const HASH_CHARS = 16; // 64 bits: collisions among a fleet's jobs are not a practical concern.
const PREFIX = 'baton:';
const SESSION_PREFIX = 'baton-session:';

function hash(...parts: string[]): string {
  return createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, HASH_CHARS);
}

/**
 * The lock that serialises every run of one job in one namespace of one database. A fan-out job
 * (`workers: N`) has one lock per worker slot; slot 1 is the job's plain lock.
 */
export function jobLockName(database: string, namespace: string, job: string, slot = 1): string {
  const digest =
    slot === 1
      ? hash('job', database, namespace, job)
      : hash('job', database, namespace, job, `${slot}`);
  const room = LOCK_NAME_MAX - PREFIX.length - 1 - digest.length;
  const readable = job.slice(0, room);
  return `${PREFIX}${readable}:${digest}`;
}

/**
 * Slot `slot` (1..N) of a pool (docs/pools.md): GET_LOCK on it is one place of the pool's
 * semaphore, held by a run on its runner's lock session. A pool of `scope: host` has slots of its
 * own on each host (`host` given); a fleet-wide pool's are shared by every runner (`host` null).
 * The job locks' prefix is followed by `pool:`, which no job lock has (a job name never holds `:`),
 * so the two never collide.
 */
export function poolSlotLockName(
  database: string,
  namespace: string,
  pool: string,
  slot: number,
  host: string | null,
): string {
  const digest = hash('pool', database, namespace, pool, `${slot}`, host ?? '');
  const head = `${PREFIX}pool:`;
  const room = LOCK_NAME_MAX - head.length - 1 - digest.length;
  return `${head}${pool.slice(0, room)}:${digest}`;
}

/** The lock that serialises schema migrations of one database. */
export function migrationLockName(database: string): string {
  return `${PREFIX}migrate:${hash('migrate', database)}`;
}

/**
 * The lock under which a runner that reached a promoted server moves the run ids past the old
 * primary's (store/failovers.ts): the first of the fleet moves them, the others find it done.
 */
export function failoverLockName(database: string): string {
  return `${PREFIX}failover:${hash('failover', database)}`;
}

/** The lock that lets one runner of the fleet at a time prune a namespace's history. */
export function pruneLockName(database: string, namespace: string): string {
  return `${PREFIX}prune:${hash('prune', database, namespace)}`;
}

/**
 * The namespace's notify lock: whoever holds it decides which notifications are due, held by the
 * throttle or summed up, and claims them (daemon/notifier.ts), so two runners never decide the
 * same rows. Held for a pass of a few statements, not while delivering.
 */
export function notifyLockName(database: string, namespace: string): string {
  return `${PREFIX}notify:${hash('notify', database, namespace)}`;
}

/**
 * The lock every lock session holds on itself for as long as it lives (taken when it opens).
 * Rows carry their session's `lock_connection_id`, so anyone can tell a `running` row whose
 * runner is alive from one whose runner is gone — for every overlap policy, including `allow`,
 * which takes no job lock. Connection ids are unique per server; the prefix differs from job
 * locks (`baton:`), so the two never collide.
 */
export function sessionLockName(connectionId: number): string {
  return `${SESSION_PREFIX}${connectionId}`;
}

/**
 * `sessionLockName` in SQL, over a column or expression holding a connection id — for the reads
 * that ask, row by row, whether a row's lock session is still alive
 * (`IS_USED_LOCK(sessionLockSql('lock_connection_id'))`).
 */
export function sessionLockSql(connectionIdColumn: string): string {
  return `CONCAT('${SESSION_PREFIX}', ${connectionIdColumn})`;
}
