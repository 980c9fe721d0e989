/**
 * Every interval, deadline, lead, grace and back-off that paces a runner, in one typed object
 * grouped by the component it paces. Each group's type and defaults are defined by that
 * component's module (next to the reasons for its values); this module only puts them together.
 * The runner (runner.ts) is given a partial object, resolved here once, and hands each group to
 * the component it paces through its constructor or options — no timing of these groups is read
 * from a module constant at run time, so a test can build runners with short cadences. (The
 * spawner's and the warm hosts' delays, the loop's timer slack and the lease's margin are still
 * constants: they live in other processes or are facts, not cadences.)
 *
 * `baton start`'s flags (--heartbeat, --reaper-interval, …) set their keys; the hidden
 * `--timings <json>` (for tests, test/README.md) and library mode's `timings` option set any.
 */
import { PROTOCOL_TIMINGS, type ProtocolTimings } from '../coordination/fire-protocol.js';
import { REAPER_TIMINGS, type ReaperTimings } from '../coordination/reaper.js';
import { UsageError } from '../errors.js';
import { METRICS_TIMINGS, type MetricsTimings } from './metrics-timings.js';
import { RUN_TIMINGS, type RunTimings } from '../fire/run-timings.js';
import { DISPATCHER_TIMINGS, type DispatcherTimings } from './dispatcher.js';
import { DEPENDENT_TIMINGS, type DependentTimings } from './dependent-watch.js';
import { CLOCK_TIMINGS, type ClockTimings } from './fleet-clock.js';
import { FLEET_WATCH_TIMINGS, type FleetWatchTimings } from './fleet-watch.js';
import { HEALTH_TIMINGS, type HealthTimings } from './health.js';
import { LINK_TIMINGS, type LinkTimings } from './link.js';
import { NOTIFIER_TIMINGS, type NotifierTimings } from './notifier.js';
import { PLACEMENT_TIMINGS, type PlacementTimings } from './placement-watch.js';
import { CALENDAR_TIMINGS, type CalendarTimings } from './calendar-watch.js';
import { RECOVERY_TIMINGS, type RecoveryTimings } from './recovery.js';
import { REGISTRAR_TIMINGS, type RegistrarTimings } from './registrar.js';
import { RETENTION_TIMINGS, type RetentionTimings } from './retention-schedule.js';
import { TIMING_WATCH_TIMINGS, type TimingWatchTimings } from './timing-watch.js';

export interface Timings {
  /** The pool and the lock session: heartbeats, reconnect back-off, statement deadline. */
  link: LinkTimings;
  /** The runner's row in the registry. */
  registrar: RegistrarTimings;
  /** The look for runs whose runner is gone. */
  reaper: ReaperTimings;
  /** The companions, and the wait for the fleet after a failover. */
  fleetWatch: FleetWatchTimings;
  /** The clock-offset warning. */
  clock: ClockTimings;
  /** Due fires → the pipeline: the first asker's lead, the late-wake warning. */
  dispatcher: DispatcherTimings;
  /** The children of `after:`: the look at their fires, the verdict writer's lead, the settle. */
  dependents: DependentTimings;
  /** The fire protocol's short windows (coordination/fire-protocol.ts). */
  protocol: ProtocolTimings;
  /** How runs are stopped, and the kill-request watch. */
  runs: RunTimings;
  /** After a connect: the `missed` rows' settle, the catch-up walks. */
  recovery: RecoveryTimings;
  /** The notification outbox: its passes, evaluations, claims and back-off. */
  notifier: NotifierTimings;
  /** The jobs placed elsewhere: the look for fires no live runner may run, its settle. */
  placement: PlacementTimings;
  /** The instants jobs' calendars skip: the look for them, their settle (calendar-watch.ts). */
  calendar: CalendarTimings;
  /** Pruning by `retention:`. */
  retention: RetentionTimings;
  /** The fleet's timing versions: the look for a changed one. */
  timingWatch: TimingWatchTimings;
  /** `/healthz`: when the loop counts as stuck. */
  health: HealthTimings;
  /** `/metrics`: how long a read of the history is shared, and a scrape's wait for one. */
  metrics: MetricsTimings;
}

