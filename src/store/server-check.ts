/**
 * Fail closed: before a runner takes a fire, it makes sure the server can coordinate at all.
 *
 * GET_LOCK is held by one server instance. On a Galera/PXC cluster (`wsrep_on`) or a multi-primary
 * Group Replication member, two runners talking to two members both get "the" lock and both run
 * the batch — the exact failure baton exists to prevent. And the fire key is what keeps one winner
 * per fire under clock skew: a `baton_runs` whose unique key was dropped (a hand-made "fix") would
 * quietly allow doubles. Both are refused at start-up, with a message that says what to do.
 * (`read_only`, which can change at any time, is checked with every GET_LOCK instead: see
 * `LockSession.tryAcquire`.)
 */
import type { RowDataPacket } from 'mysql2/promise';
import { BatonError, DatabaseUnavailableError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import type { Queryable } from './deadline.js';

export interface ServerFacts {
  version: string;
  readOnly: boolean;
  /** Galera (MariaDB Galera Cluster, Percona XtraDB Cluster). */
  wsrep: boolean;
  /** A Group Replication member in multi-primary mode. */
  multiPrimary: boolean;
  /**
   * Which server this is, so that a reconnect can tell a failover (another server) from a restart
   * (the same one): `@@server_uuid` on MySQL, else `@@server_id` (MariaDB has no uuid; replication
   * requires every server of a topology to have its own id).
   */
  identity: string;
  /** Its GTID position (MariaDB `gtid_current_pos`, MySQL `gtid_executed`), for the log; or null. */
  gtidPosition: string | null;
}

/** The database server cannot give baton's guarantees. Exit 78: the deployment must change. */
export class UnsupportedServerError extends BatonError {
  constructor(message: string) {
    super('UNSUPPORTED_SERVER', message, ExitCode.Config);
  }
}

export async function probeServer(db: Queryable): Promise<ServerFacts> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SHOW GLOBAL VARIABLES WHERE Variable_name IN
       ('version', 'read_only', 'wsrep_on', 'group_replication_group_name',
        'group_replication_single_primary_mode', 'server_id', 'server_uuid', 'gtid_current_pos',
        'gtid_executed')`,
  );
  const vars = new Map(rows.map((r) => [String(r.Variable_name), String(r.Value ?? '')]));
  const on = (name: string) => ['ON', '1'].includes((vars.get(name) ?? '').toUpperCase());
  return {
    version: vars.get('version') ?? 'unknown',
    readOnly: on('read_only'),
    wsrep: on('wsrep_on'),
    multiPrimary:
      (vars.get('group_replication_group_name') ?? '') !== '' &&
      vars.has('group_replication_single_primary_mode') &&
      !on('group_replication_single_primary_mode'),
    identity: vars.get('server_uuid') || `server_id ${vars.get('server_id') ?? '?'}`,
    gtidPosition: vars.get('gtid_current_pos') ?? vars.get('gtid_executed') ?? null,
  };
}

export function assertCoordinationPossible(facts: ServerFacts): void {
  if (facts.wsrep) {
    throw new UnsupportedServerError(
      `the database server (${facts.version}) is a Galera cluster node (wsrep_on = ON): ` +
        'GET_LOCK is local to one node there, so runners on different nodes would each run the ' +
        'same fire. Point every runner at one node (the same one), e.g. through a proxy that ' +
        'sends all baton traffic to a single writer.',
    );
  }
  if (facts.multiPrimary) {
    throw new UnsupportedServerError(
      `the database server (${facts.version}) is a multi-primary Group Replication member: ` +
        'GET_LOCK is local to one member. Point every runner at the one primary.',
    );
  }
}

/**
 * The unique fire key `(namespace, job, scheduled_at, rerun, winner)` must exist, as a unique key
 * (`rerun` since migration 0012: each generation of a fire has its own winner).
 */
export async function assertFireKey(db: Queryable): Promise<void> {
  const [rows] = await db.query<RowDataPacket[]>(
    `SHOW INDEX FROM baton_runs WHERE Key_name = 'baton_runs_fire' AND Non_unique = 0`,
  );
  const columns = rows
    .sort((a, b) => Number(a.Seq_in_index) - Number(b.Seq_in_index))
    .map((r) => String(r.Column_name))
    .join(',');
  if (columns !== 'namespace,job,scheduled_at,rerun,winner') {
    throw new DatabaseUnavailableError(
      'baton_runs has lost its unique fire key baton_runs_fire (namespace, job, scheduled_at, ' +
        'rerun, winner); without it a fire can have two winners. Restore it: ALTER TABLE ' +
        'baton_runs ADD UNIQUE KEY baton_runs_fire (namespace, job, scheduled_at, rerun, winner)',
    );
  }
}
