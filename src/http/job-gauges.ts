/**
 * The per-job gauges of `/metrics` that say what the *fleet* did, whichever runner did it: when
 * each loaded job last succeeded, last failed and last finished, read from the history at scrape
 * time (store/outcome-reads.ts), and how long it may go without a success (its dead-man window,
 * schedule/dead-man.ts). Every runner exports the same values, so a rule takes `max by (baton_job)`.
 *
 * A scrape must never fail or hang because of the database: the history is read at most once per
 * OUTCOMES_REUSE_MS (however many scrapers), a scrape waits at most SCRAPE_WAIT_MS for a read in
 * progress, and when the database does not answer (or this runner is not connected) the last
 * values read are served. A job that never had such a run has no series (as kube-state-metrics
 * leaves out `kube_cronjob_status_last_successful_time`): `absent()` or `unless` finds it.
 *
 * Beside them, `baton_job_runs_overdue`: how many of each loaded job's runs are going on past their
 * warn (`duration.warn`) now — a count, so every loaded job has its series, 0 when none is.
 */
import { Gauge, type Registry } from 'prom-client';
import { delay } from '../delay.js';
import { expectation } from '../schedule/dead-man.js';
import { FINAL_STATUSES, type FinalStatus } from '../run-status.js';
import type { Schedule } from '../schedule/cron.js';
import type { Queryable } from '../store/deadline.js';
import { latestOutcomes, overdueRuns, type JobOutcomes } from '../store/outcome-reads.js';
import { METRICS_TIMINGS, type MetricsTimings } from '../daemon/metrics-timings.js';

/** What the gauges need of one loaded job. */
export interface JobWindow {
  name: string;
  /** The job's `expect:`; null for the default rule (two fires plus a grace). */
  expectMs: number | null;
  /**
   * The schedule its default window is counted on; null (a job that runs only after its parents
   * and was given none of theirs, daemon/loaded-schedule.ts `deadManSchedule`): no default window.
   */
  schedule: Schedule | null;
}

export interface JobGaugeSource {
  /** The enabled jobs as loaded now (a reload changes them). */
  jobs(): readonly JobWindow[];
  namespace(): string;
  /** The pool while this runner is connected; null: serve the last values. */
  readPool(): Queryable | null;
  /** Now by the database's clock (the history's finish times are in it). */
  now(): Date;
  /** A read of the history failed (the last values are served meanwhile). */
  onReadError?(err: unknown): void;
  /** The reads' pace, asked at scrape time; METRICS_TIMINGS when absent. */
  timings?(): MetricsTimings;
}

const FAILURES: readonly FinalStatus[] = ['failed', 'timeout', 'lost'];

const latest = (o: JobOutcomes, statuses: readonly FinalStatus[]): Date | undefined =>
  statuses
    .map((s) => o[s])
    .reduce<Date | undefined>((a, b) => (b && (!a || b > a) ? b : a), undefined);

export function registerJobGauges(registers: Registry[], source: JobGaugeSource): void {
  const outcomes = new OutcomeCache(source);
  const perJob = (
    name: string,
    help: string,
    seconds: (job: JobWindow, o: JobOutcomes) => number | null,
  ) =>
    new Gauge({
      name,
      help,
      labelNames: ['baton_job'],
      registers,
      async collect() {
        const jobs = source.jobs();
        const known = await outcomes.current(jobs.map((j) => j.name));
        // Only the jobs loaded now: a job a reload removed is no longer exported.
        this.reset();
        for (const job of jobs) {
          const value = seconds(job, known.get(job.name) ?? {});
          if (value != null) this.set({ baton_job: job.name }, value);
        }
      },
    });
  const unix = (at: Date | undefined) => (at ? at.getTime() / 1000 : null);
  perJob(
    'baton_job_last_success_timestamp_seconds',
    'When the latest done run of the job finished, in Unix seconds (database time), on any ' +
      'runner. No series until the job has succeeded once.',
    (_, o) => unix(o.done),
  );
  perJob(
    'baton_job_last_failure_timestamp_seconds',
    'When the latest failed, timeout or lost run of the job finished, in Unix seconds ' +
      '(database time), on any runner. No series until the job has failed once.',
    (_, o) => unix(latest(o, FAILURES)),
  );
  perJob(
    'baton_job_last_run_timestamp_seconds',
    'When the latest run of the job finished, whatever its final status (interrupted ' +
      'and killed included), in Unix seconds (database time), on any runner. No series until one has.',
    (_, o) => unix(latest(o, FINAL_STATUSES)),
  );
  perJob(
    'baton_job_expect_seconds',
    'How long the job may go without a success (its dead-man window: its expect:, or two ' +
      'fires plus a grace after its last success): alert on time() - ' +
      'baton_job_last_success_timestamp_seconds > baton_job_expect_seconds.',
    (job, o) => {
      const since = o.done ?? source.now();
      const expected = expectation({ expectMs: job.expectMs, schedule: job.schedule }, since);
      return expected ? expected.expectMs / 1000 : null;
    },
  );
  registerOverdueGauge(registers, source);
}

