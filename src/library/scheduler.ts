/**
 * Library mode: baton inside an application that runs as N replicas (docs/library-mode.md).
 *
 *     const scheduler = createScheduler({ databaseUrl, host: process.env.HOSTNAME, namespace: 'shop' });
 *     scheduler.job('settle', { schedule: '0 3 * * *', timeout: '30m' }, async (ctx) => { … });
 *     await scheduler.start();            // on SIGTERM: await scheduler.stop({ grace: '30s' })
 *
 * A scheduler is a daemon's runner (daemon/runner.ts) built from code instead of a file: the
 * same fire protocol, fire key, history, registry, pause, catch-up, notifications and kill
 * requests, so `baton status/history/explain/kill` see a fleet of replicas as they see daemons.
 * What differs is where a job runs — its handler, in this process (execution/in-process.ts) — and
 * `baton run <job>`, which asks a replica to run it (actions/run-request-watch.ts), since the CLI
 * cannot.
 *
 * The lifecycle: `start()` connects (waiting while the database is unreachable, like a daemon)
 * and keeps the process alive while started — its lock session is an open connection, and a
 * worker whose only work is its schedule must not exit. `stop()` drains the running handlers
 * within the grace, aborts the rest through `ctx.signal`, and leaves nothing behind (no timer, no
 * socket, no child process), so a process that stops its scheduler and its server exits on its
 * own.
 *
 * Several schedulers in one process are several replicas: each is its own runner — its handlers,
 * spawner, warm hosts, /proc watch and `keepAlive` (keep-alive.ts) are its own, nothing of it is
 * the process's — so they are allowed when their identities differ, as two replicas' must: another
 * `host`, or another `namespace` (a second set of jobs, e.g. another team's). A second scheduler
 * with the identity of one already started in this process would share its registry row and its
 * history's host: its `start()` is refused (SCHEDULER_RUNNING), found through the registry — the
 * row's lock session is another of this process's (daemon/registrar.ts). Started at the same
 * instant, neither may see the other yet: start them one after the other.
 */
import { serviceName, tracingFromEnvironment, type TracingSettings } from '../config/tracing.js';
import os from 'node:os';
import type { Registry } from 'prom-client';
import { parseDatabaseUrl, type DatabaseTarget } from '../config/database-url.js';
import { parseDuration } from '../config/duration.js';
import { loadConfig } from '../config/load.js';
import { DEFAULT_NAMESPACE } from '../config/defaults.js';
import type { Config, JobDefinition } from '../config/schema.js';
import { startRun } from '../actions/run.js';
import { watchRunRequests } from '../actions/run-request-watch.js';
import type { ManualStart } from '../fire/operator-fire.js';
import { runnerEvents, type RunnerEvents } from '../daemon/runner-events.js';
import { Runner, type RunnerOptions } from '../daemon/runner.js';
import { resolveTimings, type PartialTimings } from '../daemon/timings.js';
import {
  BatonError,
  ConfigError,
  DatabaseUnavailableError,
  errorMessage,
  UsageError,
} from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import { checkHostName } from '../host-name.js';
import { parseRunnerTags } from '../config/placement.js';
import { InProcessJobs, type JobHandler } from '../execution/in-process.js';
import { runnerMetrics } from '../http/runner-metrics.js';
import { KeepAlive } from '../keep-alive.js';
import { createLogger, type Logger } from '../log.js';
import { readReplicaInbox } from '../store/replica-inbox.js';
import { version } from '../version.js';
import { notStarted, Schedules } from './schedules.js';
import {
  CODE_PLACE,
  codeConfig,
  mergeConfigs,
  type CodeSettings,
  type JobOptions,
} from './job-options.js';

/** A duration as in schedules.yaml (`'30s'`, `'2m'`) or milliseconds. */
export type Duration = string | number;

