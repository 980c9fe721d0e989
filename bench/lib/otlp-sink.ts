/**
 * A collector stand-in for benches with tracing on (`BENCH_TRACING=1`): an OTLP/HTTP endpoint on
 * 127.0.0.1 that takes every POST, counts its bytes and requests, and answers 200 at once — the
 * runners pay for making and sending their spans, not for a collector's work.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export class OtlpSink {
  requests = 0;
  bytes = 0;
  private constructor(private readonly server: Server) {}

  static async start(): Promise<OtlpSink> {
    const server = createServer();
    const sink = new OtlpSink(server);
    server.on('request', (req, res) => {
      req.on('data', (c: Buffer) => (sink.bytes += c.length));
      req.on('end', () => {
        sink.requests++;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return sink;
  }

  /** What a runner's environment needs to trace into this sink. */
  env(): Record<string, string> {
    const { port } = this.server.address() as AddressInfo;
    return { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` };
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
