/**
 * What a runner is given (daemon/runner.ts): its schedule, its database, its name, and the
 * intervals that pace it, with their defaults — each defined by the module it paces. `baton
 * start`'s flags and library mode's options are these.
 */
import type { Config } from '../config/schema.js';
import type { DatabaseTarget } from '../config/database-url.js';
import {
  DEFAULT_HEARTBEAT_DEADLINE_MS,
  DEFAULT_HEARTBEAT_MS,
} from '../coordination/lock-session.js';
import type { Logger } from '../log.js';
import type { RunnerEvents } from './events.js';
import { DEFAULT_CLOCK_WARN_MS } from './fleet-clock.js';
import { DEFAULT_REGISTRY_MS } from './registrar.js';

export interface RunnerOptions {
  config: Config;
  target: DatabaseTarget;
  host: string;
  log: Logger;
  /** How long a graceful stop waits for running jobs before stopping them. */
  graceMs: number;
  /** Time between lock-session heartbeats. */
  heartbeatMs?: number;
  /** A heartbeat unanswered for this long means the lock session is lost. */
  heartbeatDeadlineMs?: number;
  /** Time between two looks for `running` rows whose runner is gone. */
  reaperMs?: number;
  /** Time between two registry heartbeats (`baton_runners.last_seen_at`). */
  registryMs?: number;
  /** A clock offset from the database beyond this is logged as a warning. */
  clockWarnMs?: number;
  /** The event map to report on (library mode subscribes before the runner exists). */
  events?: RunnerEvents;
}

const DEFAULT_REAPER_MS = 10_000;

/** The defaults of the intervals in RunnerOptions, each defined by the module it paces. */
export const RUNNER_DEFAULTS = {
  heartbeatMs: DEFAULT_HEARTBEAT_MS,
  heartbeatDeadlineMs: DEFAULT_HEARTBEAT_DEADLINE_MS,
  reaperMs: DEFAULT_REAPER_MS,
  registryMs: DEFAULT_REGISTRY_MS,
  clockWarnMs: DEFAULT_CLOCK_WARN_MS,
} as const;
