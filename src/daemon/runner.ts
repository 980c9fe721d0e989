/**
 * The runner: one `baton start` process — the composition root. It builds the roles, wires them
 * together, and owns the lifecycle: start, reload, stop. Each role is a module of its own:
 *
 *   runner-options.ts what a runner is given
 *   timings.ts     every interval, deadline and back-off, by component: resolved here once and
 *                  handed to each component it paces
 *   link.ts        the pool and the lock session: connect, reconnect, loss, read-only
 *   loop.ts        the one timer: wakes at each instant by the fleet's clock
 *   dispatcher.ts  due fires → the fire pipeline (fire/run-fire.ts), one job's fires in turn
 *   fleet-clock.ts the database's time, and the warning when this host's clock is off
 *   registrar.ts   the runner's row in baton_runners
 *   recovery.ts    after a connect: catch-up, and `missed` rows for fires nobody attempted
 *   catch-up.ts    `catchUp: {fires: all}`: every missed fire in order, one after another
 *   retention-schedule.ts  pruning by `retention:`, one runner of the fleet at a time
 *   runner-events.ts  what happens, for the log (log-events.ts) and the metrics (http/metrics.ts)
 *
 * What a runner does about each fault is in the header of the module that meets it;
 * docs/design.md has the operator's version. The runs themselves (`LocalRuns`) are shared by
 * the link (a lost session aborts them), the pipeline (it adds and removes them) and the stop.
 */
import { setMaxListeners } from 'node:events';
import type { Config } from '../config/schema.js';
import { eventTargets } from '../config/notify-targets.js';
import { jobsOutlivingLocks } from '../coordination/lock-probe.js';
import { reapOrphanRuns } from '../coordination/reaper.js';
import { delay } from '../delay.js';
import { BatonError, errorMessage } from '../errors.js';
import { HOLDS_PROCESS, type KeepAlive } from '../keep-alive.js';
import { ExitCode } from '../exit-codes.js';
import { watchKillRequests } from '../fire/kill-watch.js';
import { LocalRuns } from '../fire/local-runs.js';
import type { OperatorFires } from '../fire/operator-fire.js';
import { VerdictBacklog } from '../fire/verdict-backlog.js';
import type { Logger } from '../log.js';
import type { Launchers } from '../execution/job-process.js';
import { Spawner } from '../execution/spawner-client.js';
import { WarmHosts } from '../execution/warm-hosts.js';
import { withheldVariables } from '../config/connections.js';
import type { Schedule } from '../schedule/cron.js';
import type { Queryable } from '../store/deadline.js';
import { CatchUpWalks } from './catch-up.js';
import { Dispatcher } from './dispatcher.js';
import { DependentWatch } from './dependent-watch.js';
import { OutputWriter } from '../fire/output-writer.js';
import { runnerEvents, type RunnerEvents } from './runner-events.js';
import { FleetClock } from './fleet-clock.js';
import { DatabaseLink, type Failover } from './link.js';
import {
  emptySchedule,
  deadManSchedule,
  loadSchedule,
  UNREAD,
  registryView,
  type LoadedSchedule,
} from './loaded-schedule.js';
import { healthOf, type RunnerGauges, type RunnerHealth } from './health.js';
import { logEvents } from './log-events.js';
import { SchedulerLoop } from './loop.js';
import { jobsWorthWarming } from './warm-policy.js';
import { RUNNER_DEFAULTS, runnerTimings, type RunnerOptions } from './runner-options.js';
import type { Timings } from './timings.js';
import { DynamicSchedules } from './dynamic-schedules.js';
import { jobOfSubject } from '../schedule-keys.js';

export { RUNNER_DEFAULTS, type RunnerOptions };
import { recover } from './recovery.js';
import { failoverWindow } from './in-doubt.js';
import { Registrar } from './registrar.js';
import { Releasers } from './releasers.js';
import { repeat } from './repeat.js';
import { RetentionSchedule } from './retention-schedule.js';
import { Notifier } from './notifier.js';
import { PlacementWatch } from './placement-watch.js';
import { CalendarWatch } from './calendar-watch.js';
import { sameTimings, TimingWatch, type TimingVersions } from './timing-watch.js';
import { deliverNotification } from '../notify/deliver.js';
import type { OpenFireTracer } from './otel-tracer.js';
import type { MissedKind } from '../run-status.js';

