/**
 * What `baton definitions` says of a job's timing versions (store/timings.ts; the rule is
 * schedule/timing-switch.ts): each version with its state, which live runners have which, the
 * local file's place among them, and for a switch still to come its transition preview — the
 * fires around the switch under the old timing and the new one, which of them the fleet will
 * run, and the day it runs the job twice or skips it. `baton definitions apply` shows the same
 * preview of the change it is about to record. Pure.
 *
 * The preview's window is the switch's day with the day before and the day after (days of the
 * new timing's zone, the one its anomaly is judged in), and of each timing at most
 * PREVIEW_FIRES_PER_SIDE fires before the switch and as many from it: a daily job shows its three
 * days, an every-minute job the minutes either side of the instant. A timing with no fire from
 * the switch within the window (a weekly job) shows its next one.
 */
import { timingPrint } from '../config/fingerprint.js';
import { parseSchedule, type Schedule } from '../schedule/cron.js';
import { dayAround, switchAnomaly, type SwitchAnomaly } from '../schedule/timing-switch.js';
import { DEFAULT_GONE_AFTER_MS, runnerState, type RunnerRecord } from '../store/runners.js';
import { FIRST_VERSION_AT, ownVersion, type TimingRecord } from '../store/timings.js';
import { superseded, versionBefore, versionInForce } from './timing-status.js';

/** A timing: what decides which instants are a job's fires. */
export interface Timing {
  schedule: string;
  timezone: string;
}

/** A timing with its version number. */
export interface NumberedTiming extends Timing {
  version: number;
}

/** The most fires of each timing shown on each side of the switch. */
export const PREVIEW_FIRES_PER_SIDE = 4;

export interface PreviewFire {
  at: Date;
  /** Whose fire it is: the version in force before the switch (`old`) or the switch's (`new`). */
  timing: 'old' | 'new';
  /** The fleet runs it: an old fire before the switch, a new one at or after it. */
  runs: boolean;
}

export interface TransitionPreview {
  /** The version in force before the switch; null when there is none. */
  from: NumberedTiming | null;
  to: NumberedTiming;
  at: Date;
  /** The switch's day in the new timing's zone (YYYY-MM-DD). */
  day: string;
  /**
   * Both timings' fires around the switch, by instant (the old one's first on a tie); for the
   * same timing on both sides, its fires once (`old` before the switch, `new` from it).
   */
  fires: PreviewFire[];
  /** The switch goes to the timing in force before it: it changes no fire. */
  same: boolean;
  /** The switch's day runs the job more often than either timing, or less (switchAnomaly). */
  anomaly: SwitchAnomaly | null;
}

/** The preview of switching from `from` to `to` at `at`. */
export function transitionPreview(
  from: NumberedTiming | null,
  to: NumberedTiming,
  at: Date,
): TransitionPreview {
  const next = parseSchedule(to.schedule, to.timezone);
  // The same timing again (a rollback that cancels a pending change): one list of fires.
  const same = from != null && sameTiming(from, to);
  const old = from && !same ? parseSchedule(from.schedule, from.timezone) : null;
  const today = dayAround(to.timezone, at);
  const windowFrom = dayAround(to.timezone, new Date(today.start.getTime() - 1)).start;
  const windowUntil = dayAround(to.timezone, today.end).end;
  const fires: PreviewFire[] = [];
  for (const [schedule, timing] of [
    [same ? next : old, 'old'],
    [next, 'new'],
  ] as const) {
    if (!schedule) continue;
    if (!same || timing === 'old') {
      const before = lastBefore(schedule, at, windowFrom, PREVIEW_FIRES_PER_SIDE);
      for (const f of before) fires.push({ at: f, timing, runs: timing === 'old' });
    }
    if (!same || timing === 'new') {
      const after = firstFrom(schedule, at, windowUntil, PREVIEW_FIRES_PER_SIDE);
      for (const f of after) fires.push({ at: f, timing, runs: timing === 'new' });
    }
  }
  fires.sort((a, b) => a.at.getTime() - b.at.getTime() || (a.timing === 'old' ? -1 : 1));
  return {
    from,
    to,
    at,
    day: today.day,
    fires,
    same,
    anomaly: old ? switchAnomaly(old, next, at) : null,
  };
}

/** Whether two timings are one: the same expression (as recorded, trimmed) in the same zone. */
export function sameTiming(a: Timing, b: Timing): boolean {
  return a.schedule.trim() === b.schedule.trim() && a.timezone === b.timezone;
}

