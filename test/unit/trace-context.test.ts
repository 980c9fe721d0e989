/**
 * A fire's trace ids (src/trace-context.ts): derived from the fire's key alone, so every runner
 * puts its attempt into the same trace — stable, distinct for distinct keys, valid trace-context
 * ids; and the TRACEPARENT a job gets, read back as its module host reads it.
 */
import { describe, expect, it } from 'vitest';
import { fireEnvironment, fireFromEnvironment } from '../../src/execution/job-context.js';
import { tracingFromEnvironment } from '../../src/config/tracing.js';
import {
  fireTraceIds,
  parseTraceparent,
  traceparent,
  type FireKey,
} from '../../src/trace-context.js';

const KEY: FireKey = {
  namespace: 'billing',
  job: 'settle',
  scheduledAt: new Date('2026-12-07T03:00:00.000Z'),
  generation: 0,
};

describe('fireTraceIds', () => {
  it('is the same for the same fire, whichever runner derives it', () => {
    const a = fireTraceIds(KEY);
    const b = fireTraceIds({ ...KEY, scheduledAt: new Date(KEY.scheduledAt.getTime()) });
    expect(a).toEqual(b);
    // Pinned: a change of the derivation splits a mixed-version fleet's traces, so it is a
    // deliberate one (bump the canonical string's version).
    expect(a).toMatchInlineSnapshot(`
      {
        "fireSpanId": "c7e41bc2afb47930",
        "traceId": "b0c34f5f89ce7d69b7299c799ddfd503",
      }
    `);
  });

  it('is a valid trace-context pair: 32 and 16 lowercase hex digits, not all zero', () => {
    const { traceId, fireSpanId } = fireTraceIds(KEY);
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(fireSpanId).toMatch(/^[0-9a-f]{16}$/);
    expect(traceId).not.toMatch(/^0+$/);
    expect(fireSpanId).not.toMatch(/^0+$/);
  });

  it('differs for another generation, instant, job or namespace', () => {
    const others: FireKey[] = [
      { ...KEY, generation: 1 },
      { ...KEY, scheduledAt: new Date(KEY.scheduledAt.getTime() + 1) },
      { ...KEY, job: 'settle2' },
      { ...KEY, namespace: 'billing2' },
      // The fields' boundary is kept: moving a character from one to the next is another key.
      { ...KEY, namespace: 'billings', job: 'ettle' },
    ];
    const ids = [KEY, ...others].map((k) => fireTraceIds(k).traceId);
    expect(new Set(ids).size).toBe(ids.length);
    const spans = [KEY, ...others].map((k) => fireTraceIds(k).fireSpanId);
    expect(new Set(spans).size).toBe(spans.length);
  });
});

describe('TRACEPARENT', () => {
  const { traceId } = fireTraceIds(KEY);
  const spanId = '00f067aa0ba902b7';
  const trace = { traceparent: traceparent(traceId, spanId), traceId, spanId };

  it('is W3C trace-context, sampled, and read back whole', () => {
    expect(trace.traceparent).toBe(`00-${traceId}-${spanId}-01`);
    expect(parseTraceparent(trace.traceparent)).toEqual(trace);
  });

  it('refuses a malformed or all-zero one', () => {
    for (const bad of [
      undefined,
      '',
      `01-${traceId}-${spanId}-01`,
      `00-${traceId.toUpperCase()}-${spanId}-01`,
      `00-${'0'.repeat(32)}-${spanId}-01`,
      `00-${traceId}-${'0'.repeat(16)}-01`,
    ]) {
      expect(parseTraceparent(bad), String(bad)).toBeNull();
    }
  });

  it('reaches the job with tracing on, and only then', () => {
    const fire = {
      job: 'settle',
      runId: 7,
      fence: 7,
      scheduledAt: KEY.scheduledAt,
      trigger: 'schedule' as const,
      host: 'srv-1',
      attempt: 1,
      worker: { slot: 1, count: 1 },
    };
    expect(fireEnvironment(fire).TRACEPARENT).toBeUndefined();
    const env = fireEnvironment({ ...fire, trace });
    expect(env.TRACEPARENT).toBe(trace.traceparent);
    expect(fireFromEnvironment(env).trace).toEqual(trace);
    expect(fireFromEnvironment(fireEnvironment(fire)).trace).toBeUndefined();
  });
});

describe('tracingFromEnvironment', () => {
  it('is on with an OTLP endpoint, off without one or when OpenTelemetry is told off', () => {
    expect(tracingFromEnvironment({})).toBeNull();
    expect(tracingFromEnvironment({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ' })).toBeNull();
    expect(tracingFromEnvironment({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toEqual({
      serviceName: 'baton',
    });
    expect(
      tracingFromEnvironment({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces',
        OTEL_SERVICE_NAME: 'batch-eu',
      }),
    ).toEqual({ serviceName: 'batch-eu' });
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(tracingFromEnvironment({ ...on, OTEL_SDK_DISABLED: 'true' })).toBeNull();
    expect(tracingFromEnvironment({ ...on, OTEL_TRACES_EXPORTER: 'none' })).toBeNull();
  });
});
