/**
 * A real OTLP/HTTP trace receiver on 127.0.0.1: it accepts `POST /v1/traces` in OTLP's JSON
 * encoding (what @opentelemetry/exporter-trace-otlp-http sends, and the `application/json` of
 * the OTLP spec) and keeps every span it got, flattened with its resource's attributes. It
 * answers 200 with an empty partial success, as a collector does.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One received span; attributes as plain values (OTLP's AnyValue unwrapped). */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
  events: string[];
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: number;
}

interface OtlpAnyValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpKeyValue {
  key: string;
  value: OtlpAnyValue;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: OtlpKeyValue[];
  events?: { name: string }[];
  status?: { code?: number };
}
interface OtlpRequest {
  resourceSpans?: {
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: { spans?: OtlpSpan[] }[];
  }[];
}

function plain(v: OtlpAnyValue): unknown {
  if (v.stringValue != null) return v.stringValue;
  if (v.intValue != null) return Number(v.intValue);
  if (v.boolValue != null) return v.boolValue;
  if (v.doubleValue != null) return v.doubleValue;
  return null;
}

function attributes(kvs: OtlpKeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((kvs ?? []).map((kv) => [kv.key, plain(kv.value)]));
}

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** The requests' headers, in order (what the exporter sent besides the spans). */
  readonly headers: Record<string, string | string[] | undefined>[] = [];
  /** Bodies that were not OTLP JSON: a test expects none. */
  readonly refused: string[] = [];
  private constructor(private readonly server: Server) {}

  static async start(): Promise<OtlpReceiver> {
    const server = createServer();
    const receiver = new OtlpReceiver(server);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        if (req.method !== 'POST' || req.url !== '/v1/traces') {
          res.writeHead(404).end();
          return;
        }
        try {
          receiver.take(JSON.parse(body) as OtlpRequest);
          receiver.headers.push(req.headers);
        } catch {
          receiver.refused.push(`${String(req.headers['content-type'])}: ${body.slice(0, 200)}`);
          res.writeHead(400).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it (the exporter adds /v1/traces). */
  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private take(request: OtlpRequest): void {
    for (const rs of request.resourceSpans ?? []) {
      const resource = attributes(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            name: s.name,
            startNs: BigInt(s.startTimeUnixNano),
            endNs: BigInt(s.endTimeUnixNano),
            attributes: attributes(s.attributes),
            resource,
            events: (s.events ?? []).map((e) => e.name),
            status: s.status?.code ?? 0,
          });
        }
      }
    }
  }

  /** The spans received, by trace id. */
  traces(): Map<string, ReceivedSpan[]> {
    const byTrace = new Map<string, ReceivedSpan[]>();
    for (const s of this.spans) byTrace.set(s.traceId, [...(byTrace.get(s.traceId) ?? []), s]);
    return byTrace;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
