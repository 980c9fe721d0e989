/**
 * The daemon's HTTP endpoint (`baton start --http 127.0.0.1:9464`): `/metrics` for Prometheus,
 * `/healthz` for load balancers and service managers, and a read-only dashboard at `/` with the
 * JSON it refreshes from at `/api/overview`. node:http alone — nothing to build or serve beside
 * the daemon.
 *
 * Read-only unless write tokens are configured: then the write API (write-api.ts) answers its
 * POST routes, with a write token only. Every other route answers GET and HEAD alone, and nothing
 * behind one can change the schedule, the history or a run. With a read token every request must
 * carry it or a write token (auth.ts).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { RunnerHealth } from '../daemon/health.js';
import { errorMessage, UsageError } from '../errors.js';
import type { Logger } from '../log.js';
import { isLoopbackName, type ListenAddress } from './address.js';
import { tokenMatches } from './auth.js';
import type { WriteSubject } from './write-actions.js';
import { writeApi } from './write-api.js';
import type { WriteToken } from './write-tokens.js';
import { buildOverview, type DashboardSource } from './dashboard/overview.js';
import { dashboardPage } from './dashboard/page.js';
import { jobPage, runPage } from './dashboard/run-pages.js';
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';
import type { RunnerMetrics } from './metrics.js';

/** What the endpoint reads from the runner. */
export interface HttpSubject {
  health(): Promise<RunnerHealth>;
  dashboardSource(): DashboardSource;
  /** What the write API acts on (only used with write tokens). */
  write: WriteSubject;
}

export interface HttpEndpointOptions {
  address: ListenAddress;
  token?: string;
  /** The write API's named tokens; none: the write API is off. */
  writeTokens?: readonly WriteToken[];
  subject: HttpSubject;
  metrics: RunnerMetrics;
  log: Logger;
}

export interface HttpEndpoint {
  /** The port actually bound (differs from the address's when it asked for 0). */
  port: number;
  close(): Promise<void>;
}

const gzip = promisify(gzipCallback);

/**
 * Viewers share one overview for this long: however many there are, the database sees about one
 * build per page refresh (every 5 s).
 */
const OVERVIEW_REUSE_MS = 4_000;

