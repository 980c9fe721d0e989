/**
 * The fire pipeline's tracer (fire/fire-trace.ts) over OpenTelemetry's SDK, exporting OTLP/HTTP
 * (JSON) through a batch processor. This module is imported only when tracing is configured
 * (runner.ts, with a dynamic import): its packages are some 200 modules that a runner which does
 * not trace never loads (e2e/cli-modules.test.ts keeps it so), as the SMTP client is loaded by
 * the first mail.
 *
 * The spans of one fire, every runner sending its own (docs/design.md, "Traces"):
 *
 *   baton.fire      the root: span id derived from the fire's key, sent by the winner of slot 1
 *   ├ baton.attempt   one per runner that considered the fire: won, skipped (its kind), or
 *   │ │               not attempted (its cause)
 *   │ ├ baton.contend   the lock, its wait, the claim
 *   │ └ baton.run       the winner's run: TRACEPARENT and `ctx.trace` point here
 *   │   ├ baton.process   each attempt of the job's process (retries, with their waits as events)
 *   │   ├ <the job's own spans>
 *   │   └ baton.verdict   the verdict's write (its notifications are enqueued in it)
 *
 * Nothing here may slow a fire or break a run: spans are ended into the batch processor's queue
 * (dropped when it is full), exported on its timer, and an export that fails is logged once per
 * failing spell, with the error's words only — never the exporter's headers, which hold the
 * collector's tokens. No global is registered (no `provider.register()`): an application in
 * library mode keeps its own OpenTelemetry set-up, and two schedulers in one process two tracers.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import http from 'node:http';
import type net from 'node:net';
import https from 'node:https';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  RandomIdGenerator,
  type IdGenerator,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import {
  ATTR_SERVICE_INSTANCE_ID,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
} from '@opentelemetry/semantic-conventions';
import type { TracingSettings } from '../config/tracing.js';
import { errorMessage } from '../errors.js';
import type { AttemptTrace, FireTracer, RunTrace } from '../fire/fire-trace.js';
import { fireTraceIds, traceparent, type FireKey, type FireTraceIds } from '../trace-context.js';
import type { Logger } from '../log.js';
import { version } from '../version.js';

/** `host.name` (semantic conventions, incubating: its entry point is 800 kB to read one name). */
const ATTR_HOST_NAME = 'host.name';

/** A tracer with its exporter: `shutdown` sends what is queued, for at most `boundMs`. */
export interface OpenFireTracer extends FireTracer {
  shutdown(boundMs: number): Promise<void>;
}

/** Builds the tracer of the runner on `host`. */
export function openFireTracer(
  settings: TracingSettings,
  o: { host: string; log: Logger },
  /** Where the spans go instead of OTLP/HTTP (a test's in-memory exporter). */
  exportTo?: SpanExporter,
): OpenFireTracer {
  const ids = new FireIds();
  // The exporter's sockets never keep the process alive (unref'd), and are ended when the stop's
  // bound passes: a collector that takes a request and never answers would otherwise hold the
  // stopped runner's process until the exporter's own timeout (OTEL_EXPORTER_OTLP_TIMEOUT),
  // however short the bound.
  const agents: (http.Agent | https.Agent)[] = [];
  const agentFor = (protocol: string) => {
    const agent = unrefAgent(protocol);
    agents.push(agent);
    return agent;
  };
  const exporter = new ReportingExporter(
    exportTo ??
      new OTLPTraceExporter({
        ...(settings.endpoint ? { url: settings.endpoint } : {}),
        httpAgentOptions: agentFor,
      }),
    o.log,
  );
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: settings.serviceName,
      [ATTR_SERVICE_VERSION]: version,
      [ATTR_SERVICE_INSTANCE_ID]: o.host,
      [ATTR_HOST_NAME]: o.host,
    }),
    idGenerator: ids,
    // OTEL_BSP_* tune it (the queue, the delay between exports, their timeout).
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer('baton', version);
  const exports = new ExportsBetweenFires(provider);
  return {
    attempt: (key, a) => new Attempt(tracer, ids, key, a, exports),
    missed(key, m) {
      tracer
        .startSpan(
          'baton.attempt',
          {
            kind: SpanKind.INTERNAL,
            startTime: m.at,
            attributes: {
              ...fireAttributes(key, 'schedule'),
              'baton.runner.host': m.host,
              'baton.attempt.outcome': 'missed',
              'baton.missed.kind': m.kind,
            },
          },
          underFireRoot(fireTraceIds(key)),
        )
        .end(m.at);
    },
    async shutdown(boundMs) {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), boundMs);
        timer.unref();
      });
      const done = provider.shutdown().then(
        () => 'done' as const,
        (err: unknown) => {
          o.log.warn({ error: safeMessage(err) }, 'tracing: the last spans could not be sent');
          return 'done' as const;
        },
      );
      const how = await Promise.race([done, bound]);
      clearTimeout(timer);
      if (how === 'late') {
        o.log.warn({ boundMs }, 'tracing: gave up sending the last spans at the stop');
        exporter.abandon();
        for (const agent of agents) agent.destroy();
      }
    },
  };
}