/** The longest delay a Node timer takes as given (2^31 - 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;

/** Some of the timings: any group, any key of it. */
export type PartialTimings = { [G in keyof Timings]?: Partial<Timings[G]> };

/** Today's values, each from the module it paces. */
export const DEFAULT_TIMINGS: Readonly<Timings> = Object.freeze({
  link: LINK_TIMINGS,
  registrar: REGISTRAR_TIMINGS,
  reaper: REAPER_TIMINGS,
  fleetWatch: FLEET_WATCH_TIMINGS,
  clock: CLOCK_TIMINGS,
  dispatcher: DISPATCHER_TIMINGS,
  dependents: DEPENDENT_TIMINGS,
  protocol: PROTOCOL_TIMINGS,
  runs: RUN_TIMINGS,
  recovery: RECOVERY_TIMINGS,
  notifier: NOTIFIER_TIMINGS,
  placement: PLACEMENT_TIMINGS,
  calendar: CALENDAR_TIMINGS,
  retention: RETENTION_TIMINGS,
  timingWatch: TIMING_WATCH_TIMINGS,
  health: HEALTH_TIMINGS,
  metrics: METRICS_TIMINGS,
});

/**
 * The defaults with `partial` laid over them, group by group. Every problem is collected before
 * refusing (a UsageError, exit 64), each named by its path: an unknown group or key, or a value
 * that is not a positive finite number of milliseconds. Throws on anything else than an object.
 */
export function resolveTimings(partial: unknown = {}): Timings {
  const problems: string[] = [];
  // Without a prototype, and looked up as own properties only: a key such as `__proto__`,
  // `constructor` or `toString` is an unknown key, never a way into Object's own methods.
  const resolved = Object.create(null) as Record<string, Record<string, number>>;
  const given = isRecord(partial) ? partial : null;
  if (!given) problems.push(`timings: must be an object of groups, got ${describe(partial)}`);
  for (const [group, defaults] of Object.entries(DEFAULT_TIMINGS)) {
    resolved[group] = Object.assign(Object.create(null) as Record<string, number>, defaults);
  }
  for (const [group, values] of Object.entries(given ?? {})) {
    const into = Object.hasOwn(resolved, group) ? resolved[group] : undefined;
    if (!into) {
      problems.push(
        `timings.${group}: unknown group (known: ${Object.keys(DEFAULT_TIMINGS).join(', ')})`,
      );
      continue;
    }
    if (values === undefined) continue;
    if (!isRecord(values)) {
      problems.push(`timings.${group}: must be an object of durations, got ${describe(values)}`);
      continue;
    }
    for (const [key, value] of Object.entries(values)) {
      if (!Object.hasOwn(into, key)) {
        problems.push(
          `timings.${group}.${key}: unknown key (known: ${Object.keys(into).join(', ')})`,
        );
      } else if (value === undefined) {
        continue;
      } else if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
        problems.push(
          `timings.${group}.${key}: must be a positive finite number of milliseconds, got ` +
            describe(value),
        );
      } else if (value > MAX_TIMER_MS) {
        // Node runs a longer timer after 1 ms: an interval meant to be long would spin.
        problems.push(
          `timings.${group}.${key}: at most ${MAX_TIMER_MS} ms (a timer's limit), got ${value}`,
        );
      } else {
        into[key] = value;
      }
    }
  }
  if (problems.length > 0) throw new UsageError(`bad timings:\n  ${problems.join('\n  ')}`);
  // Plain objects again for the components (a null-prototype object prints oddly and has no
  // hasOwnProperty): only own, known keys were copied in.
  const out: Record<string, Record<string, number>> = {};
  for (const [group, values] of Object.entries(resolved)) out[group] = { ...values };
  return out as unknown as Timings;
}

/** `b` laid over `a`, group by group (neither is changed). */
export function mergeTimings(a: PartialTimings, b: PartialTimings): PartialTimings {
  const out: Record<string, object> = { ...a };
  for (const [group, values] of Object.entries(b)) {
    out[group] = { ...(out[group] ?? {}), ...values };
  }
  return out as PartialTimings;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (v === null || v === undefined || typeof v === 'number') return String(v);
  return JSON.stringify(v) ?? typeof v;
}
