/**
 * A real HTTP receiver for webhook notifications, on 127.0.0.1: it records every request it got
 * (headers, JSON body) and answers according to its mode — `ok` (204), `fail` (503), `slow`
 * (answers only after `slowMs`, so the sender times out first), `hang` (never answers) — or is
 * `down` (its port closed: connection refused), and can come back up on the same port.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type ReceiverMode = 'ok' | 'fail' | 'slow' | 'hang';

export interface ReceivedRequest {
  at: number;
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
  /** The status it was answered with; null while unanswered (or never). */
  answered: number | null;
}

export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  mode: ReceiverMode = 'ok';
  slowMs = 5_000;
  /** Called when a request arrives, before it is answered. */
  onRequest: ((r: ReceivedRequest) => void) | null = null;
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  port = 0;

  static async start(): Promise<WebhookReceiver> {
    const r = new WebhookReceiver();
    await r.up();
    return r;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Requests answered with a 2xx: what the receiver accepted. */
  accepted(): ReceivedRequest[] {
    return this.requests.filter((r) => r.answered != null && r.answered < 300);
  }

  async up(): Promise<void> {
    const server = createServer((req, res) => this.handle(req, res));
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Closes the port (senders get connection refused) and cuts the connections it has. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    let text = '';
    req.on('data', (d: Buffer) => (text += d.toString()));
    req.on('end', () => {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        body = { raw: text };
      }
      const r: ReceivedRequest = {
        at: Date.now(),
        path: req.url ?? '',
        headers: req.headers,
        body,
        answered: null,
      };
      this.requests.push(r);
      this.onRequest?.(r);
      const answer = (status: number) => {
        if (res.destroyed) return;
        r.answered = status;
        res.writeHead(status).end();
      };
      if (this.mode === 'ok') answer(204);
      else if (this.mode === 'fail') answer(503);
      else if (this.mode === 'slow') setTimeout(() => answer(204), this.slowMs).unref();
      // 'hang': never answered; the sender's timeout (or down()) ends it.
    });
  }
}