/** The last `n` fires in [from, at), looking back from `at` a growing span at a time. */
function lastBefore(s: Schedule, at: Date, from: Date, n: number): Date[] {
  for (let span = 60_000; ; span *= 2) {
    const lo = Math.max(from.getTime(), at.getTime() - span);
    const fires: Date[] = [];
    for (let t = s.nextAfter(new Date(lo - 1)); t && t < at; t = s.nextAfter(t)) {
      fires.push(t);
      if (fires.length > n) fires.shift();
    }
    if (fires.length >= n || lo === from.getTime()) return fires;
  }
}

/** The first `n` fires in [at, until); none there: the first from `at` (a weekly job's). */
function firstFrom(s: Schedule, at: Date, until: Date, n: number): Date[] {
  const first = s.nextAfter(new Date(at.getTime() - 1));
  if (!first) return [];
  const fires = [first];
  for (let t = s.nextAfter(first); t && t < until && fires.length < n; t = s.nextAfter(t)) {
    fires.push(t);
  }
  return fires;
}

/**
 * A version's place: `in-force` now; `pending` (its instant to come); `past` (in force once, a
 * newer one since); `superseded` (never in force: a newer version took effect at or before its
 * instant — an operator chose an earlier one).
 */
export type VersionState = 'in-force' | 'pending' | 'past' | 'superseded';

export interface VersionView {
  record: TimingRecord;
  state: VersionState;
  /** The live runners whose file has this version (their registry rows say so). */
  hosts: string[];
}

/** A live runner that has the job, and the version of its definition. */
export interface RunnerTiming {
  host: string;
  /** Null: its registry row does not say (not recorded yet, or an older baton). */
  version: number | null;
  /** Its file is older than the version in force: it holds the job now. */
  held: boolean;
  /** Its file is older than a pending version: it holds the job from that instant on. */
  holdsFrom: Date | null;
}

export interface JobTimingView {
  job: string;
  versions: VersionView[];
  inForce: number | null;
  runners: RunnerTiming[];
  /**
   * The local schedules file's timing of the job (when the file is the namespace's and the job
   * has a schedule of its own), with its version; null version: the table lacks it.
   */
  file: (Timing & { version: number | null }) | null;
  /** The switches still to come, oldest version first. */
  switches: TransitionPreview[];
}

/** The runners alive at `now` (a heartbeat within the default 15 s, not stopped). */
export function liveRunners(runners: readonly RunnerRecord[], now: Date): RunnerRecord[] {
  return runners.filter((r) => runnerState(r, now, DEFAULT_GONE_AFTER_MS) === 'alive');
}

/** `job`'s versions as `baton definitions` shows them. */
export function jobTimingView(
  job: string,
  records: readonly TimingRecord[],
  now: Date,
  live: readonly RunnerRecord[],
  file: Timing | null,
): JobTimingView {
  const inForce = versionInForce(records, now);
  const runners: RunnerTiming[] = live
    .filter((r) => r.jobs.has(job) && !r.jobs.get(job)!.disabled)
    .map((r) => {
      const version = r.jobs.get(job)!.timingVersion ?? null;
      const pendingAbove = records.find(
        (p) =>
          version != null &&
          p.version > version &&
          p.effectiveAt > now &&
          !superseded(p, records) &&
          p.version > (inForce?.version ?? 0),
      );
      return {
        host: r.host,
        version,
        held: version != null && inForce != null && version < inForce.version,
        holdsFrom: pendingAbove?.effectiveAt ?? null,
      };
    });
  const versions = records.map((record) => ({
    record,
    state: (record.version === inForce?.version
      ? 'in-force'
      : superseded(record, records)
        ? 'superseded'
        : record.effectiveAt > now
          ? 'pending'
          : 'past') as VersionState,
    hosts: runners.filter((r) => r.version === record.version).map((r) => r.host),
  }));
  const switches = versions
    .filter((v) => v.state === 'pending')
    .map(({ record }) =>
      transitionPreview(versionBefore(records, record), record, record.effectiveAt),
    );
  return {
    job,
    versions,
    inForce: inForce?.version ?? null,
    runners,
    file: file
      ? {
          schedule: file.schedule,
          timezone: file.timezone,
          version: ownVersion(records, timingPrint(file)!),
        }
      : null,
    switches,
  };
}

/** Whether `at` is the first version's "from the start". */
export function fromTheStart(at: Date): boolean {
  return at.getTime() <= FIRST_VERSION_AT.getTime();
}