/** How long a graceful stop waits for the last spans to reach the collector. */
const TRACE_FLUSH_MS = 3_000;

export class Runner {
  /** What happens, as it happens: subscribe for counting (the metrics), never for control. */
  readonly events: RunnerEvents;
  private readonly stopSignal = new AbortController();
  private readonly runs: LocalRuns;
  /** Resolved once; each group goes to the component it paces. */
  readonly timings: Timings;
  /**
   * This runner's spawner and warm module hosts: its jobs' processes come from them; and in
   * library mode the scheduler's handlers (its own, closed by it).
   */
  private readonly launchers: Launchers & Required<Pick<Launchers, 'spawner' | 'warmHosts'>>;
  private readonly verdicts: VerdictBacklog;
  private readonly clock: FleetClock;
  private readonly link: DatabaseLink;
  private readonly registrar: Registrar;
  private readonly dispatcher: Dispatcher;
  private readonly dependents: DependentWatch;
  /** Fires of jobs no live runner may run: their `missed` rows (placement-watch.ts). */
  private readonly placement: PlacementWatch;
  /** Instants jobs' calendars skip: their `calendar` rows (calendar-watch.ts). */
  private readonly calendar: CalendarWatch;
  private readonly timingWatch: TimingWatch;
  /** The fleet's timing versions have been read once (see the dispatcher's `context`). */
  private timingsRead = false;
  private readonly catchUpWalks = new CatchUpWalks();
  private readonly loop: SchedulerLoop;
  private readonly releasers = new Releasers();
  /** Whether this runner's background work holds the process (keep-alive.ts), given to each part. */
  private readonly keepAlive: KeepAlive;
  /** Library mode's schedules created at run time, fired as subjects of its jobs; null: none. */
  private readonly dynamic: DynamicSchedules | null;
  private retention: RetentionSchedule | null = null;
  private notifier: Notifier | null = null;
  private loaded: LoadedSchedule;
  private readonly startedAt = new Date();
  private stopping = false;
  /** Operators' actions going on through this runner (operatorFires().track). */
  private readonly actionWork = new Set<Promise<unknown>>();
  private forceStop: (() => void) | null = null;
  /** The fires' tracer, once `start` has loaded it; null: tracing is off (docs/tracing.md). */
  private tracer: OpenFireTracer | null = null;

