/**
 * What a runner is given (daemon/runner.ts): its schedule, its database, its name, and the
 * timings that pace it (timings.ts: every group with its defaults, each defined by the module it
 * paces). `baton start`'s flags and library mode's options are these.
 */
import type { Config } from '../config/schema.js';
import type { DatabaseTarget } from '../config/database-url.js';
import type { InProcessLauncher } from '../execution/job-process.js';
import type { KeepAlive } from '../keep-alive.js';
import type { TracingSettings } from '../config/tracing.js';
import type { Logger } from '../log.js';
import type { RunnerEvents } from './runner-events.js';
import { DEFAULT_TIMINGS, mergeTimings, resolveTimings, type PartialTimings } from './timings.js';
import type { Timings } from './timings.js';

export interface RunnerOptions {
  config: Config;
  target: DatabaseTarget;
  host: string;
  /** Its tags (`--tag`, BATON_TAGS, library mode `tags`): which jobs' `runOn` it matches. */
  tags?: readonly string[];
  log: Logger;
  /** How long a graceful stop waits for running jobs before stopping them. */
  graceMs: number;
  /**
   * Any of the runner's timings (timings.ts), the defaults for the rest. The flat options below
   * are shorthands for five of them and win over the same key given here.
   */
  timings?: PartialTimings;
  /** Time between lock-session heartbeats: `timings.link.heartbeatMs`. */
  heartbeatMs?: number;
  /** A heartbeat unanswered for this long means the lock session is lost: `link.heartbeatDeadlineMs`. */
  heartbeatDeadlineMs?: number;
  /** Time between two looks for `running` rows whose runner is gone: `reaper.intervalMs`. */
  reaperMs?: number;
  /** Time between two registry heartbeats (`baton_runners.last_seen_at`): `registrar.refreshMs`. */
  registryMs?: number;
  /** A clock offset from the database beyond this is logged as a warning: `clock.warnMs`. */
  clockWarnMs?: number;
  /** The event map to report on (library mode subscribes before the runner exists). */
  events?: RunnerEvents;
  /**
   * Library mode: where the application's handlers run (execution/in-process.ts), built and
   * closed by the scheduler that owns them. Without it a handler job cannot run.
   */
  inProcess?: InProcessLauncher;
  /**
   * Library mode: fire the namespace's schedules created at run time (`baton_schedules`,
   * dynamic-schedules.ts) as subjects of the handler jobs. Read at each connect, and again when
   * `Runner.schedulesMoved` is told of a new revision.
   */
  dynamicSchedules?: boolean;
  /**
   * Whether this runner's background work (timers, database sockets) holds the process
   * (keep-alive.ts): HOLDS_PROCESS, a daemon's, when not given; library mode's `keepAlive: false`
   * gives its own. Handed down to every part of the runner that sleeps or connects.
   */
  keepAlive?: KeepAlive;
  /**
   * Trace every fire into OpenTelemetry (docs/tracing.md): `baton start` takes it from the OTEL_*
   * variables, library mode from its `tracing` option. Absent or null: no tracing, and the SDK
   * is never loaded.
   */
  tracing?: TracingSettings | null;
}

/** The defaults of the flat interval options in RunnerOptions (from DEFAULT_TIMINGS). */
export const RUNNER_DEFAULTS = {
  heartbeatMs: DEFAULT_TIMINGS.link.heartbeatMs,
  heartbeatDeadlineMs: DEFAULT_TIMINGS.link.heartbeatDeadlineMs,
  reaperMs: DEFAULT_TIMINGS.reaper.intervalMs,
  registryMs: DEFAULT_TIMINGS.registrar.refreshMs,
  clockWarnMs: DEFAULT_TIMINGS.clock.warnMs,
} as const;

/** The runner's timings: `timings`, with the flat shorthands laid over it, over the defaults. */
export function runnerTimings(
  o: Omit<RunnerOptions, 'config' | 'target' | 'host' | 'tags' | 'log' | 'graceMs'>,
): Timings {
  const defined = <T extends object>(v: T) =>
    Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined)) as Partial<T>;
  return resolveTimings(
    mergeTimings(o.timings ?? {}, {
      link: defined({ heartbeatMs: o.heartbeatMs, heartbeatDeadlineMs: o.heartbeatDeadlineMs }),
      reaper: defined({ intervalMs: o.reaperMs }),
      registrar: defined({ refreshMs: o.registryMs }),
      clock: defined({ warnMs: o.clockWarnMs }),
    }),
  );
}
