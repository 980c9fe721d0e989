/**
 * What one runner counts and measures, in Prometheus' text format (prom-client).
 *
 * Every runner exports its own view: `baton_runs_total` counts the runs *this* runner won, so the
 * fleet's runs are the sum over runners, and every fire shows up once as a run somewhere and as a
 * skip on each other runner. The fleet's own truth per job (last success, last failure, its
 * dead-man window) is read from the history: job-gauges.ts. Labels are the job name as
 * `baton_job` (validated: letters, digits, `._-`; not `job`, which is Prometheus' own target
 * label and would arrive as `exported_job`), the run status, and a reason from a fixed set —
 * never free text, so the series stay few.
 *
 * Every per-job counter series of every loaded job exists from the moment the job is loaded (at
 * start and at each reload), at 0: a counter that first appears at 1 is invisible to
 * `increase()`, so a job's first failure would alert only at its second. A job a reload removes
 * is no longer exported: its series are removed then, and a run of it still going at the reload
 * is not counted when it ends (its row in the history is).
 */
import { jobOfSubject } from '../schedule-keys.js';
import { Counter, Gauge, Histogram, Registry, type CounterConfiguration } from 'prom-client';
import type { RunnerEvents } from '../daemon/runner-events.js';
import type { RunnerGauges } from '../daemon/health.js';
import { NOT_ATTEMPTED_LABEL, type NotAttempted } from '../fire/fire-events.js';
import { FINAL_STATUSES, type SkipKind } from '../run-status.js';
import { registerJobGauges, type JobGaugeSource } from './job-gauges.js';
import { registerNotifyGauges, type NotifyGaugeSource } from './notify-gauges.js';
import { registerPoolGauges, type PoolGaugeSource } from './pool-gauges.js';

export interface RunnerIdentity {
  host: string;
  namespace: string;
  version: string;
}

/**
 * The `reason` label of `baton_skips_total`: the skip kinds folded into the three that matter for
 * alerting (a fleet's normal `taken`, a job behind itself, a pause), a child job its parents
 * did not let run (`upstream`), and a fire its pool had no slot for (`pool`: a pool too small for
 * its jobs shows here). The row keeps the fine kind.
 */
export const SKIP_LABEL: Record<SkipKind, 'taken' | 'overlap' | 'paused' | 'upstream' | 'pool'> = {
  taken: 'taken',
  'already-ran': 'taken',
  overlap: 'overlap',
  behind: 'overlap',
  paused: 'paused',
  upstream: 'upstream',
  pool: 'pool',
  // Written by the calendar watch, never by a contention: no skip is counted with it.
  calendar: 'paused',
};

/** The `reason` labels of `baton_skips_total`. */
const SKIP_REASONS = [...new Set(Object.values(SKIP_LABEL))];

/** The `reason` labels of `baton_fires_not_attempted_total`. */
const NOT_ATTEMPTED_REASONS: readonly NotAttempted[] = [
  ...new Set([...Object.values(NOT_ATTEMPTED_LABEL), 'late-wake' as const]),
];

/** What the metrics read from the runner at scrape time. */
export interface MetricsSource extends JobGaugeSource, NotifyGaugeSource, PoolGaugeSource {
  gauges(): RunnerGauges;
}

export class RunnerMetrics {
  readonly registry = new Registry();
  private readonly runs: Counter<'baton_job' | 'status'>;
  private readonly skips: Counter<'baton_job' | 'reason'>;
  private readonly notAttempted: Counter<'baton_job' | 'reason'>;
  private readonly missed: Counter<'baton_job'>;
  private readonly lockSessionLosses: Counter;
  private readonly failovers: Counter;
  private readonly duration: Histogram<'baton_job'>;
  private readonly fireLag: Histogram<'baton_job'>;
  private readonly lockAcquisition: Histogram<'outcome'>;
  private readonly notifications: ReturnType<typeof registerNotifyGauges>;
  /** The jobs loaded now: their series exist, and only theirs are counted. */
  private loaded = new Set<string>();