/**
 * Sends the spans once no attempt is in flight — right after a fire's work, the farthest from the
 * next fire — rather than on the batch processor's timer alone, whose export (serialising the
 * spans, the request) fell on fire instants at random and delayed their claims (bench fire-lag,
 * traced: p99 up 2–3×). The timer (OTEL_BSP_SCHEDULE_DELAY) still sends the spans of a run that
 * goes on for long.
 */
class ExportsBetweenFires {
  private inFlight = 0;
  private flushAsked = false;

  constructor(private readonly provider: BasicTracerProvider) {}

  begun(): void {
    this.inFlight++;
  }

  ended(): void {
    this.inFlight--;
    if (this.inFlight > 0 || this.flushAsked) return;
    this.flushAsked = true;
    // After the turn in which the fire's last steps run (its batch's other attempts end with it).
    setImmediate(() => {
      this.flushAsked = false;
      if (this.inFlight === 0) this.provider.forceFlush().catch(() => {});
    }).unref();
  }
}

/** What every span of a fire says of it. */
function fireAttributes(key: FireKey, trigger: string): Attributes {
  return {
    'baton.namespace': key.namespace,
    'baton.job': key.job,
    'baton.fire.scheduled_at': key.scheduledAt.toISOString(),
    'baton.fire.generation': key.generation,
    'baton.trigger': trigger,
  };
}

/**
 * The fire's root span as a remote parent, which no one may have sent yet: every runner names the
 * same one (its ids are the fire's), so their attempts meet in one trace.
 */
function underFireRoot(ids: FireTraceIds): Context {
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: ids.traceId,
    spanId: ids.fireSpanId,
    traceFlags: TraceFlags.SAMPLED,
    isRemote: true,
  });
}

/**
 * An agent for `protocol` whose sockets do not hold the event loop open (keep-alive, as the
 * exporter's own would be): each connection it makes is unref'd as it is made.
 */
function unrefAgent(protocol: string): http.Agent | https.Agent {
  const agent =
    protocol === 'https:'
      ? new https.Agent({ keepAlive: true })
      : new http.Agent({ keepAlive: true });
  const connect = agent.createConnection.bind(agent);
  agent.createConnection = (...args: Parameters<typeof connect>) => {
    const socket = connect(...args);
    (socket as Partial<net.Socket> | undefined)?.unref?.();
    return socket;
  };
  return agent;
}

/**
 * Random ids, but for the root `fire` span, whose ids are the fire's (`withIds`). The SDK asks
 * for a root span's trace id and span id inside `startSpan`, synchronously: set just around it.
 */
class FireIds implements IdGenerator {
  private readonly random = new RandomIdGenerator();
  private fixed: { traceId: string; spanId: string } | null = null;

  generateTraceId(): string {
    return this.fixed?.traceId ?? this.random.generateTraceId();
  }

  generateSpanId(): string {
    return this.fixed?.spanId ?? this.random.generateSpanId();
  }

  withIds<T>(ids: { traceId: string; spanId: string }, make: () => T): T {
    this.fixed = ids;
    try {
      return make();
    } finally {
      this.fixed = null;
    }
  }
}

