/**
 * A stand-in for ProxySQL in front of the real MariaDB, as far as baton's locks can tell: a TCP
 * proxy that forwards every byte, except that it answers `CONNECTION_ID()` itself — each client
 * connection gets an id of the proxy's own (ProxySQL's session id), which is not the id of the
 * backend connection that holds its named locks. So `IS_USED_LOCK` names a connection the client
 * never heard of, as behind the real ProxySQL (which could not be installed here).
 *
 * How: the client's packets are read frame by frame (3-byte length, sequence id, payload); in a
 * COM_QUERY the text `CONNECTION_ID()` becomes the proxy's id, and the frame's length is fixed.
 * The first frame of a connection (the handshake response) is passed on as it is. Optionally it
 * answers `VERSION()` too.
 */
import { connect, createServer, type Socket } from 'node:net';

const COM_QUERY = 0x03;
/** Far above any id the test server hands out, so that a proxy id is never a real one. */
const FIRST_PROXY_ID = 2_000_000_000;

export interface ProxySqlStandIn {
  url(database: string): string;
  close(): Promise<void>;
}

/**
 * `version`: what `VERSION()` answers instead of the server's (e.g. TiDB's, for the rules that
 * hang on the engine's name).
 */
export async function startProxySqlStandIn(
  target: { host: string; port: number },
  { version }: { version?: string } = {},
): Promise<ProxySqlStandIn> {
  const sockets = new Set<Socket>();
  let nextId = FIRST_PROXY_ID;
  const server = createServer((client) => {
    const proxyId = nextId++;
    const upstream = connect(target.port, target.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.setNoDelay(true);
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
      s.on('error', () => {});
    }
    upstream.pipe(client);
    let pending = Buffer.alloc(0);
    let first = true;
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4) {
        const length = pending.readUIntLE(0, 3);
        if (pending.length < 4 + length) break;
        let frame = pending.subarray(0, 4 + length);
        pending = pending.subarray(4 + length);
        if (!first && frame[4] === COM_QUERY) {
          const sql = frame.subarray(5).toString('utf8');
          let rewritten = sql.replaceAll('CONNECTION_ID()', String(proxyId));
          if (version != null) rewritten = rewritten.replaceAll('VERSION()', `'${version}'`);
          if (rewritten !== sql) {
            const payload = Buffer.concat([
              Buffer.from([COM_QUERY]),
              Buffer.from(rewritten, 'utf8'),
            ]);
            const header = Buffer.alloc(4);
            header.writeUIntLE(payload.length, 0, 3);
            header[3] = frame[3]!;
            frame = Buffer.concat([header, payload]);
          }
        }
        first = false;
        upstream.write(frame);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  if (typeof address !== 'object' || address == null) throw new Error('proxy has no address');
  return {
    url: (database) => `mysql://root@127.0.0.1:${address.port}/${database}`,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
