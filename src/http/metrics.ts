/**
 * What one runner counts and measures, in Prometheus' text format (prom-client).
 *
 * Every runner exports its own view: `baton_runs_total` counts the runs *this* runner won, so the
 * fleet's runs are the sum over runners, and every fire shows up once as a run somewhere and as a
 * skip on each other runner. Labels are the job name (validated: letters, digits, `._-`), the run
 * status, and a skip kind from a fixed set — never free text, so the series stay few.
 */
import { Counter, Gauge, Histogram, Registry, type CounterConfiguration } from 'prom-client';
import type { RunnerEvents } from '../daemon/events.js';
import type { RunnerGauges } from '../daemon/health.js';
import { NOT_ATTEMPTED_LABEL } from '../fire/events.js';
import type { SkipKind } from '../run-status.js';

export interface RunnerIdentity {
  host: string;
  namespace: string;
  version: string;
}

/**
 * The `reason` label of `baton_skips_total`: the skip kinds folded into the three that matter for
 * alerting (a fleet's normal `taken`, a job behind itself, a pause). The row keeps the fine kind.
 */
export const SKIP_LABEL: Record<SkipKind, 'taken' | 'overlap' | 'paused'> = {
  taken: 'taken',
  'already-ran': 'taken',
  overlap: 'overlap',
  behind: 'overlap',
  paused: 'paused',
};

export class RunnerMetrics {
  readonly registry = new Registry();
  private readonly runs: Counter<'job' | 'status'>;
  private readonly skips: Counter<'job' | 'reason'>;
  private readonly notAttempted: Counter<'job' | 'reason'>;
  private readonly missed: Counter<'job'>;
  private readonly lockSessionLosses: Counter;
  private readonly duration: Histogram<'job'>;
  private readonly fireLag: Histogram<'job'>;
  private readonly lockAcquisition: Histogram<'outcome'>;

  constructor(identity: RunnerIdentity, gauges: () => RunnerGauges) {
    const registers = [this.registry];
    const counter = <L extends string>(c: CounterConfiguration<L>) =>
      new Counter<L>({ ...c, registers });
    this.runs = counter({
      name: 'baton_runs_total',
      help: 'Runs this runner won and finished, by job and final status.',
      labelNames: ['job', 'status'],
    });
    this.skips = counter({
      name: 'baton_skips_total',
      help:
        'Fires this runner skipped, by job and reason: taken (another runner won the fire), ' +
        'overlap (an earlier run was still running), paused.',
      labelNames: ['job', 'reason'],
    });
    this.notAttempted = counter({
      name: 'baton_fires_not_attempted_total',
      help:
        'Fires this runner did not contend for, or could not finish contending for, by reason: ' +
        'no-database (no usable lock session), read-only, late-wake (it woke over a minute ' +
        'late), error (contention failed).',
      labelNames: ['job', 'reason'],
    });
    this.missed = counter({
      name: 'baton_fires_missed_total',
      help:
        'Missed rows this runner recorded after reconnecting: fires that no runner attempted ' +
        '(each is recorded by one runner only, so the fleet total is the sum).',
      labelNames: ['job'],
    });
    this.lockSessionLosses = counter({
      name: 'baton_lock_session_losses_total',
      help: "Times this runner's lock session was lost (its runs were aborted and recorded lost).",
    });
    this.duration = new Histogram({
      name: 'baton_run_duration_seconds',
      help: 'How long runs this runner won took, all attempts included.',
      labelNames: ['job'],
      buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600],
      registers,
    });
    this.fireLag = new Histogram({
      name: 'baton_fire_lag_seconds',
      help:
        "Scheduled fires: the job's start minus its planned start (the scheduled instant plus any " +
        'jitter delay), both in database time ' +
        '(claim plus process start).',
      labelNames: ['job'],
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
      'baton_clock_offset_seconds',
      "This host's clock minus the database's (fires run on database time either way).",
      (g) => (g.clockOffsetMs == null ? null : g.clockOffsetMs / 1000),
    );
    gauge('baton_runs_running', 'Runs of this runner in progress.', (g) => g.runningRuns);
    gauge('baton_jobs_loaded', 'Enabled jobs in the loaded schedule.', (g) => g.jobsLoaded);
    gauge(
      'baton_scheduler_last_wake_age_seconds',
      "Time since the scheduler loop last woke (it wakes at least every 30 s; more means it's stuck).",
      (g) => g.sinceLastWakeMs / 1000,
    );
    new Gauge({
      name: 'baton_runner_info',
      help: 'This runner: always 1, with its host id, namespace and baton version as labels.',
      labelNames: ['host', 'namespace', 'version'],
      registers,
    }).set(identity, 1);
    processMetrics(registers);
  }

  /** Counts what the runner reports; call once, before the runner starts. */
  observe(events: RunnerEvents): void {
    events.on('fire:won', ({ contendMs, lagMs, fire }) => {
      if (contendMs != null) this.lockAcquisition.observe({ outcome: 'won' }, contendMs / 1000);
      if (lagMs != null) this.fireLag.observe({ job: fire.job }, Math.max(0, lagMs) / 1000);
    });
    events.on('fire:skipped', ({ fire, kind, contendMs }) => {
      this.skips.inc({ job: fire.job, reason: SKIP_LABEL[kind] });
      if (contendMs != null) this.lockAcquisition.observe({ outcome: 'skipped' }, contendMs / 1000);
    });
    events.on('run:finished', ({ fire, status, durationMs }) => {
      this.runs.inc({ job: fire.job, status });
      this.duration.observe({ job: fire.job }, durationMs / 1000);
    });
    events.on('fire:notAttempted', ({ fire, cause }) =>
      this.notAttempted.inc({ job: fire.job, reason: NOT_ATTEMPTED_LABEL[cause] }),
    );
    events.on('loop:missedFires', ({ job }) => this.notAttempted.inc({ job, reason: 'late-wake' }));
    events.on('fires:missed', ({ job, count }) => this.missed.inc({ job }, count));
    events.on('lock:lost', () => this.lockSessionLosses.inc());
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