/** One runner's attempt at a fire (fire-trace.ts: AttemptTrace). */
class Attempt implements AttemptTrace {
  private ids!: FireTraceIds;
  private span: Span | null = null;
  private fireAttributes: Attributes = {};
  /** The contention, told before the span is opened (see `open`). */
  private contention: { from: Date; to: Date; won: boolean } | null = null;
  private run: Run | null = null;
  /** This attempt's winner sends the root span (slot 1 of the fire). */
  private sendsRoot = false;
  private ended = false;

  constructor(
    private readonly tracer: Tracer,
    private readonly fireIds: FireIds,
    private key: FireKey,
    private readonly a: { trigger: string; host: string; startedAt: Date },
    private readonly exports: ExportsBetweenFires,
  ) {
    exports.begun();
  }

  /**
   * The attempt's span, begun at the attempt's start but opened only once its outcome is known:
   * a re-run with `--again` may claim a later generation than it planned (the claim reads the
   * generations under the job's lock), and the span belongs to the trace of the generation run.
   */
  private open(generation?: number): Span {
    if (this.span) return this.span;
    if (generation != null) this.key = { ...this.key, generation };
    const key = this.key;
    this.ids = fireTraceIds(key);
    this.fireAttributes = fireAttributes(key, this.a.trigger);
    const fire = underFireRoot(this.ids);
    this.span = this.tracer.startSpan(
      'baton.attempt',
      {
        kind: SpanKind.INTERNAL,
        startTime: this.a.startedAt,
        attributes: { ...this.fireAttributes, 'baton.runner.host': this.a.host },
      },
      fire,
    );
    if (this.contention) this.tellContention(this.contention);
    return this.span;
  }

  private get context(): Context {
    return trace.setSpan(ROOT_CONTEXT, this.open());
  }

  contended(from: Date, to: Date, won: boolean): void {
    this.contention = { from, to, won };
    if (this.span) this.tellContention(this.contention);
  }

  private tellContention({ from, to, won }: { from: Date; to: Date; won: boolean }): void {
    this.tracer
      .startSpan(
        'baton.contend',
        { startTime: from, attributes: { 'baton.won': won } },
        this.context,
      )
      .end(to);
  }

  skipped(kind: string, reason: string): void {
    this.open().setAttributes({
      'baton.attempt.outcome': 'skipped',
      'baton.skip.kind': kind,
      'baton.skip.reason': reason,
    });
  }

  notAttempted(cause: string, error?: string): void {
    const span = this.open();
    span.setAttributes({
      'baton.attempt.outcome': 'not-attempted',
      'baton.not_attempted.cause': cause,
    });
    span.setStatus({ code: SpanStatusCode.ERROR, ...(error ? { message: error } : {}) });
  }

  won(runId: number, slot: number, generation: number): RunTrace {
    this.open(generation).setAttributes({ 'baton.attempt.outcome': 'won', 'baton.run.id': runId });
    this.sendsRoot = slot === 1;
    this.run = new Run(this.tracer, this.context, runId, slot);
    return this.run;
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    const now = new Date();
    this.run?.end(null);
    this.open().end(now);
    if (this.sendsRoot) this.sendRoot(now);
    this.exports.ended();
  }

  /** The fire's root span, with the ids every attempt named as their parent's. */
  private sendRoot(end: Date): void {
    const { scheduledAt } = this.key;
    const start = scheduledAt < this.a.startedAt ? scheduledAt : this.a.startedAt;
    const root = this.fireIds.withIds(
      { traceId: this.ids.traceId, spanId: this.ids.fireSpanId },
      () =>
        this.tracer.startSpan(
          'baton.fire',
          {
            kind: SpanKind.INTERNAL,
            root: true,
            startTime: start,
            attributes: this.fireAttributes,
          },
          ROOT_CONTEXT,
        ),
    );
    root.end(end);
  }
}

/** The winner's run (fire-trace.ts: RunTrace). */
class Run implements RunTrace {
  readonly context;
  private readonly span: Span;
  private ended = false;

  constructor(
    private readonly tracer: Tracer,
    attempt: Context,
    runId: number,
    slot: number,
  ) {
    this.span = tracer.startSpan(
      'baton.run',
      { attributes: { 'baton.run.id': runId, 'baton.run.slot': slot } },
      attempt,
    );
    const { traceId, spanId } = this.span.spanContext();
    this.context = { traceparent: traceparent(traceId, spanId), traceId, spanId };
  }