  constructor(private readonly options: RunnerOptions) {
    const { log, target, host } = options;
    const signal = this.stopSignal.signal;
    const timings = (this.timings = runnerTimings(options));
    const keepAlive = (this.keepAlive = options.keepAlive ?? HOLDS_PROCESS);
    // One watch of the runs' processes (execution/run-processes.ts) for the spawner, the warm
    // hosts and the runs started here; closed with the spawner.
    const spawner = new Spawner();
    this.launchers = {
      spawner,
      warmHosts: new WarmHosts(spawner.processes),
      ...(options.inProcess ? { inProcess: options.inProcess } : {}),
    };
    this.runs = new LocalRuns(timings.runs.lostKillGraceMs, keepAlive);
    // Every background loop sleeps on this one signal (delay.ts adds a listener per sleep): the
    // registry, reaper, notifier, kill and request watches, retention, and per connection the
    // semi-sync sampler and the fleet watch — more than Node's 10 before it warns of a leak.
    setMaxListeners(64, signal);
    this.events = options.events ?? runnerEvents(log);
    logEvents(this.events, log, () => this.link.fleet.state);
    this.verdicts = new VerdictBacklog(log);
    this.loaded = emptySchedule(options.config);
    this.dynamic = options.dynamicSchedules
      ? new DynamicSchedules(
          {
            namespace: () => this.loaded.config.namespace,
            pool: () => this.link.anyPool,
            log,
            signal,
            change: (apply) => this.changeSchedule(apply),
            changed: (e) => this.events.emit('schedules:changed', e),
          },
          this.loaded,
        )
      : null;
    this.clock = new FleetClock(() => this.link.lock, this.events, timings.clock.warnMs);
    this.link = new DatabaseLink({
      target,
      host,
      namespace: () => this.loaded.config.namespace,
      log,
      events: this.events,
      runs: this.runs,
      signal,
      timings: timings.link,
      fleetTimings: timings.fleetWatch,
      keepAlive,
      onConnected: (first, failover) => this.connected(first, failover),
    });
    this.registrar = new Registrar({
      host,
      tags: options.tags ?? [],
      namespace: () => this.loaded.config.namespace,
      link: this.link,
      clock: this.clock,
      log,
      loadedJobs: (anchor) => registryView(this.loaded, anchor),
    });
    this.dispatcher = new Dispatcher({
      target,
      // With the subjects of the dynamic schedules fired here, when there are any.
      loaded: () => this.dynamic?.loaded ?? this.loaded,
      // Nothing is contended before the fleet's timing versions are read (the first connect's
      // sync): the session is usable while it reads, and a fire due then would be claimed by
      // the file's timing — one the fleet may not have reached, or has left. Such a fire is not
      // attempted (as with no database), and recovery looks back for it by the versions.
      context: () =>
        !this.timingsRead
          ? null
          : this.link.fireContext({
              database: target.database,
              namespace: this.loaded.config.namespace,
              host,
              pid: process.pid,
              now: () => this.clock.now(),
              timings: timings.protocol,
            }),
      runs: this.runs,
      verdicts: this.verdicts,
      lease: this.link.lease,
      output: new OutputWriter(log, timings.runs.outputFlushMs),
      launchers: this.launchers,
      events: this.events,
      signal,
      host,
      // A dynamic schedule's subject is run by the runners that run its job.
      companionsRunning: (job) => this.link.fleet.companionsRunning(jobOfSubject(job)),
      timings: timings.dispatcher,
      runTimings: timings.runs,
      keepAlive,
      tracer: () => this.tracer,
      dependents: {
        leadMs: timings.dependents.leadMs,
        judge: (at, plans) => this.dependents.judgeVerdict(at, plans),
      },
    });
    this.dependents = new DependentWatch({
      namespace: () => this.loaded.config.namespace,
      host,
      loaded: () => this.loaded,
      // Only while this runner can coordinate: the database answers and is the fleet's.
      pool: () => (this.link.usable ? this.link.anyPool : null),
      now: () => this.clock.now(),
      fire: (job, key, fence) => this.dispatcher.dependentFire(job, key, fence),
      plans: (job, key) => this.dispatcher.dependentsOf(job, key),
      log,
      signal,
      timings: timings.dependents,
      keepAlive,
    });
    this.timingWatch = new TimingWatch({
      host,
      loaded: () => this.loaded,
      // A read, and rarely a write of one row: while this runner can coordinate.
      pool: () => (this.link.usable ? this.link.anyPool : null),
      now: () => this.clock.now(),
      apply: (versions) => this.applyTimings(versions),
      log,
      signal,
      timings: timings.timingWatch,
      keepAlive,
    });
    this.placement = new PlacementWatch({
      host,
      namespace: () => this.loaded.config.namespace,
      loaded: () => this.loaded,
      // Only while this runner can coordinate and is with the fleet (not holding its fires).
      pool: () =>
        this.link.usable && this.link.fleet.state === 'with-fleet' ? this.link.anyPool : null,
      fleet: {
        companionsRunning: (job) => this.link.fleet.companionsRunning(job),
        lastLook: () => this.link.fleet.lastLook,
        timings: timings.fleetWatch,
      },
      now: () => this.clock.now(),
      events: this.events,
      log,
      signal,
      timings: timings.placement,
      keepAlive,
    });
    this.calendar = new CalendarWatch({
      host,
      namespace: () => this.loaded.config.namespace,
      loaded: () => this.loaded,
      // Only while this runner can coordinate and is with the fleet (not holding its fires).
      pool: () =>
        this.link.usable && this.link.fleet.state === 'with-fleet' ? this.link.anyPool : null,
      now: () => this.clock.now(),
      events: this.events,
      log,
      signal,
      timings: timings.calendar,
      keepAlive,
    });
    // After a failover the fires this runner contended may have lost their rows with the old
    // primary (replication lag): the dispatcher's memory of them no longer says they are done.
    this.events.on('db:failover', () => this.dispatcher.forgetSent());
    this.loop = new SchedulerLoop(
      this.loaded.schedules,
      () => this.clock.now(),
      (wake) => this.dispatcher.dispatchWake(wake),
      this.loaded.startDelay,
      keepAlive,
      this.dynamic?.fires ?? null,
    );
  }

