/**
 * Stand-in database servers that answer as engines baton cannot install here do (TiDB, ProxySQL,
 * OceanBase; MySQL 8 and Vitess could not be installed on this machine either): mysql2 serves
 * the protocol (`mysql.createServer()`), and each stand-in answers the statements of baton's
 * start-up check — the session set-up, `SHOW GLOBAL VARIABLES`, and the lock probe's
 * `CONNECTION_ID()`, `VERSION()`, `@@version_comment`, `GET_LOCK`, `IS_USED_LOCK`,
 * `RELEASE_LOCK` — with the behaviour its engine documents (docs/runbook.md, "Where baton may
 * run"). Named locks are shared by the stand-in's sessions, as on a server. Anything else is
 * refused with a syntax error, so a test sees what a stand-in was not built to answer.
 */
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';
import mysql from 'mysql2';

/** How one engine's lock functions behave, as documented. */
export interface Engine {
  version: string;
  versionComment: string;
  /** `GET_LOCK(name, 0)` when another session holds `name`: `0` (MySQL), `1` (TiDB no-op). */
  grantsHeld: boolean;
  /** Refuses GET_LOCK with this error (no such function; a no-op switched off). */
  getLockError?: { code: number; message: string };
  /** What `IS_USED_LOCK` of a held lock answers in another session: the holder's id, or 1. */
  holderAnswer: 'id' | 'one';
  /** `CONNECTION_ID()` as the client sees it: the server's (MySQL) or a proxy's own id. */
  connectionIdOffset: number;
  /** A refused GET_LOCK(…, 0) answers after this long (TiDB 6.1+ clamps the timeout to 1 s). */
  refusalDelayMs: number;
}

const MYSQL: Engine = {
  version: '8.0.36',
  versionComment: 'MySQL Community Server - GPL',
  grantsHeld: false,
  holderAnswer: 'id',
  connectionIdOffset: 0,
  refusalDelayMs: 0,
};

/** The engines of issue 34's "Where baton may run", by their documented behaviour. */
export const ENGINES = {
  mysql: MYSQL,
  /** TiDB < 6.1 with tidb_enable_noop_functions: GET_LOCK is a no-op that returns 1. */
  tidbNoop: {
    ...MYSQL,
    version: '5.7.25-TiDB-v5.4.3',
    versionComment: 'TiDB Server (Apache License 2.0) Community Edition, MySQL 5.7 compatible',
    grantsHeld: true,
    holderAnswer: 'one',
  },
  /** TiDB < 6.1 without the switch: the lock functions are refused. */
  tidbNoopOff: {
    ...MYSQL,
    version: '5.7.25-TiDB-v5.4.3',
    versionComment: 'TiDB Server (Apache License 2.0) Community Edition, MySQL 5.7 compatible',
    getLockError: {
      code: 1235,
      message:
        'function GET_LOCK has only noop implementation in tidb now, use tidb_enable_noop_functions to enable these functions',
    },
  },
  /** TiDB 6.1+: real locks, IS_USED_LOCK answers 1, a refusal waits at least 1 s. */
  tidb: {
    ...MYSQL,
    version: '8.0.11-TiDB-v7.5.0',
    versionComment: 'TiDB Server (Apache License 2.0) Community Edition, MySQL 8.0 compatible',
    holderAnswer: 'one',
    refusalDelayMs: 1_000,
  },
  /** MySQL behind ProxySQL: CONNECTION_ID() is the proxy's session id, not the backend's. */
  proxysql: { ...MYSQL, connectionIdOffset: 100_000 },
  /**
   * Vitess (PlanetScale): lock functions only in `SELECT … FROM dual`, which baton's statements
   * are not; the error text is a stand-in's, the restriction Vitess's documented one.
   */
  vitess: {
    ...MYSQL,
    version: '8.0.30-Vitess',
    versionComment: 'Version: 19.0.4 (Git revision 0d3bd5e) branch HEAD',
    getLockError: { code: 1105, message: 'get_lock is allowed only with dual' },
  },
  /** OceanBase before 4.2: no GET_LOCK. */
  oceanbase: {
    ...MYSQL,
    version: '5.7.25',
    versionComment: 'OceanBase 3.2.4.0 (r1) (Built Aug 11 2022)',
    getLockError: { code: 1305, message: 'FUNCTION GET_LOCK does not exist' },
  },
} satisfies Record<string, Engine>;

export interface StandInServer {
  url: string;
  /** Every statement received, in order. */
  statements: string[];
  close(): Promise<void>;
}

type Value = string | number | null;

const LONGLONG = 8;
const VAR_STRING = 253;
const UTF8MB4 = 45;