export interface SchedulerOptions extends Partial<Omit<CodeSettings, 'namespace'>> {
  /** `mysql://user:password@host:port/database`; or give `database`. */
  databaseUrl?: string;
  /** mysql2 connection options with the database's name, instead of `databaseUrl`. */
  database?: { host?: string; port?: number; user?: string; password?: string; database: string };
  /** This replica's name in the history and the registry; unique in the fleet. Default: os.hostname(). */
  host?: string;
  /**
   * This replica's tags, which jobs' `runOn: {tags}` match (docs/placement.md), as
   * `baton start --tag`: `['sftp', 'region=eu']`. Default none.
   */
  tags?: readonly string[];
  /** Scopes the locks and the history, as in schedules.yaml. Default `default`. */
  namespace?: string;
  /** A pino logger (the scheduler logs as a daemon does). Default: JSON lines to stdout. */
  log?: Logger;
  /**
   * Whether a started scheduler keeps the process alive by itself. Default true (like node-cron
   * or croner: a worker whose only work is its schedule stays up). `false`: baton's timers and
   * database sockets are unref'd, so the application's own handles (its server) decide — once
   * it has closed them the process exits, stopped scheduler or not (docs/library-mode.md).
   */
  keepAlive?: boolean;
  /**
   * Trace every fire into OpenTelemetry over OTLP/HTTP (docs/tracing.md): `{ endpoint }` (the
   * traces URL, `http://collector:4318/v1/traces`), `{}` for the exporter's own variables
   * (OTEL_EXPORTER_OTLP_*), `false` for none. Default: on when OTEL_EXPORTER_OTLP_ENDPOINT or
   * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, as for `baton start`. The scheduler's tracer is
   * its own: nothing is registered globally, the application's OpenTelemetry set-up is left alone.
   */
  tracing?: { endpoint?: string; serviceName?: string } | false;
  /** How long `stop()` waits for running handlers by default. Default 30s. */
  grace?: Duration;
  /** Lock-session heartbeat and its deadline, as `baton start --heartbeat/--heartbeat-deadline`. */
  heartbeat?: Duration;
  heartbeatDeadline?: Duration;
  /** Registry heartbeat, as `baton start --registry-interval`. */
  registryInterval?: Duration;
  /** Time between looks for runs whose runner is gone, as `baton start --reaper-interval`. */
  reaperInterval?: Duration;
  /**
   * Any of the runner's timings in milliseconds, by component (`Timings` in
   * daemon/timings.ts), the defaults for the rest; the four options above win over the same
   * key here. Meant for tests that need short cadences, e.g. `{notifier: {evaluateMs: 500}}`.
   */
  timings?: PartialTimings;
}

const DEFAULT_GRACE_MS = 30_000;

/**
 * A duration option in ms. Only `grace` may be 0 (stop without waiting); an interval or a
 * deadline of 0 would spin or lose the lock session at every beat, and `baton start` refuses it.
 */
function ms(what: string, value: Duration | undefined): number | undefined {
  if (value == null) return undefined;
  const parsed = typeof value === 'number' ? value : parseDuration(value);
  const least = what === 'grace' ? 0 : Number.MIN_VALUE;
  if (parsed == null || !Number.isFinite(parsed) || parsed < least) {
    const expected = what === 'grace' ? 'a duration' : 'a duration above 0';
    throw new ConfigError([
      {
        file: CODE_PLACE,
        path: what,
        message: `expected ${expected}, got ${JSON.stringify(value)}`,
      },
    ]);
  }
  return parsed;
}

function databaseTarget(o: SchedulerOptions): DatabaseTarget {
  if (o.databaseUrl != null && o.database != null) {
    throw new ConfigError([
      { file: CODE_PLACE, path: 'database', message: 'give `databaseUrl` or `database`, not both' },
    ]);
  }
  if (o.databaseUrl != null) return parseDatabaseUrl(o.databaseUrl, 'databaseUrl');
  if (o.database == null) {
    throw new ConfigError([
      { file: CODE_PLACE, path: 'databaseUrl', message: 'required (or `database`)' },
    ]);
  }
  const { database, ...connection } = o.database;
  const where = `${connection.host ?? '127.0.0.1'}:${connection.port ?? 3306}`;
  return {
    connection,
    database,
    display: `mysql://${connection.user ?? 'root'}@${where}/${database}`,
  };
}

