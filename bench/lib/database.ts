/**
 * The database server the bench runs against, a fresh database per scenario, and statement
 * counting.
 *
 * By default the harness starts a PRIVATE mariadbd (the same binary as the shared server, a temp
 * data dir, `test/helpers/private-server.ts`) for the whole run: the shared server on :3306 is
 * used by other people's tests at the same time, so its global `Questions` counter (and its load)
 * would be other people's too. The private server gets the shared server's durability settings
 * (`innodb_flush_log_at_trx_commit = 1`, the production default), so a commit costs what it costs
 * in production. `--server-url mysql://root@127.0.0.1:3306` runs against an existing server
 * instead (statement counts then include every other client of it: the counter says so).
 */
import { randomBytes } from 'node:crypto';
import mysql, { type Connection, type RowDataPacket } from 'mysql2/promise';
import { startPrivateServer, type PrivateServer } from '../../test/helpers/private-server.js';

export interface BenchServer {
  /** `mysql://root@127.0.0.1:PORT` (no database). */
  url: string;
  /** True when the harness started it (a private mariadbd) and will destroy it. */
  private: boolean;
  version: string;
  /** Settings that change what a commit or a query costs, as the server reports them. */
  settings: Record<string, string>;
  /** The server's process id, when it is private (for /proc sampling). */
  pid: number | undefined;
  /** The general log is on (`--general-log`, private server only): counters break statements down. */
  generalLog: boolean;
  close(): Promise<void>;
}

/** Extra mariadbd arguments of the private server (after the helper's own, so these win). */
export const PRIVATE_SERVER_ARGS = [
  '--innodb-flush-log-at-trx-commit=1',
  '--innodb-buffer-pool-size=512M',
  '--max-connections=500',
];

export async function openServer(
  serverUrl: string | null,
  { generalLog = false } = {},
): Promise<BenchServer> {
  if (generalLog && serverUrl != null) {
    throw new Error(
      '--general-log needs the private server (it is not turned on for a shared one)',
    );
  }
  let priv: PrivateServer | null = null;
  let url = serverUrl;
  if (url == null) {
    // mariadb-install-db now and then trips over another bootstrap's temp files in /tmp (tests
    // start private servers at the same time): try again.
    for (let attempt = 1; ; attempt++) {
      try {
        priv = await startPrivateServer({ args: PRIVATE_SERVER_ARGS });
        break;
      } catch (err) {
        if (attempt >= 3) throw err;
        console.error(`starting the private MariaDB failed (attempt ${attempt}), retrying`);
      }
    }
    url = priv.url;
  }
  url = url.replace(/\/$/, '');
  const conn = await mysql.createConnection({ uri: url });
  try {
    const [[v]] = await conn.query<RowDataPacket[]>('SELECT VERSION() AS v');
    const [rows] = await conn.query<RowDataPacket[]>(
      `SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_flush_log_at_trx_commit',
        'innodb_buffer_pool_size', 'log_bin', 'sync_binlog', 'performance_schema',
        'innodb_doublewrite', 'max_connections')`,
    );
    const settings: Record<string, string> = {};
    for (const r of rows) settings[String(r.Variable_name)] = String(r.Value);
    if (generalLog) {
      // Diagnosis only: every statement is written to mysql.general_log (it costs time).
      await conn.query("SET GLOBAL log_output = 'TABLE'");
      await conn.query('SET GLOBAL general_log = ON');
      settings.general_log = 'ON';
    }
    return {
      url,
      private: priv != null,
      version: String(v?.v),
      settings,
      pid: priv?.pid,
      generalLog,
      close: async () => {
        await priv?.destroy();
      },
    };
  } finally {
    await conn.end();
  }
}

/**
 * Statements the harness itself sent (through BenchDatabase.query and the counters' own
 * sampling): a statement counter subtracts the ones sent during its window, so a scenario may
 * read rows while it counts.
 */
let harnessStatements = 0;

/** Connection ids of the harness's own connections (left out of general-log breakdowns). */
const harnessConnections = new Set<number>();

/** Marks `n` statements as the harness's own (for code that queries on its own connection). */
export function countHarnessStatements(n = 1): void {
  harnessStatements += n;
}

export interface BenchDatabase {
  /** The database's name on the server. */
  name: string;
  /** `--database-url` for baton: `mysql://root@127.0.0.1:PORT/<name>`. */
  url: string;
  /** The server, without a database. */
  serverUrl: string;
  /** A connection to the database, in UTC (queries on it are counted as the harness's own). */
  conn: Connection;
  /** `conn.query`, rows only; counted as a harness statement. */
  query<T = RowDataPacket>(sql: string, params?: unknown[]): Promise<T[]>;
  /** NOW(3) by the database's clock. */
  now(): Promise<Date>;
  drop(): Promise<void>;
}