  constructor(identity: RunnerIdentity, source: MetricsSource) {
    const gauges = () => source.gauges();
    const registers = [this.registry];
    const counter = <L extends string>(c: CounterConfiguration<L>) =>
      new Counter<L>({ ...c, registers });
    this.runs = counter({
      name: 'baton_runs_total',
      help: 'Runs this runner won and finished, by job and final status.',
      labelNames: ['baton_job', 'status'],
    });
    this.skips = counter({
      name: 'baton_skips_total',
      help:
        'Fires this runner skipped, by job and reason: taken (another runner won the fire), ' +
        'overlap (an earlier run was still running), paused.',
      labelNames: ['baton_job', 'reason'],
    });
    this.notAttempted = counter({
      name: 'baton_fires_not_attempted_total',
      help:
        'Fires this runner did not contend for, or could not finish contending for, by reason: ' +
        'no-database (no usable lock session), read-only, late-wake (it woke over a minute ' +
        'late), error (contention failed), stale-schedule (its claim was refused: the ' +
        "runner's read of the job's schedule was older than the database's).",
      labelNames: ['baton_job', 'reason'],
    });
    this.missed = counter({
      name: 'baton_fires_missed_total',
      help:
        'Missed rows this runner recorded after reconnecting: fires that no runner attempted ' +
        '(each is recorded by one runner only, so the fleet total is the sum).',
      labelNames: ['baton_job'],
    });
    this.lockSessionLosses = counter({
      name: 'baton_lock_session_losses_total',
      help: "Times this runner's lock session was lost (its runs were aborted and recorded lost).",
    });
    this.failovers = counter({
      name: 'baton_database_failovers_total',
      help: 'Times this runner reconnected to another database server than before (a failover).',
    });
    this.duration = new Histogram({
      name: 'baton_run_duration_seconds',
      help: 'How long runs this runner won took, all attempts included.',
      labelNames: ['baton_job'],
      buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600],
      registers,
    });
    this.fireLag = new Histogram({
      name: 'baton_fire_lag_seconds',
      help:
        "Scheduled fires: the job's start minus its planned start (the scheduled instant plus any " +
        'jitter delay), both in database time ' +
        '(claim plus process start).',
      labelNames: ['baton_job'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.lockAcquisition = new Histogram({
      name: 'baton_lock_acquisition_seconds',
      help:
        'How long contending for a fire took (GET_LOCK, the fire key, the reads that go with ' +
        'them), by outcome: won or skipped.',
      labelNames: ['outcome'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });

    const gauge = (name: string, help: string, read: (g: RunnerGauges) => number | null) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          // NaN is Prometheus' "no value": an offset not measured yet is not an offset of 0.
          this.set(read(gauges()) ?? NaN);
        },
      });
    gauge('baton_database_up', '1 while the lock session answers its heartbeats.', (g) =>
      g.databaseUp ? 1 : 0,
    );
    gauge('baton_database_read_only', '1 while the database is read-only (no fire runs).', (g) =>
      g.readOnly ? 1 : 0,
    );
    gauge(
      'baton_database_detached',
      '1 while this runner holds its fires after a failover: no other runner heartbeats on its ' +
        'server, which the fleet has left (a split brain).',
      (g) => (g.detached ? 1 : 0),
    );
    gauge(
      'baton_clock_offset_seconds',
      "This host's clock minus the database's (fires run on database time either way).",
      (g) => (g.clockOffsetMs == null ? null : g.clockOffsetMs / 1000),
    );
    gauge('baton_runs_running', 'Runs of this runner in progress.', (g) => g.runningRuns);
    gauge('baton_jobs_loaded', 'Enabled jobs in the loaded schedule.', (g) => g.jobsLoaded);
    gauge(
      'baton_scheduler_last_wake_timestamp_seconds',
      "When the scheduler loop last woke, in Unix seconds (this host's clock). It wakes at " +
        "least every 30 s: time() minus this over 90 means it's stuck.",
      (g) => (Date.now() - g.sinceLastWakeMs) / 1000,
    );
    new Gauge({
      name: 'baton_runner_info',
      help: 'This runner: always 1, with its host id, namespace and baton version as labels.',
      labelNames: ['host', 'namespace', 'version'],
      registers,
    }).set(identity, 1);
    registerJobGauges(registers, source);
    this.notifications = registerNotifyGauges(registers, source);
    registerPoolGauges(registers, source);
    processMetrics(registers);
  }