export class Scheduler {
  /** What happens, typed as a daemon's (daemon/runner-events.ts): subscribe before or after. */
  readonly events: RunnerEvents;
  /** The replica's Prometheus metrics, to mount on the application's own /metrics (after start). */
  readonly metrics: Registry;
  readonly host: string;
  /** Its tags (`tags`), checked. */
  readonly tags: readonly string[];
  readonly namespace: string;
  /**
   * Schedules created at run time, one per key (a tenant's): `upsert(job, key, {schedule,
   * timezone, params})`, `remove(job, key)`, `list(job?)` — after `start()` (./schedules.ts).
   */
  readonly schedules: Schedules;
  private readonly log: Logger;
  private readonly target: DatabaseTarget;
  private readonly settings: CodeSettings;
  private readonly jobs = new Map<string, JobOptions>();
  private readonly handlers = new Map<string, JobHandler>();
  private file: Config | null = null;
  private runner: Runner | null = null;
  private runnerOptions: RunnerOptions | null = null;
  /** The handlers' runs and their `ctx.db` pools, from start to stop. */
  private inProcess: InProcessJobs | null = null;
  private readonly watch = new AbortController();
  private state: 'new' | 'started' | 'stopped' = 'new';
  private stopping: Promise<void> | null = null;
  /**
   * Whether this scheduler's background work holds the process (keep-alive.ts): its own, from
   * its `keepAlive` option, handed to its runner and its request watch.
   */
  private readonly keepAlive: KeepAlive;

  constructor(private readonly options: SchedulerOptions) {
    this.host =
      options.host != null
        ? checkHostName(options.host, 'host')
        : checkHostName(os.hostname(), "the machine's host name (give `host`)");
    this.namespace = options.namespace ?? DEFAULT_NAMESPACE;
    try {
      this.tags = parseRunnerTags(options.tags ?? [], 'tags');
    } catch (err) {
      throw new ConfigError([{ file: CODE_PLACE, path: 'tags', message: errorMessage(err) }]);
    }
    this.target = databaseTarget(options);
    this.keepAlive = new KeepAlive(options.keepAlive ?? true);
    this.log = (options.log ?? createLogger()).child({ host: this.host });
    this.settings = {
      namespace: this.namespace,
      ...(options.defaults ? { defaults: options.defaults } : {}),
      ...(options.connections ? { connections: options.connections } : {}),
      ...(options.notify ? { notify: options.notify } : {}),
      ...(options.retention != null ? { retention: options.retention } : {}),
      ...(options.pools ? { pools: options.pools } : {}),
    };
    // The durations are checked now, with the rest of the input.
    for (const key of [
      'grace',
      'heartbeat',
      'heartbeatDeadline',
      'registryInterval',
      'reaperInterval',
    ] as const) {
      ms(key, options[key]);
    }
    try {
      resolveTimings(options.timings);
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
      throw new ConfigError([{ file: CODE_PLACE, path: 'timings', message: err.message }]);
    }
    this.events = runnerEvents(this.log);
    const metrics = runnerMetrics(
      { host: this.host, namespace: this.namespace, version },
      () => {
        if (!this.runner) throw new Error('the scheduler has not started');
        return this.runner;
      },
      this.log,
    );
    metrics.observe(this.events);
    this.metrics = metrics.registry;
    this.schedules = new Schedules({
      namespace: this.namespace,
      definition: (job) => this.definitionOf(job),
      handlerJobs: () => [...this.handlers.keys()],
      pool: (call) => {
        if (this.state !== 'started' || !this.runner) throw notStarted(call);
        const pool = this.runner.writePool;
        if (!pool) {
          throw new DatabaseUnavailableError(
            `scheduler.${call}(): the database is not usable now (not connected, or read-only): ` +
              'nothing was written; try again',
          );
        }
        return pool;
      },
      changed: () => void this.runner?.refreshSchedules(),
    });
  }

  /** A job as defined here: the loaded one once started, else checked from its options now. */
  private definitionOf(job: string): JobDefinition | null {
    if (this.runner) return this.runner.loadedConfig.jobs.find((j) => j.name === job) ?? null;
    const options = this.jobs.get(job);
    if (options) return codeConfig(this.settings, new Map([[job, options]])).jobs[0] ?? null;
    return this.file?.jobs.find((j) => j.name === job) ?? null;
  }