  private get parent(): Context {
    return trace.setSpan(ROOT_CONTEXT, this.span);
  }

  processRan(
    attempt: number,
    from: Date,
    result: { status: string; exitCode: number | null; endedAt: Date },
  ): void {
    const span = this.tracer.startSpan(
      'baton.process',
      {
        startTime: from,
        attributes: {
          'baton.process.attempt': attempt,
          'baton.process.status': result.status,
          ...(result.exitCode != null ? { 'process.exit.code': result.exitCode } : {}),
        },
      },
      this.parent,
    );
    if (result.status !== 'done') span.setStatus({ code: SpanStatusCode.ERROR });
    span.end(result.endedAt < from ? from : result.endedAt);
  }

  retryWait(attempt: number, waitMs: number): void {
    this.span.addEvent('retry wait', { 'baton.process.attempt': attempt, 'baton.wait_ms': waitMs });
  }

  verdict(from: Date, to: Date, written: string, notifies: boolean): void {
    const span = this.tracer.startSpan(
      'baton.verdict',
      { startTime: from, attributes: { 'baton.verdict.written': written } },
      this.parent,
    );
    // The notifications are rows written in the verdict's transaction; the notifier delivers
    // them later, from whichever runner claims them.
    if (notifies && written === 'recorded') span.addEvent('notifications enqueued');
    if (written === 'failed') span.setStatus({ code: SpanStatusCode.ERROR });
    span.end(to);
  }

  end(result: { status: string; attempts: number; error: string | null } | null): void {
    if (this.ended) return;
    this.ended = true;
    if (result) {
      this.span.setAttributes({
        'baton.run.status': result.status,
        'baton.run.attempts': result.attempts,
      });
      if (result.status !== 'done') {
        this.span.setStatus({
          code: SpanStatusCode.ERROR,
          ...(result.error ? { message: result.error } : {}),
        });
      }
    } else {
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: 'the run was not completed' });
    }
    this.span.end();
  }
}

/**
 * The exporter, with its failures told in the runner's log: once when exports begin to fail,
 * once when they work again — a dead collector is a spell, not a line per batch.
 */
class ReportingExporter implements SpanExporter {
  private failing = false;
  /** The exports not answered yet: `abandon` answers them. */
  private readonly pending = new Set<() => void>();

  constructor(
    private readonly inner: SpanExporter,
    private readonly log: Logger,
  ) {}

  /**
   * Answers every export still waiting as failed, at once: the batch processor then clears the
   * timer it keeps per export (OTEL_BSP_EXPORT_TIMEOUT, 30 s by default), which would hold a
   * stopped runner's process that long. The exporter's late answers are dropped.
   */
  abandon(): void {
    for (const fail of [...this.pending]) fail();
  }

  export(spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]): void {
    let answered = false;
    const answer: typeof done = (result) => {
      if (answered) return;
      answered = true;
      this.pending.delete(fail);
      done(result);
    };
    // ExportResultCode.FAILED is 1.
    const fail = () => answer({ code: 1, error: new Error('abandoned at the stop') });
    this.pending.add(fail);
    this.inner.export(spans, (result) => {
      // ExportResultCode.SUCCESS is 0 (@opentelemetry/core, not a dependency of ours).
      if (result.code !== 0) {
        if (!this.failing) {
          this.log.warn(
            { error: safeMessage(result.error), spans: spans.length },
            'tracing: spans could not be exported (told once until exports work again)',
          );
        }
        this.failing = true;
      } else if (this.failing) {
        this.failing = false;
        this.log.info('tracing: spans are exported again');
      }
      answer(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * An export error's words, bounded, with any credentials of a URL in them replaced: the
 * exporter's own messages name the URL at most, never its headers, but a URL may carry a
 * user and password.
 */
function safeMessage(err: unknown): string {
  const text = err == null ? 'unknown error' : errorMessage(err);
  return text.replace(/\/\/[^/\s@]+@/g, '//***@').slice(0, 300);
}
