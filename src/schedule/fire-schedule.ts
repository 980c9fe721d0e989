/**
 * Which fires are due, for every job at once — the daemon's single timer instead of one timer per
 * job. Pure: the caller passes the time, so tests drive it with any clock.
 *
 * At each wake the loop asks `due(now)` for the fires whose instant has come, and `sleepMs(now)`
 * for how long to sleep. Sleeps are capped (a suspended VM or a clock step is noticed within
 * `MAX_SLEEP_MS`), and a fire found more than `LATE_TOLERANCE_MS` late is reported as missed
 * instead of being run long after its time.
 *
 * A job with jitter (`src/schedule/jitter.ts`) is due at its fire's planned start, the instant
 * plus a delay the caller's `StartDelay` gives, and a wake's lateness is counted from that start:
 * the delay is wanted, not lag. The fire keeps its instant (`scheduledAt`, the fire key).
 */
import type { Schedule } from './cron.js';

/** When each job's fires are to start, after their instants. */
export interface StartDelay {
  /** The delay in ms after `scheduledAt` at which `job`'s fire is to start (0: at its instant). */
  delayMs(job: string, scheduledAt: Date): number;
  /** The longest delay `job` can have (its jitter); 0 for none. */
  maxMs(job: string): number;
}

/** Every fire at its instant. */
export const NO_DELAY: StartDelay = { delayMs: () => 0, maxMs: () => 0 };

/**
 * No timer of baton sleeps longer than this (the loop's, retention's): Node's timers overflow
 * past 2^31 ms, and a host that was suspended or whose clock was stepped is noticed within it,
 * since every wake recomputes from the clock.
 */
export const MAX_SLEEP_MS = 30_000;
export const LATE_TOLERANCE_MS = 60_000;

export interface DueFire {
  job: string;
  scheduledAt: Date;
  /** How late the wake is for this fire's planned start, in ms (>= 0). */
  lateMs: number;
}

/** A job's next fire: its instant, and when it is to start (the same without jitter). */
interface NextFire {
  at: Date;
  startAt: number;
}

/** Fires at or after `first` and before `resumedAt` were too late to run. */
export interface MissedFires {
  job: string;
  first: Date;
  resumedAt: Date | null;
}

export interface Wake {
  due: DueFire[];
  missed: MissedFires[];
}

export class FireSchedule {
  private readonly next = new Map<string, NextFire | null>();

  /**
   * `startDelay` must stay below each job's shortest period (config validation sees to it), so
   * that a job's planned starts come in the order of its instants.
   */
  constructor(
    private readonly schedules: ReadonlyMap<string, Schedule>,
    now: Date,
    private readonly startDelay: StartDelay = NO_DELAY,
  ) {
    for (const [job, schedule] of schedules) {
      // A fire whose instant has passed but whose start has not is still to come: a reload in
      // that window must not drop it (the schedule it replaces has not taken it).
      let next = this.planned(
        job,
        schedule.nextAfter(new Date(now.getTime() - startDelay.maxMs(job))),
      );
      while (next != null && next.startAt <= now.getTime()) {
        next = this.planned(job, schedule.nextAfter(next.at));
      }
      this.next.set(job, next);
    }
  }

  /** Fires whose planned start is `<= now`, oldest first; advances past them. */
  take(now: Date): Wake {
    const due: DueFire[] = [];
    const missed: MissedFires[] = [];
    for (const [job, schedule] of this.schedules) {
      let next = this.next.get(job) ?? null;
      while (next != null && next.startAt <= now.getTime()) {
        const lateMs = now.getTime() - next.startAt;
        if (lateMs > LATE_TOLERANCE_MS) {
          // Jump to the tolerance window instead of walking every second of a long suspension.
          // By instants: the fire found there is within the tolerance of its start too (a start
          // is never before its instant), so the walk goes on from it and never jumps back.
          const resumedAt = schedule.nextAfter(new Date(now.getTime() - LATE_TOLERANCE_MS - 1));
          missed.push({ job, first: next.at, resumedAt });
          next = this.planned(job, resumedAt);
          continue;
        }
        due.push({ job, scheduledAt: next.at, lateMs });
        next = this.planned(job, schedule.nextAfter(next.at));
      }
      this.next.set(job, next);
    }
    due.sort((a, b) => a.scheduledAt.getTime() - b.scheduledAt.getTime());
    return { due, missed };
  }

  /** How long to sleep before the next planned start (never more than MAX_SLEEP_MS). */
  sleepMs(now: Date): number {
    let soonest = Infinity;
    for (const next of this.next.values()) {
      if (next) soonest = Math.min(soonest, next.startAt - now.getTime());
    }
    return Math.max(0, Math.min(soonest, MAX_SLEEP_MS));
  }

  /** The instant of the job's next fire (its `scheduled_at`). */
  nextFire(job: string): Date | null {
    return this.next.get(job)?.at ?? null;
  }

  /** When the job's next fire is to start: its instant plus its jitter delay. */
  nextStart(job: string): Date | null {
    const next = this.next.get(job);
    return next ? new Date(next.startAt) : null;
  }

  private planned(job: string, at: Date | null): NextFire | null {
    return at == null ? null : { at, startAt: at.getTime() + this.startDelay.delayMs(job, at) };
  }
}
