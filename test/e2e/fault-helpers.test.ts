/**
 * Proves the fault-injection helpers themselves: a private MariaDB server that can be stopped,
 * killed and restarted without touching the shared server, and a TCP proxy that can freeze like
 * a network partition. Needs neither dist/ nor src/.
 */
import mysql, { type Connection, type RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

const DB = 'fault_helpers';

let server: PrivateServer | undefined;
let proxy: TcpProxy | undefined;
const connections: Connection[] = [];

function srv(): PrivateServer {
  if (!server) throw new Error('the private server did not start');
  return server;
}

/** A connection whose 'error' events (expected here) are recorded instead of crashing the file. */
async function open(url: string): Promise<{ conn: Connection; errors: Error[] }> {
  const conn = await mysql.createConnection({ uri: url, connectTimeout: 10_000 });
  const errors: Error[] = [];
  conn.on('error', (err: Error) => errors.push(err));
  connections.push(conn);
  return { conn, errors };
}

async function rows(conn: Connection, sql: string): Promise<RowDataPacket[]> {
  const [result] = await conn.query<RowDataPacket[]>(sql);
  return result;
}

/** Whether `promise` settles within `ms` (it keeps running either way, its rejection handled). */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const settled = promise.then(
    () => true,
    () => true,
  );
  try {
    return await Promise.race([settled, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function processIds(): Promise<number[]> {
  const admin = await mysql.createConnection({ uri: srv().url });
  try {
    return (await rows(admin, 'SELECT ID AS id FROM information_schema.PROCESSLIST')).map((r) =>
      Number(r.id),
    );
  } finally {
    await admin.end();
  }
}

beforeAll(async () => {
  const started = Date.now();
  server = await startPrivateServer();
  console.log(`private MariaDB on port ${server.port} ready after ${Date.now() - started} ms`);
});

afterAll(async () => {
  await Promise.all(connections.map((c) => c.destroy()));
  await proxy?.close();
  await server?.destroy();
});

describe('private server', () => {
  it('serves root over TCP like the shared server, on its own port and data dir', async () => {
    expect(srv().port).not.toBe(3306);
    expect(srv().url).toBe(`mysql://root@127.0.0.1:${srv().port}`);
    const { conn } = await open(srv().url);
    const [me] = await rows(
      conn,
      'SELECT CURRENT_USER() AS user, @@datadir AS dir, @@character_set_server AS charset',
    );
    expect(me).toMatchObject({
      user: 'root@127.0.0.1',
      dir: `${srv().dataDir}/`,
      charset: 'utf8mb4',
    });
    await conn.query(`CREATE DATABASE ${DB}`);
    await conn.query(`CREATE TABLE ${DB}.t (id INT PRIMARY KEY) ENGINE=InnoDB`);
    await conn.query(`INSERT INTO ${DB}.t VALUES (1), (2)`);
    await conn.end();
  });

  it('refuses connections once stopped and keeps its data across a restart', async () => {
    await srv().stop();
    expect(srv().running).toBe(false);
    await expect(mysql.createConnection({ uri: srv().url })).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });

    await srv().start();
    expect(srv().running).toBe(true);
    const { conn } = await open(`${srv().url}/${DB}`);
    expect(await rows(conn, 'SELECT id FROM t ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
    await conn.query('INSERT INTO t VALUES (3)');
    await conn.end();
  });

  it('recovers committed rows after kill()', async () => {
    await srv().kill();
    expect(srv().running).toBe(false);
    await srv().start();
    const { conn } = await open(`${srv().url}/${DB}`);
    expect(await rows(conn, 'SELECT id FROM t ORDER BY id')).toEqual([
      { id: 1 },
      { id: 2 },
      { id: 3 },
    ]);
    await conn.end();
  });
});

describe('tcp proxy', () => {
  beforeAll(async () => {
    proxy = await startTcpProxy({ host: '127.0.0.1', port: srv().port });
  });

  function px(): TcpProxy {
    if (!proxy) throw new Error('the proxy did not start');
    return proxy;
  }

  it('forwards, then hangs without errors while frozen, and answers after a thaw', async () => {
    const { conn, errors } = await open(px().url(DB));
    expect(await rows(conn, 'SELECT COUNT(*) AS n FROM t')).toEqual([{ n: 3 }]);
    expect(px().connections).toBe(1);

    px().freeze();
    expect(px().frozen).toBe(true);
    const query = rows(conn, 'SELECT 42 AS answer');
    // A new connection hangs too (no greeting), rather than being refused.
    const reconnect = open(px().url(DB));
    const [queried, reconnected] = await Promise.all([
      settlesWithin(query, 1_500),
      settlesWithin(reconnect, 1_500),
    ]);
    expect({ queried, reconnected }).toEqual({ queried: false, reconnected: false });
    expect(px().connections).toBe(2);
    expect(errors).toEqual([]);

    px().thaw();
    expect(await query).toEqual([{ answer: 42 }]);
    const { conn: second } = await reconnect;
    expect(await rows(second, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
    await second.end();
    await conn.end();
  });

  it('cutUpstream() ends the connection on the server and errors the client', async () => {
    const { conn, errors } = await open(px().url(DB));
    const [session] = await rows(conn, 'SELECT CONNECTION_ID() AS id');
    const id = Number(session?.id);
    expect(await processIds()).toContain(id);

    px().cutUpstream();
    await waitFor('the server to drop the proxied session', async () => {
      return !(await processIds()).includes(id);
    });
    await expect(conn.query('SELECT 1')).rejects.toThrow();
    await waitFor('the client to see the connection end', () => errors.length > 0);
    expect(px().connections).toBe(0);
  });

  it('cutUpstream() while frozen: the server drops the session, the client hears only on thaw', async () => {
    const { conn } = await open(px().url(DB));
    const [session] = await rows(conn, 'SELECT CONNECTION_ID() AS id');
    const id = Number(session?.id);

    px().freeze();
    px().cutUpstream();
    await waitFor('the server to drop the proxied session', async () => {
      return !(await processIds()).includes(id);
    });
    const query = conn.query('SELECT 1');
    expect(await settlesWithin(query, 500)).toBe(false);

    px().thaw();
    await expect(query).rejects.toThrow();
  });

  it('a client that gives up while frozen: the server keeps its session (and locks) until the thaw', async () => {
    const { conn } = await open(px().url(DB));
    const [session] = await rows(conn, "SELECT CONNECTION_ID() AS id, GET_LOCK('held', 0) AS got");
    const id = Number(session?.id);
    expect(Number(session?.got)).toBe(1);

    // Nothing in flight at the freeze, so nothing buffered in the proxy when the client's FIN
    // comes (as a runner destroys a lock session whose heartbeat has gone unanswered).
    px().freeze();
    conn.destroy();
    await sleep(500);
    expect(await processIds(), 'the server still has the session').toContain(id);
    const admin = await open(srv().url);
    expect(await rows(admin.conn, "SELECT IS_USED_LOCK('held') AS holder")).toEqual([
      { holder: id },
    ]);

    px().thaw();
    await waitFor('the server to drop the session after the thaw', async () => {
      return !(await processIds()).includes(id);
    });
    expect(await rows(admin.conn, "SELECT IS_USED_LOCK('held') AS holder")).toEqual([
      { holder: null },
    ]);
    expect(px().connections).toBe(0);
  });
});
