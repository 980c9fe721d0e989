/**
 * The notification outbox in `/metrics`: how many notifications wait per target and how old the
 * oldest is (read from `baton_notifications` at scrape time, for the whole fleet — every runner
 * exports the same values, so a rule takes `max by (target)`), and what this runner's deliveries
 * did (`baton_notifications_total{target, outcome}`, counted from its events).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { RunnerEvents } from '../daemon/runner-events.js';
import type { Queryable } from '../store/deadline.js';
import { outboxState, type OutboxState } from '../store/notification-reads.js';
import { ScrapeCache } from './job-gauges.js';
import { METRICS_TIMINGS, type MetricsTimings } from '../daemon/metrics-timings.js';

export interface NotifyGaugeSource {
  /** The targets of the loaded schedule (a reload changes them). */
  notifyTargets(): readonly string[];
  namespace(): string;
  readPool(): Queryable | null;
  onReadError?(err: unknown): void;
  timings?(): MetricsTimings;
}

const OUTCOMES = ['sent', 'retry', 'failed'] as const;
/** `baton status` and the alert look at deliveries given up in this window. */
export const RECENT_FAILURE_WINDOW_MS = 3_600_000;

export function registerNotifyGauges(
  registers: Registry[],
  source: NotifyGaugeSource,
): { observe(events: RunnerEvents): void } {
  const empty: OutboxState = {
    pending: new Map(),
    oldestPendingSeconds: new Map(),
    failedRecently: new Map(),
    retrying: new Map(),
  };
  const cache = new ScrapeCache<OutboxState>(
    empty,
    () => source.readPool(),
    source.onReadError,
    () => source.timings?.() ?? METRICS_TIMINGS,
  );
  const read = () =>
    cache.current((pool) =>
      outboxState(pool, source.namespace(), new Date(Date.now() - RECENT_FAILURE_WINDOW_MS)),
    );
  const perTarget = (name: string, help: string, value: (s: OutboxState, t: string) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['target'],
      registers,
      async collect() {
        const state = await read();
        this.reset();
        for (const target of source.notifyTargets()) this.set({ target }, value(state, target));
      },
    });
  perTarget(
    'baton_notifications_pending',
    'Notifications waiting to be delivered to the target (pending or being sent), fleet-wide.',
    (s, t) => s.pending.get(t) ?? 0,
  );
  perTarget(
    'baton_notifications_oldest_pending_seconds',
    'Age of the oldest notification waiting for the target, fleet-wide; 0 when none waits.',
    (s, t) => s.oldestPendingSeconds.get(t) ?? 0,
  );
  perTarget(
    'baton_notifications_failed_recent',
    'Notifications to the target given up in the last hour (not retryable, or too many tries).',
    (s, t) => s.failedRecently.get(t) ?? 0,
  );
  const deliveries = new Counter<'target' | 'outcome'>({
    name: 'baton_notifications_total',
    help: 'Deliveries this runner tried, by target and outcome (sent, retry, failed: given up).',
    labelNames: ['target', 'outcome'],
    registers,
  });
  const zero = () => {
    for (const target of source.notifyTargets()) {
      for (const outcome of OUTCOMES) deliveries.inc({ target, outcome }, 0);
    }
  };
  // At each load of the schedule (the source can only be asked once the runner exists).
  return {
    observe(events) {
      events.on('schedule:loaded', zero);
      events.on('notify:delivery', ({ target, outcome }) => deliveries.inc({ target, outcome }));
    },
  };
}