export async function startHttpEndpoint(options: HttpEndpointOptions): Promise<HttpEndpoint> {
  const { address, token, log } = options;
  const write =
    options.writeTokens && options.writeTokens.length > 0
      ? writeApi({
          tokens: options.writeTokens,
          ...(token != null ? { readToken: token } : {}),
          subject: options.subject.write,
          log,
        })
      : null;
  // Built (its script read from dist/) here, before listening: a missing build fails the start.
  const page = dashboardPage();
  const pageHeaders = {
    'content-type': 'text/html; charset=utf-8',
    // Only the page's own script and style (by hash) and fetches to this origin: a job's output
    // shown on it can never run as code, even if it escaped the page's escaping.
    'content-security-policy': page.csp,
  };
  // Serialised and compressed once per build (off the event loop where it can be), not per viewer.
  const overview = reusedFor(OVERVIEW_REUSE_MS, async () => {
    const json = Buffer.from(
      JSON.stringify(await buildOverview(options.subject.dashboardSource())),
    );
    return { json, gzipped: await gzip(json) };
  });

  const routes: Record<
    string,
    (res: ServerResponse, req: IncomingMessage) => Promise<void> | void
  > = {
    '/metrics': async (res) => {
      const text = await options.metrics.render();
      send(res, 200, { 'content-type': options.metrics.contentType }, text);
    },
    '/healthz': async (res) => {
      const { healthy, problems } = await options.subject.health();
      send(
        res,
        healthy ? 200 : 503,
        { 'content-type': 'application/json' },
        JSON.stringify(healthy ? { status: 'ok' } : { status: 'unhealthy', problems }),
      );
    },
    '/': (res) => send(res, 200, pageHeaders, page.html),
    '/api/run': async (res, req) => {
      const query = queryOf(req);
      const id = Number(query.get('id'));
      const after = Number(query.get('after') || -1);
      const page =
        Number.isSafeInteger(id) && id > 0 && Number.isSafeInteger(after)
          ? await runPage(options.subject.dashboardSource(), id, after)
          : null;
      if (!page)
        return send(res, 404, { 'content-type': 'application/json' }, '{"error":"no such run"}');
      const doc = { ...page, writeApi: write != null };
      send(res, 200, { 'content-type': 'application/json' }, JSON.stringify(doc));
    },
    '/api/job': async (res, req) => {
      const name = queryOf(req).get('name') ?? '';
      const page = name ? await jobPage(options.subject.dashboardSource(), name) : null;
      if (!page)
        return send(res, 404, { 'content-type': 'application/json' }, '{"error":"no such job"}');
      const doc = { ...page, writeApi: write != null };
      send(res, 200, { 'content-type': 'application/json' }, JSON.stringify(doc));
    },
    '/api/overview': async (res, req) => {
      const { json, gzipped } = await overview();
      const headers = { 'content-type': 'application/json', vary: 'accept-encoding' };
      // A thousand jobs make megabytes of JSON that compress tenfold; every viewer asks every 5 s.
      if (/\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))) {
        send(res, 200, { ...headers, 'content-encoding': 'gzip' }, gzipped);
      } else {
        send(res, 200, headers, json);
      }
    },
  };

  const server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      log.warn(
        { url: String(req.url).slice(0, 200), err: errorMessage(err) },
        'http request failed',
      );
      if (!res.headersSent) {
        send(
          res,
          500,
          { 'content-type': 'application/json' },
          JSON.stringify({ error: errorMessage(err) }),
        );
      } else {
        res.destroy();
      }
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Without a token, loopback is the only protection: a web page the operator visits could
    // reach it through a DNS name rebound to 127.0.0.1 (an ssh tunnel to a server's endpoint,
    // say). Such requests name a foreign host; refuse them.
    if (token == null && !isLocalHost(req.headers.host, address)) {
      send(res, 421, { 'content-type': 'text/plain' }, 'unknown host name\n');
      return;
    }
    const path = pathOf(req);
    // The write API checks its own credentials (Bearer only) and answers in JSON.
    if (write && path != null && write.owns(path)) return write.handle(req, res, path);
    if (token != null && !tokenMatches(req, token) && !write?.reads(req)) {
      send(
        res,
        401,
        {
          'www-authenticate': 'Basic realm="baton", charset="UTF-8"',
          'content-type': 'text/plain',
        },
        'a token is required: Authorization: Bearer <token>, or Basic with the token as password\n',
      );
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }, 'read-only\n');
      return;
    }
    const route = path == null ? undefined : routes[path];
    if (!route) {
      send(res, 404, { 'content-type': 'text/plain' }, 'not found\n');
      return;
    }
    await route(res, req);
  }

  // A slow or stuck client must not hold a socket for ever.
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  await listen(server, address);
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : address.port;
  log.info(
    {
      http: address.display,
      port,
      token: token != null,
      writeTokens: options.writeTokens?.map((t) => t.name) ?? [],
    },
    'http endpoint listening',
  );
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function listen(server: Server, address: ListenAddress): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const why =
        err.code === 'EADDRINUSE'
          ? 'the address is already in use'
          : err.code === 'EADDRNOTAVAIL'
            ? 'this machine has no such address'
            : err.code === 'EACCES'
              ? 'permission denied (ports below 1024 need privileges)'
              : err.message;
      reject(new UsageError(`--http ${address.display}: ${why}`));
    });
    server.listen(address.port, address.host, () => resolve());
  });
}

function send(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: string | Buffer,
): void {
  res.writeHead(status, {
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    ...headers,
  });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

/** The request's query parameters (none for a target that is not a URL). */
function queryOf(req: IncomingMessage): URLSearchParams {
  try {
    return new URL(req.url ?? '/', 'http://baton').searchParams;
  } catch {
    return new URLSearchParams();
  }
}

/** The request's path; null for a target that is not a URL path (`//[`): answered with 404. */
function pathOf(req: IncomingMessage): string | null {
  try {
    return new URL(req.url ?? '/', 'http://baton').pathname;
  } catch {
    return null;
  }
}

/** Whether the Host header names this machine: a loopback name or address, or the --http host. */
function isLocalHost(header: string | undefined, address: ListenAddress): boolean {
  if (!header) return false;
  // `[::1]:9464`, `127.0.0.1:9464`, `localhost` — the name without its port.
  const name = (/^\[([^\]]+)\]/.exec(header)?.[1] ?? header.replace(/:\d+$/, '')).toLowerCase();
  return name === address.host.toLowerCase() || isLoopbackName(name);
}

/**
 * `produce`, shared by every caller while it runs and for `ms` after it finished (single flight):
 * a build slower than `ms` never has a second one started beside it.
 */
function reusedFor<T>(ms: number, produce: () => Promise<T>): () => Promise<T> {
  let last: { value: Promise<T>; settledAt: number | null } | null = null;
  return () => {
    if (last && (last.settledAt == null || performance.now() - last.settledAt <= ms)) {
      return last.value;
    }
    const entry = { value: produce(), settledAt: null as number | null };
    last = entry;
    entry.value.then(
      () => (entry.settledAt = performance.now()),
      // A failure is not reused: the next viewer asks again.
      () => {
        if (last === entry) last = null;
      },
    );
    return entry.value;
  };
}
