/**
 * Whether a runner traces its fires (docs/tracing.md), and where to: OpenTelemetry's own
 * variables, which operators of traced services set already, and which the OTLP exporter reads
 * itself (the endpoint, OTEL_EXPORTER_OTLP_HEADERS with its tokens, the timeout, …). Nothing of
 * it is in schedules.yaml: the file is shared and committed, a collector's headers are secrets,
 * and where a host sends its traces is the host's concern, not the schedule's.
 *
 * Plain reads, no OpenTelemetry: this decides whether the SDK is loaded at all.
 */

/** What a runner that traces is given (library mode's `tracing` option, or the environment). */
export interface TracingSettings {
  /**
   * The OTLP/HTTP traces URL (`http://collector:4318/v1/traces`). Absent: the exporter reads
   * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT plus `/v1/traces`.
   */
  endpoint?: string;
  /** The resource's `service.name`: OTEL_SERVICE_NAME, else `baton`. */
  serviceName: string;
}

export const DEFAULT_SERVICE_NAME = 'baton';

/**
 * Tracing as the environment configures it: on when an OTLP endpoint is set
 * (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT), unless
 * OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none say otherwise; null: off.
 */
export function tracingFromEnvironment(env: NodeJS.ProcessEnv): TracingSettings | null {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return null;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((e) => e.trim().toLowerCase());
  if (exporters.includes('none')) return null;
  const endpoint =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!endpoint) return null;
  return { serviceName: serviceName(env) };
}

/** The service name the spans' resource carries. */
export function serviceName(env: NodeJS.ProcessEnv): string {
  return env.OTEL_SERVICE_NAME?.trim() || DEFAULT_SERVICE_NAME;
}
