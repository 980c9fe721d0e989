/**
 * The schedule a runner has loaded: the enabled jobs, their parsed schedules, the fingerprints
 * the registry shows, and since when the runner has run each job's current schedule. Built whole
 * from the file at start and at each reload, and swapped whole: the loop never sees one part
 * without another.
 *
 * A job with `after:` and no `schedule:` (docs/dependencies.md) has no fires of its own: it is in
 * `jobs` (the dispatcher finds it there when its parents let it run, and the registry lists it)
 * but not in `schedules`, so the loop, recovery and the registry's next fires leave it out.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { deadManSource } from '../config/dependencies.js';
import { scheduleFingerprint, timingPrint } from '../config/fingerprint.js';
import { describeRunOn, mayRun, type RunnerPlace } from '../config/placement.js';
import type { Config, JobDefinition } from '../config/schema.js';
import { parseSchedule, type Schedule } from '../schedule/cron.js';
import { NO_DELAY, type StartDelay } from '../schedule/fire-schedule.js';
import { jitterDelayMs } from '../schedule/jitter.js';
import {
  switchedSchedule,
  scheduleByVersions,
  type SwitchedSchedule,
} from '../schedule/timing-switch.js';
import { upcomingInstants } from '../schedule/upcoming.js';
import type { LoadedJob } from '../store/runners.js';
import { ownVersion, type TimingRecord } from '../store/timings.js';
import type { Loaded } from './dispatcher.js';

export interface LoadedSchedule extends Loaded {
  /**
   * The jobs this runner runs: enabled, and placed here (`runOn`, config/placement.ts); those
   * that run only after their parents included.
   */
  jobs: Map<string, JobDefinition>;
  /**
   * The jobs this runner may not run (`runOn`), with why: "needs tag sftp". Disabled ones too:
   * an operator may still ask a runner for one (`baton run --on-host`), and the registry says
   * which runner may take it.
   */
  elsewhere: Map<string, string>;
  /** The jobs' own schedules: none for a job that runs only after its parents. */
  schedules: Map<string, Schedule>;
  /** When each job's fires start after their instants (its jitter). */
  startDelay: StartDelay;
  /** Job → fingerprint of the loaded definition (computed once per load, for the registry). */
  fingerprints: Record<string, string>;
  /**
   * When this runner first loaded each job's current schedule: recovery never looks back
   * before this for the job, unless the history knows it from earlier.
   */
  knownSince: Map<string, Date>;
  /**
   * The fleet's timing versions of the jobs (store/timings.ts), as last read; empty before the
   * first read. A job with versions fires by them (`schedules` holds a SwitchedSchedule): the
   * old timing before a change's effective instant, the new one from it, and nothing where the
   * fleet has moved past this runner's own definition (it holds).
   */
  timings: ReadonlyMap<string, readonly TimingRecord[]> | typeof UNREAD;
  /**
   * The version of each job's timing this runner's file has (the newest recorded with its
   * print); absent: not recorded (yet).
   */
  ownVersions: Map<string, number>;
}

/**
 * The versions could not be read at connect: every scheduled job is held (none fires by its
 * file, which may be a timing the fleet has not reached or has left) until a read succeeds.
 */
export const UNREAD = 'unread' as const;

/** Before the first load: nothing to fire. */
export function emptySchedule(config: Config): LoadedSchedule {
  return {
    config,
    jobs: new Map(),
    elsewhere: new Map(),
    schedules: new Map(),
    startDelay: NO_DELAY,
    fingerprints: {},
    knownSince: new Map(),
    timings: new Map(),
    ownVersions: new Map(),
  };
}

/**
 * `config` loaded at `now` by the runner `place` (every job is placed on a runner that is not
 * given), over the fleet's timing versions `timings` (the last read: `previous.timings` when not
 * given). A job keeps its `knownSince` from `previous` while its schedule and timezone stay the
 * same; a new job, or one whose schedule changed, is known from `now`.
 */
export function loadSchedule(
  config: Config,
  previous: LoadedSchedule,
  now: Date,
  place?: RunnerPlace,
  timings: LoadedSchedule['timings'] = previous.timings,
): LoadedSchedule {
  const enabled = config.jobs.filter((j) => j.enabled);
  const here = (j: JobDefinition) => !place || mayRun(j.runOn, place);
  const jobs = new Map(enabled.filter(here).map((j) => [j.name, j]));
  const elsewhere = new Map(
    config.jobs.filter((j) => !here(j)).map((j) => [j.name, describeRunOn(j.runOn!)]),
  );
  const schedules = new Map<string, Schedule>();
  const knownSince = new Map<string, Date>();
  const ownVersions = new Map<string, number>();
  for (const job of jobs.values()) {
    if (job.schedule != null) {
      const own = parseSchedule(job.schedule, job.timezone);
      if (timings === UNREAD) {
        schedules.set(job.name, switchedSchedule(own, [HELD_THROUGHOUT]));
      } else {
        const versions = timings.get(job.name) ?? [];
        const version = ownVersion(versions, timingPrint(job)!);
        if (version != null) ownVersions.set(job.name, version);
        // Not recorded yet (this runner is about to record it, as the fleet's next version):
        // the fleet's versions so far are the ones in force until then: it fires by all of them.
        schedules.set(
          job.name,
          scheduleByVersions(own, versions, version ?? Number.POSITIVE_INFINITY),
        );
      }
    }
    const before = previous.jobs.get(job.name);
    const same = before?.schedule === job.schedule && before.timezone === job.timezone;
    knownSince.set(job.name, (same && previous.knownSince.get(job.name)) || now);
  }
  const jitterOf = (job: string) => jobs.get(job)?.jitterMs ?? 0;
  const startDelay: StartDelay = {
    delayMs: (job, at) => jitterDelayMs(config.namespace, job, at, jitterOf(job)),
    maxMs: jitterOf,
  };
  return {
    config,
    jobs,
    elsewhere,
    schedules,
    startDelay,
    fingerprints: scheduleFingerprint(config),
    knownSince,
    timings,
    ownVersions,
  };
}