  private get log(): Logger {
    return this.options.log;
  }

  /**
   * Loads OpenTelemetry's SDK when tracing is configured, and only then (its packages would be a
   * good part of what a runner loads); its last spans are sent at the stop, after everything
   * else, for at most TRACE_FLUSH_MS.
   */
  private async openTracer(): Promise<void> {
    const settings = this.options.tracing;
    if (!settings) return;
    const { openFireTracer } = await import('./otel-tracer.js');
    const tracer = openFireTracer(settings, { host: this.options.host, log: this.log });
    this.tracer = tracer;
    this.releasers.add('send the last spans', () => tracer.shutdown(TRACE_FLUSH_MS));
    // The fires nobody attempted that this runner recorded: their attempt is the record.
    const missed = (job: string, instants: Date[], kind: MissedKind) => {
      const namespace = this.loaded.config.namespace;
      const at = new Date();
      for (const scheduledAt of instants) {
        tracer.missed(
          { namespace, job, scheduledAt, generation: 0 },
          { host: this.options.host, kind, at },
        );
      }
    };
    this.events.on('fires:missed', (e) => missed(e.job, e.instants, e.kind));
    this.events.on('fires:inDoubt', (e) => missed(e.job, e.instants, 'in-doubt'));
    // Not where to: an endpoint's URL may carry a token.
    this.log.info(
      { serviceName: settings.serviceName },
      'tracing: spans are exported over OTLP/HTTP',
    );
  }

  /**
   * Starts the loop, then connects: waits (with backoff) while the database is unreachable, and
   * throws only what retrying cannot fix (bad credentials, an unsupported server, a schema this
   * code does not know). Resolves false when the runner was stopped before it connected.
   */
  async start(): Promise<boolean> {
    const { config } = this.loaded;
    await this.openTracer();
    // Undone in reverse order by stop(): a connect in flight settles first, the pool goes last.
    this.releasers.add('close the pool', () => this.link.closePool());
    this.releasers.add('close the lock session', () => this.link.closeSession());
    this.releasers.add('mark the runner stopped', () =>
      this.registrar.markStopped(this.link.anyPool),
    );
    this.releasers.add('write late verdicts', () => this.verdicts.write(this.link.anyPool));
    this.releasers.add('stop retention', () => this.retention?.stop());
    this.releasers.add('stop notifications', () => this.notifier?.stop());
    this.releasers.add('stop judging children', () => this.dependents.stop());
    this.releasers.add('settle the connect', () => this.link.settle());
    // Kill requests on this runner's runs (`baton kill` from any host, fire/kill-watch.ts): also
    // through a graceful stop (a run waited for may be killed), until the last run has ended.
    const kills = new AbortController();
    watchKillRequests(
      {
        pool: () => this.readPool,
        runs: this.runs,
        log: this.log,
        everyMs: this.timings.runs.killWatchMs,
        keepAlive: this.keepAlive,
      },
      kills.signal,
    );
    this.releasers.add('stop watching for kills', () => kills.abort());
    this.releasers.add('stop the warm module hosts', () => this.launchers.warmHosts.stop());
    this.releasers.add('let the spawner go', () => this.launchers.spawner.close());

    this.applyConfig(config, this.clock.now());
    this.loop.arm();
    this.retention = new RetentionSchedule({
      // Only while this runner can coordinate: the database answers and is the fleet's.
      pool: () => (this.link.usable ? this.link.anyPool : null),
      database: this.options.target.database,
      namespace: config.namespace,
      retention: config.retention,
      log: this.log,
      timings: this.timings.retention,
    });
    this.retention.start();
    this.notifier = new Notifier({
      pool: () => (this.link.usable ? this.link.anyPool : null),
      database: this.options.target.database,
      namespace: config.namespace,
      host: this.options.host,
      config: () => this.loaded.config,
      deliver: deliverNotification,
      log: this.log,
      onDelivery: (target, outcome) => this.events.emit('notify:delivery', { target, outcome }),
      onPass: (pass) => this.events.emit('notify:pass', pass),
      timings: this.timings.notifier,
      keepAlive: this.keepAlive,
    });
    this.notifier.start();
    this.dependents.start();
    this.placement.start();
    this.calendar.start();
    this.timingWatch.start();
    const connected = await this.link.connect(true);
    if (!connected) return false;
    // Two runners of one process (library mode's schedulers, in-process tests) are two runners
    // when their identities differ; one that finds its identity taken by another of this process
    // (registrar.ts) would share its registry row, history and host clash check: refused.
    if (this.registrar.identityHeldHere) {
      throw new BatonError(
        'RUNNER_IN_PROCESS',
        `another runner of this process runs as host ${this.options.host} in namespace ` +
          `${config.namespace}: runners of one process need their own host id or namespace`,
        ExitCode.Usage,
      );
    }
    // The first command run should not wait for the spawner to boot (execution/spawner.ts).
    if (config.jobs.some((j) => j.target.kind === 'command' || j.target.kind === 'shell'))
      this.launchers.spawner.prepare();
    this.log.info(
      {
        namespace: config.namespace,
        database: this.options.target.display,
        lockConnectionId: this.link.lock?.connectionId,
        jobs: [...this.loaded.jobs.keys()],
      },
      'runner started',
    );
    return true;
  }