  /**
   * Defines a job run by `handler` in this process. `options` are the job's keys of
   * schedules.yaml, checked now by the same schema (a ConfigError naming the job, exit 78).
   */
  job(name: string, options: JobOptions, handler: JobHandler): this {
    if (this.state !== 'new')
      throw new BatonError(
        'SCHEDULER_STARTED',
        `cannot add ${name}: the scheduler has started`,
        ExitCode.Usage,
      );
    if (typeof handler !== 'function') {
      throw new ConfigError([
        {
          file: CODE_PLACE,
          path: `jobs.${name}`,
          message: 'the handler must be a function (ctx) => …',
        },
      ]);
    }
    if (this.jobs.has(name)) {
      throw new ConfigError([
        { file: CODE_PLACE, path: `jobs.${name}`, message: `${name} is defined twice` },
      ]);
    }
    codeConfig(this.settings, new Map([[name, options]]));
    this.jobs.set(name, options);
    this.handlers.set(name, handler);
    return this;
  }

  /** Adds the jobs of a schedules file (command and module jobs run as child processes). */
  load(schedulesFile: string): this {
    if (this.state !== 'new')
      throw new BatonError(
        'SCHEDULER_STARTED',
        'cannot load a file: the scheduler has started',
        ExitCode.Usage,
      );
    this.file = loadConfig(schedulesFile);
    // The `after:` edges wait for start(): a code job's parent may still be to come.
    mergeConfigs(this.jobs.size > 0 ? codeConfig(this.settings, this.jobs) : null, this.file, {
      dependencies: false,
    });
    return this;
  }

  /**
   * Starts: registers the replica, arms the schedule and connects — waiting while the database
   * is unreachable, throwing what retrying cannot fix. Refused when another scheduler of this
   * process, started, has this one's host and namespace (see the header).
   */
  async start(): Promise<void> {
    if (this.state !== 'new')
      throw new BatonError(
        'SCHEDULER_STARTED',
        'this scheduler was started already',
        ExitCode.Usage,
      );
    const config = mergeConfigs(
      this.jobs.size > 0 ? codeConfig(this.settings, this.jobs) : null,
      this.file,
    );
    this.state = 'started';
    this.inProcess = new InProcessJobs(
      this.handlers,
      (job, runId, why) =>
        this.log.warn({ job, runId, error: why }, 'a handler ignored its abort signal'),
      (job, runId, { refused, committed, error }) =>
        this.log.warn(
          { job, runId, fencedRefused: refused, fencedCommitted: committed, error },
          // fencedRefused: its fenced transactions refused (sdk/fence.ts); fencedCommitted:
          // those that committed after it was given up (before its successor started).
          'a handler that ignored its abort signal has ended',
        ),
    );
    const options: RunnerOptions = {
      inProcess: this.inProcess,
      config,
      target: this.target,
      host: this.host,
      tags: this.tags,
      log: this.log,
      graceMs: ms('grace', this.options.grace) ?? DEFAULT_GRACE_MS,
      events: this.events,
      keepAlive: this.keepAlive,
      // The handler jobs' schedules created at run time (./schedules.ts).
      dynamicSchedules: this.handlers.size > 0,
      ...(this.options.timings ? { timings: this.options.timings } : {}),
      tracing: tracingOf(this.options.tracing),
    };
    const set = (
      key: 'heartbeatMs' | 'heartbeatDeadlineMs' | 'registryMs' | 'reaperMs',
      value: number | undefined,
    ) => {
      if (value != null) options[key] = value;
    };
    set('heartbeatMs', ms('heartbeat', this.options.heartbeat));
    set('heartbeatDeadlineMs', ms('heartbeatDeadline', this.options.heartbeatDeadline));
    set('registryMs', ms('registryInterval', this.options.registryInterval));
    set('reaperMs', ms('reaperInterval', this.options.reaperInterval));
    this.runnerOptions = options;
    const runner = (this.runner = new Runner(options));
    let started: boolean;
    try {
      // The app awaits its start: held even where background work is not (keepAlive: false).
      started = await this.keepAlive.holdWhile(runner.start());
    } catch (err) {
      await this.release('start-up failed', true);
      if (err instanceof BatonError && err.code === 'RUNNER_IN_PROCESS') {
        throw new BatonError(
          'SCHEDULER_RUNNING',
          `a scheduler (host ${this.host}, namespace ${this.namespace}) is already started in ` +
            'this process: give this one its own `host` or `namespace`, or define its jobs on that one',
          ExitCode.Usage,
        );
      }
      throw err;
    }
    // stop() came while start() waited for the database: the application's code after
    // `await start()` must not go on as if its jobs were scheduled.
    if (!started) {
      throw new BatonError(
        'SCHEDULER_STOPPED',
        'scheduler.stop() was called before the scheduler had connected: it did not start',
        ExitCode.Interrupted,
      );
    }
    watchRunRequests(
      {
        fires: () => runner.operatorFires(),
        namespace: config.namespace,
        host: this.host,
        jobs: () => runner.jobsRunnableHere(),
        whyNot: (job) => runner.whyNotHere(job),
        log: this.log,
        keepAlive: this.keepAlive,
        // The same statement reads the schedules' revision: a change made on another replica is
        // read here within a tick, at no cost while nothing changes.
        open: async (pool, jobs) => {
          const inbox = await readReplicaInbox(pool, {
            namespace: config.namespace,
            host: this.host,
            jobs,
          });
          runner.schedulesMoved(inbox.schedulesRevision);
          return inbox.requests;
        },
      },
      this.watch.signal,
    );
  }