/** A job's fires while the versions are unread: none. */
const HELD_THROUGHOUT = { version: 0, from: new Date(0), schedule: null } as const;

/**
 * Where this runner holds a job's fires: the instant from which the fleet fires it by a timing
 * newer than this runner's file has. Null where it holds nothing.
 */
export function heldFrom(loaded: LoadedSchedule, job: string): Date | null {
  const schedule = loaded.schedules.get(job) as Partial<SwitchedSchedule> | undefined;
  return schedule?.segments?.find((s) => s.schedule == null)?.from ?? null;
}

/**
 * The schedule a job's dead-man's default window counts: its own, or for a job that runs only
 * after its parents, its first parent's up the chain (config/dependencies.ts `deadManSource`:
 * none for a child that runs on its parents' failures). For `Runner.loadedJobs` (the metrics'
 * expectation). Null for an unknown job, or none. The file's timing, not the fleet's stretches of
 * versions: a window counted from a success under the old timing across a switch would be the
 * old one's (a job moved from every second to yearly would read overdue a minute later).
 */
export function deadManSchedule(loaded: LoadedSchedule, job: string): Schedule | null {
  const own = loaded.schedules.get(job);
  if (own) return parseSchedule(own.expression, own.timezone);
  const source = deadManSource(loaded.config.jobs, job);
  return source?.schedule != null ? parseSchedule(source.schedule, source.timezone) : null;
}

/**
 * Every job of the file with its fingerprint and since when this runner runs it, the names of its
 * `secretEnv` variables where it has any (`baton run --env` asks a library-mode replica through
 * the database, and sends no secret that way: cli/fleet-run.ts), and each enabled job's next
 * fires counted from `anchor` (schedule/upcoming.ts). Counting is croner's work, about
 * 0.1 ms an expression (1,000 daily jobs of distinct expressions: 130 ms on the 2-core VM), so jobs
 * that share an expression and zone share one count, and the loop gets its turn every
 * COUNTS_PER_TURN counts: the fires of the hour's first seconds are not held up by it.
 */
export async function registryView(
  loaded: LoadedSchedule,
  anchor: Date,
): Promise<Record<string, LoadedJob>> {
  const after = anchor.toISOString();
  const secretEnv = new Map(loaded.config.jobs.map((j) => [j.name, j.secretEnv]));
  const counted = new Map<string, string[]>();
  const view: Record<string, LoadedJob> = {};
  for (const [job, fp] of Object.entries(loaded.fingerprints)) {
    const secret = secretEnv.get(job) ?? [];
    const ineligible = loaded.elsewhere.get(job);
    const entry: LoadedJob = {
      fp,
      since: loaded.knownSince.get(job)?.toISOString() ?? null,
      ...(ineligible != null ? { ineligible } : {}),
      ...(secret.length > 0 ? { secretEnv: [...secret] } : {}),
      ...(loaded.ownVersions.has(job) ? { tv: loaded.ownVersions.get(job)! } : {}),
    };
    const schedule = loaded.schedules.get(job);
    if (schedule) {
      // Jobs on one expression share a count — unless their fires switch between versions.
      // A job whose fires switch between versions counts alone; one by a single timing (most:
      // version 1 in force from the start) shares the count of its expression and zone.
      const segments = (schedule as Partial<SwitchedSchedule>).segments;
      const single = segments?.length === 1 ? segments[0]!.schedule : schedule;
      const key = single
        ? JSON.stringify([single.timezone, single.expression])
        : JSON.stringify([job, segments!.map((s) => [s.version, s.from.getTime(), !!s.schedule])]);
      let at = counted.get(key);
      if (!at) {
        at = upcomingInstants(schedule, anchor);
        counted.set(key, at);
        if (counted.size % COUNTS_PER_TURN === 0) await yieldToLoop();
      }
      entry.next = { after, at };
    }
    view[job] = entry;
  }
  return view;
}

/** Counts of next fires between two turns of the event loop (see registryView): ~5 ms. */
const COUNTS_PER_TURN = 50;