  /** After each connect (`first`: the runner's first), before the link counts as up. */
  private async connected(first: boolean, failover: Failover | null): Promise<void> {
    const signal = this.stopSignal.signal;
    // Not awaited: a slow write must not hold up the reconnect (and a session lost meanwhile is
    // retried by the link); the reaper's tick writes what is left.
    void this.verdicts.write(this.link.anyPool);
    // The fleet's timing versions before the loop fires by this runner's file (and recovery
    // looks back by them): this file's new timings recorded, the others read.
    await this.syncTimings(first);
    if (first) {
      repeat(this.timings.reaper.intervalMs, () => this.reap(), signal, this.log, this.keepAlive);
      // Until now the loop ran on this host's clock; from now on it runs on the database's.
      this.loop.replace(this.loaded.schedules, this.clock.now(), this.loaded.startDelay);
      for (const job of this.loaded.knownSince.keys()) {
        this.loaded.knownSince.set(job, this.clock.toFleetTime(this.startedAt));
      }
      this.loop.arm();
    }
    if (first) this.warnOfLockTtl();
    await this.registrar.register(first);
    // Another runner of this process has this identity: start() refuses this one (no recovery).
    if (this.registrar.identityHeldHere) return;
    if (first) {
      const every = this.timings.registrar.refreshMs;
      repeat(every, () => this.registrar.refresh(), signal, this.log, this.keepAlive);
    }
    const pool = this.link.anyPool;
    if (!pool) return;
    // Every live dynamic schedule, read anew: the server may be another after a failover.
    await this.dynamic?.refresh({ all: true });
    this.recoverFires(pool, failover);
  }

  /** Looks back for the fires this runner should have attempted (recovery.ts), from now. */
  private recoverFires(pool: Queryable, failover: Failover | null): void {
    const signal = this.stopSignal.signal;
    const { config, knownSince } = this.loaded;
    // The subjects fired here are looked back for as the file's jobs are (a snapshot: a change
    // meanwhile is the loop's), each from its definition's last change.
    const { jobs, schedules } = this.dynamic?.loaded ?? this.loaded;
    void recover(
      {
        pool,
        namespace: config.namespace,
        host: this.options.host,
        jobs: new Map(jobs),
        schedules: new Map(schedules),
        startDelay: this.loaded.startDelay,
        knownSince: (job) =>
          knownSince.get(job) ??
          this.dynamic?.knownSince(job) ??
          this.clock.toFleetTime(this.startedAt),
        coordinated: () => this.link.usable,
        now: () => this.clock.now(),
        dispatch: (fire, trigger) => this.dispatcher.dispatch(fire, trigger),
        walks: this.catchUpWalks,
        signal,
        events: this.events,
        log: this.log,
        failover: failoverWindow(failover, (at) => this.clock.toFleetTime(at)),
        timings: this.timings.recovery,
        keepAlive: this.keepAlive,
      },
      this.clock.now(),
    );
  }