  /** Counts what the runner reports; call once, before the runner starts. */
  observe(events: RunnerEvents): void {
    this.notifications.observe(events);
    events.on('schedule:loaded', ({ jobs }) => this.load(jobs));
    // Per job, only the jobs loaded now (a run of a job a reload removed is not counted). A
    // dynamic schedule's fires (`<job>:<key>`) count as its job's: one series per job, not one
    // per tenant.
    const of = (name: string) => {
      const job = jobOfSubject(name);
      return this.loaded.has(job) ? job : null;
    };
    events.on('fire:won', ({ contendMs, lagMs, fire }) => {
      if (contendMs != null) this.lockAcquisition.observe({ outcome: 'won' }, contendMs / 1000);
      const job = of(fire.job);
      if (job && lagMs != null) this.fireLag.observe({ baton_job: job }, Math.max(0, lagMs) / 1000);
    });
    events.on('fire:skipped', ({ fire, kind, contendMs }) => {
      const job = of(fire.job);
      if (job) this.skips.inc({ baton_job: job, reason: SKIP_LABEL[kind] });
      if (contendMs != null) this.lockAcquisition.observe({ outcome: 'skipped' }, contendMs / 1000);
    });
    events.on('run:finished', ({ fire, status, durationMs }) => {
      const job = of(fire.job);
      if (!job) return;
      this.runs.inc({ baton_job: job, status });
      this.duration.observe({ baton_job: job }, durationMs / 1000);
    });
    events.on('fire:notAttempted', ({ fire, cause }) => {
      const job = of(fire.job);
      if (job) this.notAttempted.inc({ baton_job: job, reason: NOT_ATTEMPTED_LABEL[cause] });
    });
    events.on('loop:missedFires', ({ job: name }) => {
      const job = of(name);
      if (job) this.notAttempted.inc({ baton_job: job, reason: 'late-wake' });
    });
    events.on('fires:missed', ({ job: name, count }) => {
      const job = of(name);
      if (job) this.missed.inc({ baton_job: job }, count);
    });
    events.on('lock:lost', () => this.lockSessionLosses.inc());
    events.on('db:failover', () => this.failovers.inc());
  }

  /**
   * A schedule was loaded (start, reload): every counter series of a new job starts at 0 (one
   * already there keeps its count), and the series of a job no longer loaded go.
   */
  private load(jobs: readonly string[]): void {
    const now = new Set(jobs);
    for (const baton_job of this.loaded) {
      if (now.has(baton_job)) continue;
      for (const status of FINAL_STATUSES) this.runs.remove({ baton_job, status });
      for (const reason of SKIP_REASONS) this.skips.remove({ baton_job, reason });
      for (const reason of NOT_ATTEMPTED_REASONS) this.notAttempted.remove({ baton_job, reason });
      this.missed.remove({ baton_job });
      this.duration.remove({ baton_job });
      this.fireLag.remove({ baton_job });
    }
    for (const baton_job of now) {
      for (const status of FINAL_STATUSES) this.runs.inc({ baton_job, status }, 0);
      for (const reason of SKIP_REASONS) this.skips.inc({ baton_job, reason }, 0);
      for (const reason of NOT_ATTEMPTED_REASONS) this.notAttempted.inc({ baton_job, reason }, 0);
      this.missed.inc({ baton_job }, 0);
    }
    this.loaded = now;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

/**
 * The process's own figures under their standard names. prom-client's collectDefaultMetrics is not
 * used: some of its series (`nodejs_active_handles_total`, a gauge) fail `promtool check metrics`.
 */
function processMetrics(registers: Registry[]): void {
  const started = Date.now() / 1000 - process.uptime();
  new Gauge({
    name: 'process_start_time_seconds',
    help: 'Start time of the process since the Unix epoch, in seconds.',
    registers,
  }).set(started);
  new Gauge({
    name: 'process_resident_memory_bytes',
    help: 'Resident memory size in bytes.',
    registers,
    collect() {
      this.set(process.memoryUsage.rss());
    },
  });
  let reported = 0;
  new Counter({
    name: 'process_cpu_seconds_total',
    help: 'User and system CPU time spent, in seconds.',
    registers,
    collect() {
      const { user, system } = process.cpuUsage();
      const seconds = (user + system) / 1e6;
      this.inc(Math.max(0, seconds - reported));
      reported = seconds;
    },
  });
}
