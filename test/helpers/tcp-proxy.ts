/**
 * A local TCP proxy in front of a MariaDB server that a test can freeze, to simulate a network
 * partition between baton and its database: while frozen, nothing is forwarded in either
 * direction, yet no socket is closed (no FIN, no RST), so the client sees what it sees on a real
 * partition — writes that seem to succeed, and then silence — instead of a quick, clean error.
 *
 * How a freeze works: every socket is paused, so bytes stay in the kernel's socket buffers (the
 * client's writes fill them, then block, as with a real TCP window that never opens). `thaw()`
 * resumes the sockets and everything buffered is DELIVERED, not dropped — like a partition that
 * heals before TCP gives up. New connections made while frozen are accepted (the client's
 * connect succeeds, as the kernel accepts it) but not connected upstream until the thaw, so the
 * client hangs waiting for the server's greeting instead of getting ECONNREFUSED.
 *
 * Limits: TCP keepalive probes are answered by the kernel, frozen or not, so a freeze is invisible
 * to keepalive; only application-level timeouts notice it. The server sees nothing either until
 * `cutUpstream()`, which stands for the server finally dropping the dead peer, or the thaw: a
 * client that closes its connection while frozen is closed on the server only then (and a server
 * that closes one, on the client only then). Bytes the proxy had already read at the instant of
 * the freeze may still be delivered. And as the proxy accepts every connection itself, a client
 * connecting while the server is down is accepted and then closed (mysql2:
 * PROTOCOL_CONNECTION_LOST) rather than refused (ECONNREFUSED).
 */
import { connect, createServer, type Socket } from 'node:net';
import { afterAll, beforeAll } from 'vitest';

export interface TcpProxy {
  /** The proxy's port on its listening address (127.0.0.1 unless `listenHost`). */
  readonly port: number;
  /** `mysql://root@HOST:PORT[/database]` through the proxy. */
  url(database?: string): string;
  /**
   * Stops forwarding in both directions without closing anything; new connections hang too.
   * With latency, chunks already on their way (read before the freeze) are still delivered, as
   * bytes already on the wire are.
   */
  freeze(): void;
  /** Resumes forwarding; data written while frozen is delivered. */
  thaw(): void;
  /**
   * Closes the proxy→server side of every current connection, so the server sees its clients
   * leave. Unless frozen, the client sockets are closed right away too (the client sees the
   * server close the connection); if frozen, they stay silent and are reset on `thaw()`, as a
   * client gets an RST from a server that forgot the connection when the partition heals.
   */
  cutUpstream(): void;
  /**
   * Strands every current connection: its client side is closed (the client sees the connection
   * end), its server side stays open and silent — the server never hears the client leave, as
   * when a client gives up on a dropped link and its FIN is lost. New connections work as usual.
   */
  strand(): void;
  /**
   * Sends new connections to another server from now on (a VIP or DNS name moving to a promoted
   * replica); current connections are left as they are.
   */
  retarget(target: { host: string; port: number }): void;
  /** Destroys every connection and stops listening. */
  close(): Promise<void>;
  readonly frozen: boolean;
  /** Changes the latency of every connection from now on (see ProxyOptions). */
  setLatency(options: ProxyOptions): void;
  /**
   * Blackholes the next connection whose client sends `text` (a statement's words): that chunk
   * and everything after it, either way, is dropped, and nothing is closed — one connection lost
   * to a silent link (a VIP moved, a firewall dropping its packets) while new ones work.
   */
  blackholeNext(text: string): void;
  /** Client connections currently open through the proxy (including ones waiting for a thaw). */
  readonly connections: number;
}

interface Pair {
  client: Socket;
  upstream: Socket | undefined;
  /** The upstream was cut, or closed, while frozen: reset the client on thaw. */
  cut: boolean;
  /** The client closed while frozen: the server learns of it on thaw. */
  clientGone: boolean;
  /** Nothing is forwarded any more, either way (`blackholeNext`). */
  blackholed: boolean;
}

export interface ProxyOptions {
  /**
   * Latency added to every chunk, each way, in ms: `upMs` client → server, `downMs` server →
   * client. A slow link, as a far-away host has: statements reach the server late, answers come
   * back late. Order is kept (every chunk of a direction waits the same time).
   */
  upMs?: number;
  downMs?: number;
  /**
   * The address to listen on (default 127.0.0.1): the root side of a network namespace's link
   * (netns.ts), for a host whose packets the kernel drops and the proxy delays.
   */
  listenHost?: string;
}