  /**
   * On a server that releases a named lock under its holder after a while (TiDB's max-txn-ttl,
   * coordination/lock-probe.ts), a run longer than that is no longer excluded: the next fire's
   * winner may start beside it. Named once at start, with what to do.
   */
  private warnOfLockTtl(): void {
    const ttlMs = this.link.locks?.lockTtlMs;
    if (ttlMs == null) return;
    const jobs = jobsOutlivingLocks(this.loaded.jobs.values(), ttlMs);
    if (jobs.length === 0) return;
    this.log.warn(
      { jobs, lockTtlMs: ttlMs },
      'database server releases locks held longer than lockTtlMs: a run of these jobs (no ' +
        'timeout, or attempts at least as long) may overlap the next; give them a shorter timeout',
    );
  }

  /** The reaper's tick: verdicts a pool hiccup left unwritten, then runs whose runner is gone. */
  private async reap(): Promise<void> {
    const pool = this.readPool;
    if (this.stopping || !pool) return;
    await this.verdicts.write(pool);
    try {
      await reapOrphanRuns(
        pool,
        {
          namespace: this.loaded.config.namespace,
          serverStartedBefore: this.link.serverStartedBefore,
          noticedBy: this.options.host,
          targetsOf: (job) => {
            // A dynamic schedule's run is its job's: its job's targets.
            const name = jobOfSubject(job);
            const notify = this.loaded.config.jobs.find((j) => j.name === name)?.notify;
            return notify ? eventTargets(notify) : undefined;
          },
        },
        this.log,
      );
    } catch (err) {
      this.log.warn({ err: errorMessage(err) }, 'reaper could not check running rows');
    }
  }

  /**
   * Replaces the schedule with `config` (SIGHUP). Fires due by now are dispatched under the old
   * schedule first, so none falls between the two. Running runs finish under the definition they
   * started with; removed jobs stop firing; new jobs fire from their next instant.
   */
  reload(config: Config): { added: string[]; removed: string[]; changed: string[] } {
    const namespace = this.loaded.config.namespace;
    if (config.namespace !== namespace) {
      throw new BatonError(
        'RELOAD_NAMESPACE',
        `the namespace changed (${namespace} → ${config.namespace}); a namespace ` +
          'change needs a restart',
        ExitCode.Config,
      );
    }
    const now = this.clock.now();
    this.loop.disarm();
    this.loop.wakeNow(now);
    const before = this.loaded.jobs;
    this.retention?.update(config.retention);
    this.applyConfig(config, now);
    this.loop.arm();
    const after = this.loaded.jobs;
    const added = [...after.keys()].filter((j) => !before.has(j));
    const removed = [...before.keys()].filter((j) => !after.has(j));
    // The registry shows the new schedule at once (drift warnings follow the reload).
    if (this.link.usable) void this.registrar.register(false);
    // A changed timing becomes the fleet's next version (fired by the versions so far meanwhile).
    if (this.link.usable) void this.syncTimings(false);
    const changed = [...after.keys()].filter(
      (j) => before.has(j) && JSON.stringify(before.get(j)) !== JSON.stringify(after.get(j)),
    );
    return { added, removed, changed };
  }

  /**
   * Records this file's new timings and reads the fleet's versions (timing-watch.ts). At the
   * first connect the loop is replaced by the caller; later the versions are applied at once.
   */
  private async syncTimings(first: boolean): Promise<void> {
    const pool = this.link.anyPool;
    if (!pool) return;
    try {
      const versions = await this.timingWatch.sync(pool, { applyWhileRecording: !first });
      this.timingsRead = true;
      if (first) {
        this.loaded = this.withVersions(versions);
        this.dynamic?.rebase(this.loaded, this.clock.now());
      } else {
        this.applyTimings(versions);
      }
      this.timingWatch.tellHolds();
    } catch (err) {
      // Fail closed: at the first connect this runner knows no version, and its file's timing
      // may be one the fleet has not reached (or has left). It fires nothing scheduled until
      // the watch reads them (every lookMs). Later, it keeps the versions it last read.
      this.log.error(
        { err: errorMessage(err), heldUntilRead: first },
        'could not record or read the timing versions',
      );
      if (first) this.loaded = this.withVersions(UNREAD);
    }
  }

