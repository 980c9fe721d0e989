/**
 * When the schedules created at run time fire (dynamic-schedules.ts has the rest of them): the
 * loop's second source of due fires, beside the file's schedule (loop.ts `FireSource`).
 *
 * A schedule is added, changed and removed while the runner runs, one at a time, so this source
 * changes one subject at a time, never rebuilt whole: ten thousand tenants' schedules must not
 * cost ten thousand next-fire computations each time one of them changes. Subjects with the same
 * expression and time zone — most of them, in practice: tenants on `0 3 * * *` — share one
 * schedule of their fires (a `FireSchedule` of one entry), so a wake asks croner once per
 * expression and hands on a fire per subject. A subject added to a group fires from the group's
 * next instant, which is after the moment it was added: the caller takes what is due first
 * (`SchedulerLoop.wakeNow`), as a reload does.
 *
 * A schedule fires from its first instant after it was written, on every runner: a runner that
 * reads a change a moment late (the others read it within about a second) also hands on the
 * subject's instants between the change and that moment, late (`since`), so that no instant of a
 * new timing is left to nobody; the fire key keeps each one to one run. Only for a change this
 * recent (CHANGE_CATCH_UP_MS): a runner that reads rows long written (at its start) fires from now.
 *
 * A wake this source found more than a minute late reports its missed fires once per job of a
 * group, as `<job>:*`, not once per key: a stall must not write ten thousand warnings.
 */
import type { Schedule } from '../schedule/cron.js';
import {
  FireSchedule,
  MAX_SLEEP_MS,
  type DueFire,
  type MissedFires,
  type Wake,
} from '../schedule/fire-schedule.js';
import { jobOfSubject, subjectName } from '../schedule-keys.js';
import type { FireSource } from './loop.js';

/** The one entry of a group's FireSchedule. */
const GROUP = '';

/**
 * How recent a change must be for its instants since to be handed on when it is applied: above
 * the stated delay of a change's reach (docs/library-mode.md: 2 s), far below anything a runner
 * would catch up without `catchUp:`.
 */
export const CHANGE_CATCH_UP_MS = 5_000;
/** At most this many of a subject's instants since its change (an every-second schedule). */
const CHANGE_CATCH_UP_FIRES = 5;

interface Group {
  fires: FireSchedule;
  members: Set<string>;
  /** When its next fire is to start (ms), Infinity when it has none: what `take` skips by. */
  startAt: number;
}

export class DynamicFires implements FireSource {
  private readonly groups = new Map<string, Group>();
  /** Each subject's group key. */
  private readonly groupOf = new Map<string, string>();
  /** Instants of subjects between their change and its application here, due at the next take. */
  private pending: { job: string; scheduledAt: Date }[] = [];

  get size(): number {
    return this.groupOf.size;
  }

  /**
   * Fires `subject` by `schedule` from its next instant after `now` (moved, if it had another);
   * `since`: the change was written then, and its instants since are due too (the header).
   */
  set(subject: string, schedule: Schedule, now: Date, since?: Date): void {
    const key = JSON.stringify([schedule.timezone, schedule.expression]);
    if (this.groupOf.get(subject) === key) return;
    this.delete(subject);
    if (since && now.getTime() - since.getTime() <= CHANGE_CATCH_UP_MS) {
      let at = schedule.nextAfter(since);
      for (let n = 0; at && at <= now && n < CHANGE_CATCH_UP_FIRES; n++) {
        this.pending.push({ job: subject, scheduledAt: at });
        at = schedule.nextAfter(at);
      }
    }
    let group = this.groups.get(key);
    if (!group) {
      const fires = new FireSchedule(new Map([[GROUP, schedule]]), now);
      group = { fires, members: new Set(), startAt: startOf(fires) };
      this.groups.set(key, group);
    }
    group.members.add(subject);
    this.groupOf.set(subject, key);
  }

  delete(subject: string): void {
    if (this.pending.length > 0) this.pending = this.pending.filter((p) => p.job !== subject);
    const key = this.groupOf.get(subject);
    if (key == null) return;
    this.groupOf.delete(subject);
    const group = this.groups.get(key)!;
    group.members.delete(subject);
    if (group.members.size === 0) this.groups.delete(key);
  }

  clear(): void {
    this.groups.clear();
    this.groupOf.clear();
    this.pending = [];
  }

  take(now: Date): Wake {
    const due: DueFire[] = this.pending.map((p) => ({
      ...p,
      lateMs: Math.max(0, now.getTime() - p.scheduledAt.getTime()),
    }));
    this.pending = [];
    const missed: MissedFires[] = [];
    for (const group of this.groups.values()) {
      if (group.startAt > now.getTime()) continue;
      const wake = group.fires.take(now);
      for (const fire of wake.due) {
        for (const job of group.members) due.push({ ...fire, job });
      }
      for (const m of wake.missed) {
        const jobs = new Set([...group.members].map(jobOfSubject));
        for (const job of jobs) missed.push({ ...m, job: subjectName(job, '*') });
      }
      group.startAt = startOf(group.fires);
    }
    due.sort((a, b) => a.scheduledAt.getTime() - b.scheduledAt.getTime());
    return { due, missed };
  }

  sleepMs(now: Date): number {
    if (this.pending.length > 0) return 0;
    let soonest = Infinity;
    for (const group of this.groups.values()) soonest = Math.min(soonest, group.startAt);
    return Math.max(0, Math.min(soonest - now.getTime(), MAX_SLEEP_MS));
  }

  nextFire(subject: string): Date | null {
    const key = this.groupOf.get(subject);
    return key == null ? null : (this.groups.get(key)?.fires.nextFire(GROUP) ?? null);
  }

  nextStart(subject: string): Date | null {
    return this.nextFire(subject);
  }
}

function startOf(fires: FireSchedule): number {
  return fires.nextStart(GROUP)?.getTime() ?? Infinity;
}
