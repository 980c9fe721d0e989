/**
 * The daemon's one timer for all jobs. It sleeps until the next fire of any job by the fleet's
 * clock, wakes, hands the due fires on, and sleeps again — recomputing from the clock at every
 * wake (timers drift, hosts get suspended), never sleeping more than MAX_SLEEP_MS.
 *
 * A timer wakes up to a few milliseconds late (Node's timer clock steps by whole milliseconds,
 * and runners and the server waking together on a small machine take turns), and a fire's lag
 * starts there: so the timer is set WAKE_AHEAD_MS early and the last stretch is polled on the
 * event loop (`setImmediate`, which lets I/O through) until the instant has come by the
 * database's clock.
 *
 * Beside the file's schedule, the loop may take fires from one more source: library mode's
 * schedules created at run time (dynamic-fires.ts), which change one at a time while the loop
 * runs, where the file's schedule is replaced whole.
 */
import { HOLDS_PROCESS, type KeepAlive } from '../keep-alive.js';
import type { Schedule } from '../schedule/cron.js';
import {
  FireSchedule,
  MAX_SLEEP_MS,
  NO_DELAY,
  type StartDelay,
  type Wake,
} from '../schedule/fire-schedule.js';

/** Where the loop's fires come from: a `FireSchedule`, or one that changes in place. */
export interface FireSource {
  take(now: Date): Wake;
  sleepMs(now: Date): number;
  nextFire(job: string): Date | null;
  nextStart(job: string): Date | null;
}

/** How early the timer is set before a fire; the rest is polled. */
const WAKE_AHEAD_MS = 2;

export class SchedulerLoop {
  private schedule: FireSchedule;
  private timer: NodeJS.Timeout | undefined;
  private polling: NodeJS.Immediate | undefined;
  private stopped = false;
  /** When the loop planned to wake next (performance.now()), for the health check. */
  private nextWakeBy = performance.now();
  private lastWakeAt = performance.now();

  constructor(
    schedules: ReadonlyMap<string, Schedule>,
    private readonly now: () => Date,
    private readonly onWake: (wake: Wake) => void,
    startDelay: StartDelay = NO_DELAY,
    /** Whether the timer holds the process (the runner's policy, keep-alive.ts). */
    private readonly keepAlive: KeepAlive = HOLDS_PROCESS,
    /** More fires, beside the schedule's: they change in place, never through `replace`. */
    private readonly more: FireSource | null = null,
  ) {
    this.schedule = new FireSchedule(schedules, now(), startDelay);
  }

  /** A new schedule (a reload, or the first connect: the loop moves onto database time). */
  replace(
    schedules: ReadonlyMap<string, Schedule>,
    now: Date,
    startDelay: StartDelay = NO_DELAY,
  ): void {
    this.schedule = new FireSchedule(schedules, now, startDelay);
  }

  /** Hands on what is due by `now` without waiting for the timer (before a reload). */
  wakeNow(now: Date): void {
    this.onWake(this.take(now));
  }

  arm(): void {
    this.disarm();
    if (this.stopped) return;
    const now = this.now();
    const next = Math.min(this.schedule.sleepMs(now), this.more?.sleepMs(now) ?? Infinity);
    // Never a poll without end: an instant that is not a number would never come.
    const sleepMs = Number.isFinite(next) ? next : MAX_SLEEP_MS;
    this.nextWakeBy = performance.now() + sleepMs;
    if (sleepMs > WAKE_AHEAD_MS) {
      this.timer = this.keepAlive.background(
        setTimeout(() => this.wake(), sleepMs - WAKE_AHEAD_MS),
      );
    } else {
      this.polling = setImmediate(() => this.wake());
    }
  }

  disarm(): void {
    clearTimeout(this.timer);
    clearImmediate(this.polling);
  }

  stop(): void {
    this.stopped = true;
    this.disarm();
  }

  /** The job's next fire by this schedule; null for a job it does not run. */
  nextFire(job: string): Date | null {
    return this.schedule.nextFire(job) ?? this.more?.nextFire(job) ?? null;
  }

  /** When the job's next fire is to start (after its instant when it has jitter). */
  nextStart(job: string): Date | null {
    return this.schedule.nextStart(job) ?? this.more?.nextStart(job) ?? null;
  }

  /** How long past its planned wake the loop is (> 0: it is late). */
  get overdueMs(): number {
    return performance.now() - this.nextWakeBy;
  }

  get sinceLastWakeMs(): number {
    return performance.now() - this.lastWakeAt;
  }

  private wake(): void {
    this.lastWakeAt = performance.now();
    this.onWake(this.take(this.now()));
    this.arm();
  }

  /** Both sources' due fires, oldest first. */
  private take(now: Date): Wake {
    const wake = this.schedule.take(now);
    if (!this.more) return wake;
    const more = this.more.take(now);
    if (more.due.length === 0 && more.missed.length === 0) return wake;
    const due = [...wake.due, ...more.due];
    due.sort((a, b) => a.scheduledAt.getTime() - b.scheduledAt.getTime());
    return { due, missed: [...wake.missed, ...more.missed] };
  }
}