/**
 * `baton_job_runs_overdue{baton_job}`: the runs of each loaded job going on past their warn now,
 * read from the history at scrape time (as the timestamps are, with their cache and bounds).
 */
function registerOverdueGauge(registers: Registry[], source: JobGaugeSource): void {
  const overdue = new ScrapeCache<ReadonlyMap<string, number>>(
    new Map(),
    () => source.readPool(),
    source.onReadError?.bind(source),
    () => source.timings?.() ?? METRICS_TIMINGS,
  );
  new Gauge({
    name: 'baton_job_runs_overdue',
    help:
      "Runs of the job going on past their duration warn now (the row's warn_at before the " +
      'database time), on any runner: alert on max by (baton_job) (baton_job_runs_overdue) > 0. 0 ' +
      'when none is (also for a job without a warn).',
    labelNames: ['baton_job'],
    registers,
    async collect() {
      const jobs = source.jobs();
      const counts = await overdue.current((pool) => overdueRuns(pool, source.namespace()));
      this.reset();
      for (const job of jobs) this.set({ baton_job: job.name }, counts.get(job.name) ?? 0);
    },
  });
}

/**
 * A value read from the database at scrape time, at most once per OUTCOMES_REUSE_MS however many
 * scrapers ask; a scrape waits at most SCRAPE_WAIT_MS for a read in progress, and the last value
 * read is served when the database does not answer (or this runner is not connected).
 */
export class ScrapeCache<T> {
  private readAt = -Infinity;
  private reading: Promise<void> | null = null;

  constructor(
    private value: T,
    private readonly readPool: () => Queryable | null,
    private readonly onReadError?: (err: unknown) => void,
    private readonly timings: () => MetricsTimings = () => METRICS_TIMINGS,
  ) {}

  async current(read: (pool: Queryable) => Promise<T>): Promise<T> {
    const t = this.timings();
    if (!this.reading && performance.now() - this.readAt >= t.readReuseMs) {
      const pool = this.readPool();
      if (pool) this.reading = this.read(pool, read);
    }
    if (this.reading) {
      const waited = new AbortController();
      await Promise.race([this.reading, delay(t.scrapeWaitMs, waited.signal)]);
      waited.abort();
    }
    return this.value;
  }

  private async read(pool: Queryable, read: (pool: Queryable) => Promise<T>): Promise<void> {
    try {
      this.value = await read(pool);
    } catch (err) {
      // The last value stays; the next read is tried after the same pause as after a success.
      this.onReadError?.(err);
    } finally {
      this.readAt = performance.now();
      this.reading = null;
    }
  }
}

/** The history's latest outcomes per job. */
class OutcomeCache {
  private readonly cache: ScrapeCache<ReadonlyMap<string, JobOutcomes>>;

  constructor(private readonly source: JobGaugeSource) {
    this.cache = new ScrapeCache<ReadonlyMap<string, JobOutcomes>>(
      new Map(),
      () => source.readPool(),
      source.onReadError?.bind(source),
      () => source.timings?.() ?? METRICS_TIMINGS,
    );
  }

  current(jobs: readonly string[]): Promise<ReadonlyMap<string, JobOutcomes>> {
    return this.cache.current((pool) => latestOutcomes(pool, this.source.namespace(), jobs));
  }
}