  /**
   * The fleet's timing versions changed: the jobs fire by them from now on. Fires due by now are
   * dispatched under the schedule they were due by first, as at a reload.
   */
  private applyTimings(versions: TimingVersions): void {
    // The same versions (a reconnect, a look after a failed record): nothing to replace — and a
    // reconnect's recovery, not a wake in the middle of it, deals with the fires due meanwhile.
    if (this.stopping) return;
    const known = this.timingsRead;
    this.timingsRead = true;
    if (known && sameTimings(versions, this.loaded.timings)) return;
    const now = this.clock.now();
    this.loop.disarm();
    this.loop.wakeNow(now);
    const wasUnread = this.loaded.timings === UNREAD;
    this.loaded = loadSchedule(this.loaded.config, this.loaded, now, this.place, versions);
    this.loop.replace(this.loaded.schedules, now, this.loaded.startDelay);
    this.dynamic?.rebase(this.loaded, now);
    this.loop.arm();
    if (this.link.usable) void this.registrar.register(false);
    // Held since the first connect (the versions unread): the fires of that time are looked
    // back for now, as a connect's recovery does, by the versions now known.
    const pool = this.link.anyPool;
    if (wasUnread && pool) this.recoverFires(pool, null);
  }

  /** The loaded file over other timing versions (the loop is the caller's to replace). */
  private withVersions(versions: LoadedSchedule['timings']): LoadedSchedule {
    return loadSchedule(this.loaded.config, this.loaded, this.clock.now(), this.place, versions);
  }

  private get place(): { host: string; tags: readonly string[] } {
    return { host: this.options.host, tags: this.options.tags ?? [] };
  }

  private applyConfig(config: Config, now: Date): void {
    this.loaded = loadSchedule(config, this.loaded, now, this.place);
    // Frequent module jobs start in a host spawned ahead of need; a reload replaces them.
    const warmed = jobsWorthWarming(this.loaded.jobs.values(), this.loaded.schedules, now);
    this.launchers.warmHosts.warmFor(warmed, withheldVariables(config), this.log);
    this.loop.replace(this.loaded.schedules, now, this.loaded.startDelay);
    this.dynamic?.rebase(this.loaded, now);
    this.events.emit('schedule:loaded', { jobs: [...this.loaded.jobs.keys()] });
  }

  /**
   * Applies a change of the dynamic schedules as a reload applies the file's: the fires due by
   * now go out under the schedule they were due by, the changed subjects fire from their next
   * instant.
   */
  private changeSchedule(apply: (now: Date) => void): void {
    const now = this.clock.now();
    // Stopping: the loop takes no more fires.
    if (this.stopping) return apply(now);
    this.loop.disarm();
    this.loop.wakeNow(now);
    apply(now);
    this.loop.arm();
  }

  /**
   * Library mode: the namespace's dynamic schedules are at `revision` (read with the run
   * requests, store/replica-inbox.ts); this runner reads what changed if it has not yet.
   */
  schedulesMoved(revision: number): void {
    this.dynamic?.moved(revision);
  }

  /** Library mode: reads the dynamic schedules changed since the last read (after a change here). */
  refreshSchedules(): Promise<void> {
    return this.dynamic?.refresh() ?? Promise.resolve();
  }

  /** How many dynamic schedules this runner fires (its jobs' subjects placed here). */
  get dynamicSchedulesLoaded(): number {
    return this.dynamic?.size ?? 0;
  }

  /**
   * Stops taking fires, waits up to the grace for running jobs, then stops them (recorded
   * `interrupted`), and undoes what start did (`releasers`). `force` skips the wait.
   */
  async stop(reason: string, force = false): Promise<void> {
    const first = !this.stopping;
    this.stopping = true;
    this.stopSignal.abort();
    this.loop.stop();
    // Let contention in progress settle first: a fire that wins right now must be among the runs
    // before we decide what to wait for and what to stop. No new fire starts once stopping.
    await this.dispatcher.contentionsSettled();
    if (first && !force && this.runs.size > 0) {
      this.log.info(
        { running: [...this.runs].map((r) => r.job), graceMs: this.options.graceMs },
        'stopping: waiting for running jobs',
      );
      const graceOver = new AbortController();
      await Promise.race([
        this.dispatcher.finished(),
        delay(this.options.graceMs, graceOver.signal, this.keepAlive),
        // A second signal (stop with force) ends the wait early.
        new Promise<void>((resolve) => (this.forceStop = resolve)),
      ]);
      // A pending timer would keep the process alive after the runner has stopped.
      graceOver.abort();
    }
    if (force) this.forceStop?.();
    for (const run of this.runs) {
      this.log.warn({ job: run.job }, 'stopping a running job');
      const why = `interrupted: the runner stopped (${reason})`;
      run.control.stop(why, force ? 0 : this.timings.runs.killGraceMs, 'interrupted');
    }
    await this.dispatcher.finished();
    if (!first) return;
    // What operators' actions still write (a backfill's last audit row) before the pools close;
    // no fire of theirs starts any more.
    await Promise.allSettled([...this.actionWork]);
    await this.releasers.releaseAll().catch((err: unknown) => {
      this.log.warn({ err: errorMessage(err) }, 'stopping: a clean-up step failed');
    });
    this.log.info('runner stopped');
  }

