/**
 * Which fires are due, for every job at once — the daemon's single timer instead of one timer per
 * job. Pure: the caller passes the time, so tests drive it with any clock.
 *
 * At each wake the loop asks `due(now)` for the fires whose instant has come, and `sleepMs(now)`
 * for how long to sleep. Sleeps are capped (a suspended VM or a clock step is noticed within
 * `MAX_SLEEP_MS`), and a fire found more than `LATE_TOLERANCE_MS` late is reported as missed
 * instead of being run long after its time.
 */
import type { Schedule } from './cron.js';

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
  /** How late the wake is for this fire, in ms (>= 0). */
  lateMs: number;
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
  private readonly next = new Map<string, Date | null>();

  constructor(
    private readonly schedules: ReadonlyMap<string, Schedule>,
    now: Date,
  ) {
    for (const [job, schedule] of schedules) this.next.set(job, schedule.nextAfter(now));
  }

  /** Fires with `scheduledAt <= now`, oldest first; advances past them. */
  take(now: Date): Wake {
    const due: DueFire[] = [];
    const missed: MissedFires[] = [];
    for (const [job, schedule] of this.schedules) {
      let at = this.next.get(job) ?? null;
      while (at != null && at.getTime() <= now.getTime()) {
        const lateMs = now.getTime() - at.getTime();
        if (lateMs > LATE_TOLERANCE_MS) {
          // Jump to the tolerance window instead of walking every second of a long suspension.
          const resumedAt = schedule.nextAfter(new Date(now.getTime() - LATE_TOLERANCE_MS - 1));
          missed.push({ job, first: at, resumedAt });
          at = resumedAt;
          continue;
        }
        due.push({ job, scheduledAt: at, lateMs });
        at = schedule.nextAfter(at);
      }
      this.next.set(job, at);
    }
    due.sort((a, b) => a.scheduledAt.getTime() - b.scheduledAt.getTime());
    return { due, missed };
  }

  /** How long to sleep before the next fire is due (never more than MAX_SLEEP_MS). */
  sleepMs(now: Date): number {
    let soonest = Infinity;
    for (const at of this.next.values()) {
      if (at) soonest = Math.min(soonest, at.getTime() - now.getTime());
    }
    return Math.max(0, Math.min(soonest, MAX_SLEEP_MS));
  }

  nextFire(job: string): Date | null {
    return this.next.get(job) ?? null;
  }
}