export async function startTcpProxy(
  target: { host: string; port: number },
  latency: ProxyOptions = {},
): Promise<TcpProxy> {
  let upMs = latency.upMs ?? 0;
  let downMs = latency.downMs ?? 0;
  const listenHost = latency.listenHost ?? '127.0.0.1';
  const pairs = new Set<Pair>();
  /** Server sides of stranded connections, kept open until `close()`. */
  const stranded = new Set<Socket>();
  let frozen = false;
  let blackholeText: string | null = null;

  const drop = (pair: Pair) => {
    pairs.delete(pair);
    pair.client.destroy();
    pair.upstream?.destroy();
  };

  // Forwards by hand rather than with pipe(): pipe() resumes its source on 'drain', which would
  // undo a freeze.
  const forward = (pair: Pair, from: Socket, to: Socket, delay: () => number) => {
    from.on('data', (chunk: Buffer) => {
      if (from === pair.client && blackholeText != null && chunk.includes(blackholeText)) {
        blackholeText = null;
        pair.blackholed = true;
      }
      if (pair.blackholed) return;
      const delayMs = delay();
      if (delayMs > 0) {
        // A delayed chunk is written later whatever happens meanwhile (as bytes already on the
        // wire): no backpressure for these test links, which carry little.
        setTimeout(() => to.writable && to.write(chunk), delayMs);
      } else if (!to.write(chunk)) from.pause();
    });
    to.on('drain', () => {
      if (!frozen) from.resume();
    });
  };

  let upstreamTarget = target;
  const connectUpstream = (pair: Pair) => {
    const upstream = connect(upstreamTarget.port, upstreamTarget.host);
    pair.upstream = upstream;
    upstream.setNoDelay(true);
    forward(pair, pair.client, upstream, () => upMs);
    forward(pair, upstream, pair.client, () => downMs);
    // Either side ending ends the pair; errors (ECONNRESET, ECONNREFUSED) end it the same way.
    // On a slow link the client learns of it only after what the server sent before it.
    const dropLater = () => (downMs > 0 ? setTimeout(() => drop(pair), downMs) : drop(pair));
    // While frozen, the client hears nothing of it: reset on thaw, as after cutUpstream().
    const upstreamGone = () => {
      if (frozen) pair.cut = true;
      else dropLater();
    };
    upstream.on('close', upstreamGone);
    upstream.on('error', upstreamGone);
    pair.client.resume();
  };

  const server = createServer({ pauseOnConnect: true }, (client) => {
    const pair: Pair = {
      client,
      upstream: undefined,
      cut: false,
      clientGone: false,
      blackholed: false,
    };
    pairs.add(pair);
    client.setNoDelay(true);
    // On a slow link the server learns of it only after what the client sent before it.
    const dropLater = () => (upMs > 0 ? setTimeout(() => drop(pair), upMs) : drop(pair));
    // While frozen, the server hears nothing of it until the thaw, as across a real partition.
    // (A paused socket with nothing buffered still reads the client's FIN and closes: a runner
    // that gives up on its session mid-freeze would otherwise end it on the server at once.)
    const clientGone = () => {
      if (frozen) pair.clientGone = true;
      else dropLater();
    };
    client.on('close', clientGone);
    client.on('error', clientGone);
    // Paused since accepted (pauseOnConnect); stays so until thawed.
    if (!frozen) connectUpstream(pair);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, listenHost, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (typeof address !== 'object' || address == null) throw new Error('proxy has no address');
  const port = address.port;

  return {
    port,
    url(database) {
      return `mysql://root@${listenHost}:${port}${database ? `/${database}` : ''}`;
    },
    get frozen() {
      return frozen;
    },
    setLatency(options) {
      // A shorter delay than the last one could reorder chunks already on their way: tests only
      // make a link slower, or set it back once it is quiet.
      upMs = options.upMs ?? 0;
      downMs = options.downMs ?? 0;
    },
    get connections() {
      return pairs.size;
    },
    retarget(to) {
      upstreamTarget = to;
    },
    blackholeNext(text) {
      blackholeText = text;
    },
    freeze() {
      frozen = true;
      for (const { client, upstream } of pairs) {
        client.pause();
        upstream?.pause();
      }
    },
    thaw() {
      frozen = false;
      for (const pair of [...pairs]) {
        if (pair.clientGone) {
          drop(pair);
        } else if (pair.cut) {
          pair.client.resetAndDestroy();
          pairs.delete(pair);
        } else if (!pair.upstream) {
          connectUpstream(pair);
        } else {
          pair.client.resume();
          pair.upstream.resume();
        }
      }
    },
    cutUpstream() {
      for (const pair of [...pairs]) {
        if (!pair.upstream) continue; // waiting for a thaw: the server never saw it
        if (frozen) {
          // Keep the client socket silent until the thaw; the upstream's 'close' must not end it.
          pair.cut = true;
          const upstream = pair.upstream;
          upstream.removeAllListeners('close').removeAllListeners('error');
          upstream.on('error', () => undefined);
          upstream.destroy();
        } else {
          drop(pair);
        }
      }
    },
    strand() {
      for (const pair of [...pairs]) {
        pairs.delete(pair);
        const upstream = pair.upstream;
        if (upstream) {
          upstream.removeAllListeners('data').removeAllListeners('close');
          upstream.removeAllListeners('error').on('error', () => undefined);
          upstream.pause();
          stranded.add(upstream);
        }
        pair.client.removeAllListeners('close').removeAllListeners('error');
        pair.client.on('error', () => undefined);
        pair.client.destroy();
      }
    },
    async close() {
      for (const pair of [...pairs]) drop(pair);
      for (const upstream of stranded) upstream.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A proxy for the tests of one `describe`: started before them, closed after. `proxy()` inside a
 * test gives it.
 */
export function useTcpProxy(
  target: () => { host: string; port: number },
  latency: ProxyOptions = {},
): () => TcpProxy {
  let proxy: TcpProxy | undefined;
  beforeAll(async () => {
    proxy = await startTcpProxy(target(), latency);
  });
  afterAll(async () => {
    await proxy?.close();
  });
  return () => {
    if (!proxy) throw new Error('the proxy exists only inside tests');
    return proxy;
  };
}