  // What the HTTP endpoint reads (src/http): read-only views; operatorFires and writePool for
  // its write API alone.

  health(): Promise<RunnerHealth> {
    return healthOf({
      stopping: this.stopping,
      loop: this.loop,
      link: this.link,
      timings: this.timings.health,
    });
  }

  gauges(): RunnerGauges {
    return {
      databaseUp: this.link.usable,
      readOnly: this.link.readOnly,
      detached: this.link.fleet.state === 'detached',
      clockOffsetMs: this.clock.hostAheadMs,
      runningRuns: this.runs.size,
      jobsLoaded: this.loaded.jobs.size,
      sinceLastWakeMs: this.loop.sinceLastWakeMs,
    };
  }

  /** The enabled jobs as loaded, with their dead-man inputs (`expect:`, the parsed schedule). */
  loadedJobs(): { name: string; expectMs: number | null; schedule: Schedule | null }[] {
    return [...this.loaded.jobs.values()].map((job) => ({
      name: job.name,
      expectMs: job.expectMs,
      // A child's default window counts its parents' fires (it has none of its own).
      schedule: deadManSchedule(this.loaded, job.name),
    }));
  }

  /** The schedule as loaded (a reload replaces it). */
  get loadedConfig(): Config {
    return this.loaded.config;
  }

  /** Where this runner's pools' slots are (coordination/pool-slots.ts): for the views. */
  get poolPlace(): { database: string; namespace: string; host: string } {
    const { target, host } = this.options;
    return { database: target.database, namespace: this.loaded.config.namespace, host };
  }

  /** The pool, while connected: for reads only. */
  get readPool(): Queryable | null {
    return this.link.usable ? this.link.anyPool : null;
  }

  /** Now by the database's clock. */
  databaseNow(): Date {
    return this.clock.now();
  }

  /**
   * This runner as the process of operators' fires (src/actions: the write API's run and
   * backfill, library mode's run), while it can take writes; null otherwise. Its jobs are those
   * of the loaded file, disabled ones included (as `baton run` takes them).
   */
  operatorFires(): OperatorFires | null {
    const pool = this.writePool;
    if (!pool) return null;
    return {
      namespace: this.loaded.config.namespace,
      host: this.options.host,
      pool,
      job: (name) => this.loaded.config.jobs.find((j) => j.name === name) ?? null,
      jobs: () => this.loaded.config.jobs,
      whyNotHere: (job) => this.whyNotHere(job.name),
      now: () => Promise.resolve(this.clock.now()),
      stopping: () => this.stopping,
      fire: (f) => this.dispatcher.operatorFire(f),
      track: (work) => {
        this.actionWork.add(work);
        void work.then(
          () => this.actionWork.delete(work),
          () => this.actionWork.delete(work),
        );
        return work;
      },
    };
  }

  /**
   * The jobs of the loaded file this runner may run (`runOn`, config/placement.ts), disabled ones
   * included: the run requests it takes when they are addressed to no one in particular.
   */
  jobsRunnableHere(): string[] {
    return this.loaded.config.jobs
      .filter((j) => !this.loaded.elsewhere.has(j.name))
      .map((j) => j.name);
  }

  /** Why this runner may not run `job` ("needs tag sftp"); null when it may, or has no such job. */
  whyNotHere(job: string): string | null {
    return this.loaded.elsewhere.get(job) ?? null;
  }

  /** The pool, while this runner can coordinate: for the write API's pauses and audit rows. */
  get writePool(): Queryable | null {
    return this.link.usable && !this.link.readOnly ? this.link.anyPool : null;
  }

  /** The job's next fire by this runner's schedule; null for a job it does not run. */
  nextFire(job: string): Date | null {
    return this.loop.nextFire(job);
  }
}
