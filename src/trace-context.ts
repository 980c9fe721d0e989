/**
 * A fire's trace ids, derived by every runner on its own (issue 42, docs/tracing.md), and the W3C
 * `traceparent` a job gets: plain functions, no OpenTelemetry (the pipeline's tracer interface is
 * fire/fire-trace.ts; its implementation, loaded only when tracing is on, daemon/otel-tracer.ts).
 *
 * One trace per fire, across every server, without the servers talking about it: the trace id is
 * derived from the fire's key — (namespace, job, scheduled instant, generation), the key of its
 * `baton_runs` rows — so every runner that considers the fire puts its attempt into the same
 * trace. The trace's root, the `fire` span, has a span id derived from the same key: each
 * runner's `attempt` span names it as its parent before anyone has sent it, and the winner sends
 * it once the fire is over (docs/design.md, "Traces").
 */
import { createHash } from 'node:crypto';

/** A fire's key: the same on every runner, and the same for every attempt and retry of its run. */
export interface FireKey {
  namespace: string;
  job: string;
  scheduledAt: Date;
  /** 0 for the fire's first run; a re-run's generation (`baton run --fire … --again`) after. */
  generation: number;
}

/** The ids of a fire's trace and of its root span, lowercase hex (W3C trace-context). */
export interface FireTraceIds {
  /** 32 hex digits, never all zero. */
  traceId: string;
  /** The root `fire` span's id: 16 hex digits, never all zero. */
  fireSpanId: string;
}

/**
 * The fire's trace and root span ids: the first 16 bytes of SHA-256 over the key's canonical
 * string, and the next 8. The canonical string separates its fields with NUL, which no namespace
 * or job name holds, so two keys never share one string. An all-zero id is invalid in
 * trace-context (and will not happen but for a 2^-128 chance): its last digit is then 1.
 */
export function fireTraceIds(key: FireKey): FireTraceIds {
  const canonical = [
    'baton-fire/1',
    key.namespace,
    key.job,
    key.scheduledAt.toISOString(),
    String(key.generation),
  ].join('\0');
  const hex = createHash('sha256').update(canonical).digest('hex');
  return { traceId: nonZero(hex.slice(0, 32)), fireSpanId: nonZero(hex.slice(32, 48)) };
}

function nonZero(hex: string): string {
  return /^0+$/.test(hex) ? `${hex.slice(0, -1)}1` : hex;
}

/** A span a job's own spans join: the run span of its fire's trace. */
export interface TraceContext {
  /** `00-<trace id>-<span id>-01`: what the job gets as TRACEPARENT (W3C trace-context). */
  traceparent: string;
  traceId: string;
  spanId: string;
}

/** The W3C `traceparent` of a sampled span. */
export function traceparent(traceId: string, spanId: string): string {
  return `00-${traceId}-${spanId}-01`;
}

/** `traceparent` read back (a module job's host, from TRACEPARENT); null when malformed. */
export function parseTraceparent(value: string | undefined): TraceContext | null {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(value ?? '');
  if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return null;
  return { traceparent: value!, traceId: m[1]!, spanId: m[2]! };
}
