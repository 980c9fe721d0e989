/**
 * Everything between "we have a database URL" and "we may contend for fires", for the daemon and
 * for `baton run` alike: the server can coordinate at all (not a Galera node, and its named locks
 * exclude: lock-probe.ts), the schema is current (migrations), the fire key is intact, and the
 * lock session is open.
 */
import type { DatabaseTarget } from '../config/database-url.js';
import type { KeepAlive } from '../keep-alive.js';
import type { Queryable } from '../store/deadline.js';
import { migrateDatabase } from '../store/migrate.js';
import {
  assertCoordinationPossible,
  assertFireKey,
  probeServer,
  type ServerFacts,
} from '../store/server-check.js';
import { probeLocks, type LockCapability } from './lock-probe.js';
import { LockSession } from './lock-session.js';

/**
 * Deadline of the statements on the pool (history, claims) for runners and `baton run` alike;
 * longer than a heartbeat window, it guards against a partition that leaves a statement hanging.
 */
export const POOL_STATEMENT_DEADLINE_MS = 10_000;

export interface Coordination {
  lock: LockSession;
  facts: ServerFacts;
  /** What the server's named locks can do (lock-probe.ts); what is degraded is in `warnings`. */
  locks: LockCapability;
  /** Migrations applied on the way (normally none: `baton migrate` ran before). */
  applied: string[];
}

/** What `openCoordination` may be given; `keepAlive`: its connections' (keep-alive.ts). */
export interface CoordinationOptions {
  idleTimeoutSeconds?: number;
  lockStatementDeadlineMs?: number;
  /**
   * Of the server check and the migrations ledger read (MIGRATION_CHECK_DEADLINE_MS when not
   * given): a link that goes silent under them fails the attempt rather than hold it.
   */
  checkDeadlineMs?: number;
  keepAlive?: KeepAlive;
}

export async function openCoordination(
  target: DatabaseTarget,
  pool: Queryable,
  {
    idleTimeoutSeconds,
    lockStatementDeadlineMs,
    checkDeadlineMs,
    keepAlive,
  }: CoordinationOptions = {},
): Promise<Coordination> {
  let facts: ServerFacts | undefined;
  let locks: LockCapability | undefined;
  const { applied } = await migrateDatabase(target, {
    check: async (conn) => {
      facts = await probeServer(conn);
      assertCoordinationPossible(facts);
      locks = await probeLocks(conn, target, keepAlive, checkDeadlineMs);
    },
    ...(checkDeadlineMs != null ? { checkDeadlineMs } : {}),
    ...(keepAlive ? { keepAlive } : {}),
  });
  await assertFireKey(pool);
  const lock = await LockSession.open(
    target,
    idleTimeoutSeconds,
    lockStatementDeadlineMs,
    keepAlive,
  );
  return { lock, facts: facts!, locks: locks!, applied };
}