  /**
   * Stops taking fires, waits up to `grace` for running handlers (default: the scheduler's
   * `grace`), aborts the rest through `ctx.signal` (recorded `interrupted`), and releases
   * everything. `force`: no wait.
   */
  async stop(o: { grace?: Duration; force?: boolean } = {}): Promise<void> {
    // A second stop (a SIGTERM handler and the app's own shutdown) waits for the first.
    if (this.stopping) return this.stopping;
    if (this.state !== 'started') return;
    const grace = ms('grace', o.grace);
    if (grace != null && this.runnerOptions) this.runnerOptions.graceMs = grace;
    this.stopping = this.keepAlive.holdWhile(this.release('scheduler.stop()', o.force === true));
    return this.stopping;
  }

  private async release(reason: string, force: boolean): Promise<void> {
    this.state = 'stopped';
    this.watch.abort();
    try {
      await this.runner?.stop(reason, force);
    } finally {
      await this.inProcess?.close();
    }
  }

  /**
   * Runs `job` now through its lock on this replica, as `baton run` would (a manual run:
   * actions/run.ts, without an audit row — the application asked, not an operator). A job this
   * replica may not run (`runOn`) is not run: `not-run`, saying why.
   */
  async runNow(job: string): Promise<ManualStart> {
    const fires = this.runner?.operatorFires();
    const definition = fires?.job(job);
    if (!fires || !definition) {
      const why = !this.runner
        ? 'not started'
        : !fires
          ? 'the database is not usable'
          : `no job ${job}`;
      return { status: 'not-run', reason: why };
    }
    // A job placed on other replicas (`runOn`) is theirs: not run here, said as any refusal.
    const elsewhere = fires.whyNotHere(definition);
    if (elsewhere != null) {
      return { status: 'not-run', reason: `${job} may not run on ${this.host} (${elsewhere})` };
    }
    return (await startRun(fires, { job: definition })).start;
  }
}

/** A scheduler for this process (see the header); nothing starts before `start()`. */
export function createScheduler(options: SchedulerOptions): Scheduler {
  return new Scheduler(options);
}

/** The scheduler's tracing: its option, else the environment (see SchedulerOptions.tracing). */
function tracingOf(option: SchedulerOptions['tracing']): TracingSettings | null {
  if (option === false) return null;
  if (option == null) return tracingFromEnvironment(process.env);
  return {
    serviceName: option.serviceName ?? serviceName(process.env),
    ...(option.endpoint ? { endpoint: option.endpoint } : {}),
  };
}
