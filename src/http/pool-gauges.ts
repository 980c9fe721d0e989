/**
 * The pools in `/metrics` (docs/pools.md): each pool's slots and how many are taken, read at
 * scrape time from the server (a slot is a named lock; fleet/pool-status.ts) — so every runner
 * exports the same values for a fleet-wide pool (a rule takes `max by (pool)`), and its own
 * host's for a pool of `scope: host`. Read at most once per reuse window and served from the last
 * read when the database does not answer, as the job gauges are (job-gauges.ts `ScrapeCache`).
 */
import { Gauge, type Registry } from 'prom-client';
import type { PoolDefinition } from '../config/pools.js';
import { METRICS_TIMINGS, type MetricsTimings } from '../daemon/metrics-timings.js';
import { readPoolStatus, slotsInUse, type PoolStatus } from '../fleet/pool-status.js';
import type { Queryable } from '../store/deadline.js';
import { ScrapeCache } from './job-gauges.js';

export interface PoolGaugeSource {
  /** The pools of the loaded schedule (a reload changes them). */
  pools(): readonly PoolDefinition[];
  /** Where the slots are: the database and namespace, and this runner's host. */
  poolPlace(): { database: string; namespace: string; host: string };
  readPool(): Queryable | null;
  onReadError?(err: unknown): void;
  timings?(): MetricsTimings;
}

export function registerPoolGauges(registers: Registry[], source: PoolGaugeSource): void {
  const cache = new ScrapeCache<readonly PoolStatus[]>(
    [],
    () => source.readPool(),
    source.onReadError?.bind(source),
    () => source.timings?.() ?? METRICS_TIMINGS,
  );
  const read = () =>
    cache.current((db) => {
      const place = source.poolPlace();
      return readPoolStatus(db, place, source.pools(), [place.host]);
    });
  const perPool = (name: string, help: string, value: (p: PoolStatus) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['pool'],
      registers,
      async collect() {
        const pools = await read();
        // Only the pools loaded now, with what was last read of them.
        const loaded = new Set(source.pools().map((p) => p.name));
        this.reset();
        for (const p of pools) if (loaded.has(p.name)) this.set({ pool: p.name }, value(p));
      },
    });
  perPool(
    'baton_pool_slots',
    "The pool's slots: the fleet's, or this runner's host's for a pool of scope host.",
    (p) => p.slots,
  );
  perPool(
    'baton_pool_slots_in_use',
    "The pool's slots taken now, by any runner (this host's, for a pool of scope host): alert " +
      'on baton_pool_slots_in_use == baton_pool_slots for long, with skips of reason pool.',
    slotsInUse,
  );
}