export async function startStandIn(engine: Engine): Promise<StandInServer> {
  const locks = new Map<string, number>(); // name → holder's server-side connection id
  const statements: string[] = [];
  const sockets = new Set<Socket>();
  // Not 1: TiDB's IS_USED_LOCK answers 1 for a held lock, which must not be a holder's id here.
  let nextId = 4711;
  const server = mysql.createServer((conn) => {
    const id = nextId++;
    const socket = (conn as unknown as { stream: Socket }).stream;
    sockets.add(socket);
    conn.serverHandshake({
      protocolVersion: 10,
      serverVersion: engine.version,
      connectionId: id,
      statusFlags: 2,
      characterSet: UTF8MB4,
      capabilityFlags: 0xffffff & ~0x800, // no SSL
      // Any user is let in; then the sequence restarts for the first command (see nextCommand).
      authCallback: (_params: unknown, done: (err: null) => void) => {
        done(null);
        conn.sequenceId = 0;
      },
    });
    const reply = (rows: Record<string, Value>[]) => {
      const names = Object.keys(rows[0] ?? {});
      const columns = names.map((name) => ({
        catalog: 'def',
        schema: '',
        table: '',
        orgTable: '',
        name,
        orgName: name,
        characterSet: UTF8MB4,
        columnLength: 1024,
        columnType: rows.every((r) => typeof r[name] !== 'string') ? LONGLONG : VAR_STRING,
        flags: 0,
        decimals: 0,
      }));
      conn.writeTextResult(rows, columns);
      nextCommand();
    };
    // The server side of mysql2 does not restart the packet sequence at a new command.
    const nextCommand = () => (conn.sequenceId = 0);
    const ok = () => {
      conn.writeOk();
      nextCommand();
    };
    const fail = (code: number, message: string) => {
      conn.writeError({ code, message });
      nextCommand();
    };
    const evaluate = (expr: string): Value | Error => {
      const call = /^(\w+)\((?:'([^']*)'(?:,\s*(\d+))?)?\)$/i.exec(expr.trim());
      const fn = call?.[1]?.toUpperCase();
      const name = call?.[2] ?? '';
      if (/^@@version_comment$/i.test(expr.trim())) return engine.versionComment;
      switch (fn) {
        case 'CONNECTION_ID':
          return id + engine.connectionIdOffset;
        case 'VERSION':
          return engine.version;
        case 'GET_LOCK': {
          if (engine.getLockError) return Object.assign(new Error(), engine.getLockError);
          const holder = locks.get(name);
          if (holder == null || holder === id || engine.grantsHeld) {
            if (holder == null) locks.set(name, id);
            return 1;
          }
          return 0;
        }
        case 'IS_USED_LOCK': {
          const holder = locks.get(name);
          if (holder == null) return null;
          return engine.holderAnswer === 'id' || holder === id ? holder : 1;
        }
        case 'RELEASE_LOCK':
          if (locks.get(name) !== id) return 0;
          locks.delete(name);
          return 1;
        default:
          return new Error(`the stand-in does not answer ${expr}`);
      }
    };
    const onStatement = (sql: string) => {
      statements.push(sql);
      if (/^\s*SET\b/i.test(sql)) return ok();
      if (/^\s*SHOW GLOBAL VARIABLES/i.test(sql)) {
        return reply([
          { Variable_name: 'version', Value: engine.version },
          { Variable_name: 'read_only', Value: 'OFF' },
          { Variable_name: 'server_id', Value: '1' },
        ]);
      }
      const select = /^\s*SELECT\s+(.*)$/is.exec(sql);
      if (!select) return fail(1064, `the stand-in does not answer: ${sql}`);
      const row: Record<string, Value> = {};
      let refused = false;
      for (const item of select[1]!.split(/,(?![^(]*\))/)) {
        const [, expr, alias] = /^(.*?)(?:\s+AS\s+(\w+))?\s*$/is.exec(item.trim())!;
        const value = evaluate(expr!);
        if (value instanceof Error) {
          const err = value as Error & { code?: number };
          return fail(err.code ?? 1064, err.message);
        }
        if (/^GET_LOCK/i.test(expr!.trim()) && value === 0) refused = true;
        row[alias ?? expr!.trim()] = value;
      }
      if (refused && engine.refusalDelayMs > 0) {
        setTimeout(() => reply([row]), engine.refusalDelayMs);
      } else reply([row]);
    };
    conn.on('query', onStatement);
    // mysql2's server hands SET statements to 'stmt_prepare'.
    conn.on('stmt_prepare', onStatement);
    conn.on('error', () => {});
    socket.on('close', () => {
      sockets.delete(socket);
      for (const [name, holder] of locks) if (holder === id) locks.delete(name);
    });
  });
  const net = (server as unknown as { _server: import('node:net').Server })._server;
  await new Promise<void>((resolve) => net.listen(0, '127.0.0.1', () => resolve()));
  const { port } = net.address() as AddressInfo;
  return {
    url: `mysql://root@127.0.0.1:${port}`,
    statements,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
