/**
 * Real replication for the failover tests: two PRIVATE mariadbd servers (private-server.ts), a
 * primary writing a ROW binlog and a replica following it by GTID, and the ground truth the
 * jobs keep outside the database (a file on this host: not replicated, not lost with a server).
 */
import { existsSync, readFileSync } from 'node:fs';
import { queryFresh } from './db.js';
import { startPrivateServer, type PrivateServer } from './private-server.js';

/** What both servers run with: a binlog, ROW events, and a replica that logs what it applies. */
const BINLOG = ['--log-bin=mariadb-bin', '--binlog-format=ROW', '--log-slave-updates'];

/**
 * A primary (server id 1) and a replica (2) replicating from it, started together; `primary` and
 * `replica` are each server's extra options (semi-sync, for one).
 */
export async function startReplicatedPair(
  o: { primary?: string[]; replica?: string[] } = {},
): Promise<[PrivateServer, PrivateServer]> {
  const [primary, replica] = await Promise.all([
    startPrivateServer({ args: [...BINLOG, '--server-id=1', ...(o.primary ?? [])] }),
    startPrivateServer({ args: [...BINLOG, '--server-id=2', ...(o.replica ?? [])] }),
  ]);
  await queryFresh(
    replica.url,
    `CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = ${primary.port},
       MASTER_USER = 'root', MASTER_PASSWORD = '', MASTER_USE_GTID = slave_pos`,
  );
  await queryFresh(replica.url, 'START SLAVE');
  return [primary, replica];
}

/** The fires a job's runs were given, by its ground-truth file: ISO instant → times run. */
export function groundTruth(file: string): Map<string, number> {
  const counts = new Map<string, number>();
  if (!existsSync(file)) return counts;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line) counts.set(line, (counts.get(line) ?? 0) + 1);
  }
  return counts;
}