export async function createDatabase(serverUrl: string, label: string): Promise<BenchDatabase> {
  const name = `baton_bench_${label.replace(/\W/g, '_')}_${randomBytes(3).toString('hex')}`.slice(
    0,
    64,
  );
  const admin = await mysql.createConnection({ uri: serverUrl });
  await admin.query('CREATE DATABASE ??', [name]);
  await admin.end();
  countHarnessStatements(1);
  const url = `${serverUrl}/${name}`;
  const conn = await mysql.createConnection({ uri: url, timezone: 'Z', supportBigNumbers: true });
  harnessConnections.add(conn.threadId);
  await conn.query("SET time_zone = '+00:00'");
  countHarnessStatements(1);
  const query = async <T>(sql: string, params: unknown[] = []): Promise<T[]> => {
    countHarnessStatements(1);
    const [rows] = await conn.query(sql, params);
    return rows as T[];
  };
  return {
    name,
    url,
    serverUrl,
    conn,
    query,
    async now() {
      const [row] = await query<{ now: Date }>('SELECT NOW(3) AS now');
      return row!.now;
    },
    async drop() {
      countHarnessStatements(1);
      await conn.query('DROP DATABASE IF EXISTS ??', [name]).catch(() => {});
      await conn.end().catch(() => {});
    },
  };
}

/** Counts of one statement window. */
export interface StatementCount {
  /** `Questions` delta minus the harness's own statements in the window. */
  statements: number;
  /** Wall time of the window, seconds. */
  seconds: number;
  /** Per-command deltas (`Com_select`, `Com_insert`, …), nonzero ones, not corrected. */
  com: Record<string, number>;
  /** Statements of the harness subtracted from `Questions`. */
  harness: number;
  /**
   * With the general log on (`--general-log`): statements of the window by shape (literals
   * replaced by ?), the harness's own left out, most frequent first. Empty otherwise.
   */
  breakdown: Array<{ statement: string; count: number }>;
  /** Client connections other than the harness's and the scenario's at the start (shared server). */
  otherConnections: number;
}

export interface StatementCounter {
  /** Ends the window and returns its counts. */
  stop(): Promise<StatementCount>;
}

interface StatusSample {
  at: number;
  values: Map<string, number>;
  harness: number;
}

/**
 * Starts counting the server's statements (`SHOW GLOBAL STATUS` deltas). Its own two sampling
 * statements and every statement the harness sent meanwhile (BenchDatabase.query, floors) are
 * subtracted; what remains was sent by the processes under test — and, on a shared server, by
 * everyone else (`otherConnections` says how many others were connected).
 *
 * `ownDatabases`: databases whose connections are the scenario's (to count the others).
 */
export async function countStatements(
  serverUrl: string,
  ownDatabases: string[] = [],
  generalLog = false,
): Promise<StatementCounter> {
  const conn = await mysql.createConnection({ uri: serverUrl });
  harnessConnections.add(conn.threadId);
  const serverNow = async () => {
    const [[row]] = await conn.query<RowDataPacket[]>('SELECT CAST(NOW(6) AS CHAR) AS now');
    return String(row?.now);
  };
  const sample = async (): Promise<StatusSample> => {
    const before = harnessStatements;
    const [rows] = await conn.query<RowDataPacket[]>(
      "SHOW GLOBAL STATUS WHERE Variable_name = 'Questions' OR Variable_name LIKE 'Com\\_%'",
    );
    const values = new Map<string, number>();
    for (const r of rows) values.set(String(r.Variable_name), Number(r.Value));
    return { at: performance.now(), values, harness: before };
  };
  const [plist] = await conn.query<RowDataPacket[]>(
    'SELECT ID, DB, COMMAND FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()',
  );
  const otherConnections = plist.filter(
    (p) =>
      String(p.COMMAND) !== 'Daemon' &&
      !(p.DB != null && ownDatabases.includes(String(p.DB))) &&
      !String(p.DB ?? '').startsWith('baton_bench_'),
  ).length;
  // Read outside the window (before its start sample, after its end sample): not counted.
  const from = generalLog ? await serverNow() : '';
  const start = await sample();
  return {
    async stop() {
      const end = await sample();
      const breakdown = generalLog ? await statementShapes(conn, from, await serverNow()) : [];
      await conn.end().catch(() => {});
      const delta = (k: string) => (end.values.get(k) ?? 0) - (start.values.get(k) ?? 0);
      const com: Record<string, number> = {};
      for (const k of end.values.keys()) {
        const d = delta(k);
        if (k !== 'Questions' && d !== 0) com[k] = d;
      }
      const harness = end.harness - start.harness;
      // The end sample's own SHOW counts in Questions (the start's was counted before `start`).
      const own = 1;
      return {
        statements: delta('Questions') - own - harness,
        seconds: (end.at - start.at) / 1000,
        com,
        harness,
        breakdown,
        otherConnections,
      };
    },
  };
}

/** The general log's statements between two server instants, grouped by shape. */
async function statementShapes(
  conn: Connection,
  from: string,
  to: string,
): Promise<Array<{ statement: string; count: number }>> {
  const [rows] = await conn.query<RowDataPacket[]>(
    `SELECT thread_id, CONVERT(argument USING utf8mb4) AS sql_text FROM mysql.general_log
      WHERE event_time > ? AND event_time < ? AND command_type IN ('Query', 'Execute')`,
    [from, to],
  );
  const counts = new Map<string, number>();
  for (const r of rows) {
    if (harnessConnections.has(Number(r.thread_id))) continue;
    const shape = String(r.sql_text)
      .replace(/'(?:[^'\\]|\\.)*'/g, '?')
      .replace(/\b\d+(\.\d+)?\b/g, 'N')
      .replace(/\s+/g, ' ')
      .trim()
      .slice(0, 120);
    counts.set(shape, (counts.get(shape) ?? 0) + 1);
  }
  return [...counts.entries()]
    .map(([statement, count]) => ({ statement, count }))
    .sort((a, b) => b.count - a.count);
}
