/**
 * The runner's tracer (daemon/otel-tracer.ts) with the SDK's in-memory exporter: which trace an
 * attempt's spans go to. A re-run with `--again` may claim a later generation than it planned
 * (the claim reads the generations under the job's lock): its attempt and run belong to the
 * trace of the generation it ran, not of the one it planned — two re-runs of one fire never
 * share a trace. An attempt that did not win stays in the planned generation's trace.
 */
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { openFireTracer } from '../../src/daemon/otel-tracer.js';
import { fireTraceIds, type FireKey } from '../../src/trace-context.js';

const KEY: FireKey = {
  namespace: 'ops',
  job: 'settle',
  scheduledAt: new Date('2026-12-06T03:00:00Z'),
  generation: 1,
};

async function traced(
  play: (tracer: ReturnType<typeof openFireTracer>) => void,
): Promise<{ name: string; traceId: string; generation: unknown; outcome: unknown }[]> {
  // The spans as exported (the SDK's in-memory exporter forgets them at its shutdown).
  const exported: ReadableSpan[] = [];
  const memory: SpanExporter = {
    export: (spans, done) => {
      exported.push(...spans);
      done({ code: 0 });
    },
    shutdown: () => Promise.resolve(),
  };
  const tracer = openFireTracer(
    { serviceName: 'baton' },
    { host: 'srv-1', log: pino({ level: 'silent' }) },
    memory,
  );
  play(tracer);
  await tracer.shutdown(5_000);
  return exported.map((s) => ({
    name: s.name,
    traceId: s.spanContext().traceId,
    generation: s.attributes['baton.fire.generation'],
    outcome: s.attributes['baton.attempt.outcome'],
  }));
}

describe("an attempt's trace", () => {
  it('is the claimed generation’s when a re-run claimed a later one than it planned', async () => {
    const spans = await traced((tracer) => {
      const attempt = tracer.attempt(KEY, {
        trigger: 'rerun',
        host: 'srv-1',
        startedAt: new Date(),
      });
      attempt.contended(new Date(), new Date(), true);
      attempt.won(41, 1, 2).end({ status: 'done', attempts: 1, error: null });
      attempt.end();
    });
    const claimed = fireTraceIds({ ...KEY, generation: 2 }).traceId;
    expect(spans.map((s) => s.name).sort()).toEqual([
      'baton.attempt',
      'baton.contend',
      'baton.fire',
      'baton.run',
    ]);
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([claimed]));
    expect(spans.find((s) => s.name === 'baton.attempt')!.generation).toBe(2);
  });

  it('stays the planned generation’s when the attempt did not win', async () => {
    const spans = await traced((tracer) => {
      const attempt = tracer.attempt(KEY, {
        trigger: 'rerun',
        host: 'srv-2',
        startedAt: new Date(),
      });
      attempt.contended(new Date(), new Date(), false);
      attempt.skipped('overlap', 'an earlier run is still running');
      attempt.end();
    });
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([fireTraceIds(KEY).traceId]));
    expect(spans.map((s) => s.name).sort()).toEqual(['baton.attempt', 'baton.contend']);
  });

  it('of a fire nobody attempted is the runner’s record of it: outcome missed, in the fire’s trace', async () => {
    const fire = { ...KEY, generation: 0 };
    const spans = await traced((tracer) =>
      tracer.missed(fire, { host: 'srv-3', kind: 'not-run', at: new Date() }),
    );
    expect(spans).toEqual([
      {
        name: 'baton.attempt',
        traceId: fireTraceIds(fire).traceId,
        generation: 0,
        outcome: 'missed',
      },
    ]);
  });
});
