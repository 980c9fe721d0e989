/**
 * The instants a job's calendars skip (docs/schedules.md, "Calendars"), written into the history:
 * one `skipped` row of kind `calendar` per instant, naming the calendar and, with `shift`, where
 * the fire moved — so "it did not run on New Year's Day" is in the history, not only in the file.
 *
 * A skipped instant is no fire: no runner contends for it, so nobody would write anything. Every
 * runner that runs a job with calendars looks every `lookMs` at the instants its schedule (by the
 * timing version in force at each: schedule/timing-switch.ts) skipped since its last look, once
 * they are `settleMs` old, and writes each into the fire key's `winner = 0` slot
 * (store/fire-writes.ts `insertCalendarSkip`): however many runners write it, an instant has one
 * row. The watch starts from its own start: instants skipped while no runner was up have no row.
 */
import { delay } from '../delay.js';
import { errorMessage } from '../errors.js';
import type { KeepAlive } from '../keep-alive.js';
import type { Logger } from '../log.js';
import type { CalendarSkip } from '../schedule/calendar.js';
import type { Queryable } from '../store/deadline.js';
import { insertCalendarSkip } from '../store/fire-writes.js';
import { UNREAD, type LoadedSchedule } from './loaded-schedule.js';
import type { RunnerEvents } from './runner-events.js';

export interface CalendarTimings {
  /** How often the skipped instants are looked for. */
  lookMs: number;
  /** How old a skipped instant is before it is written (the runners' clocks agree by then). */
  settleMs: number;
}

export const CALENDAR_TIMINGS: Readonly<CalendarTimings> = { lookMs: 1_000, settleMs: 1_000 };

/** Instants of one job written per look (a per-second job's skipped day is written in turns). */
export const MAX_SKIPS_PER_LOOK = 100;

export interface CalendarWatchOptions {
  host: string;
  namespace: () => string;
  loaded: () => LoadedSchedule;
  /** The pool, only while this runner coordinates (connected, with the fleet). */
  pool: () => Queryable | null;
  /** The database's clock. */
  now: () => Date;
  events: RunnerEvents;
  log: Logger;
  signal: AbortSignal;
  /** CALENDAR_TIMINGS when not given. */
  timings?: CalendarTimings | undefined;
  keepAlive?: KeepAlive | undefined;
}

export class CalendarWatch {
  private readonly t: CalendarTimings;
  /** Per job: the instants up to this one are written (database time). */
  private readonly doneTo = new Map<string, Date>();
  private running = false;

  constructor(private readonly o: CalendarWatchOptions) {
    this.t = o.timings ?? CALENDAR_TIMINGS;
  }

  /** Starts looking, until the runner stops. */
  start(): void {
    if (this.running) return;
    this.running = true;
    void (async () => {
      while (!this.o.signal.aborted) {
        try {
          await this.look();
        } catch (err) {
          this.o.log.warn({ err: errorMessage(err) }, 'could not record the calendar skips');
        }
        await delay(this.t.lookMs, this.o.signal, this.o.keepAlive);
      }
    })();
  }

  private async look(): Promise<void> {
    const loaded = this.o.loaded();
    const pool = this.o.pool();
    // Before the versions are read, no instant is known to be the fleet's.
    if (!pool || loaded.timings === UNREAD) return;
    const settled = new Date(this.o.now().getTime() - this.t.settleMs);
    for (const [job, schedule] of loaded.schedules) {
      if (this.o.signal.aborted) return;
      if (!schedule.calendarSkips || !loaded.jobs.has(job)) continue;
      const from = this.doneTo.get(job);
      if (!from) {
        // From this look on: what was skipped before this runner came is not its to tell.
        this.doneTo.set(job, settled);
        continue;
      }
      if (settled <= from) continue;
      const skips = schedule.calendarSkips(from, settled, MAX_SKIPS_PER_LOOK);
      const recorded = await this.record(pool, job, skips);
      // A full page: the rest at the next look, from the last one written.
      this.doneTo.set(job, skips.length === MAX_SKIPS_PER_LOOK ? skips.at(-1)!.at : settled);
      if (recorded > 0) this.o.events.emit('fires:calendar', { job, count: recorded });
    }
  }

  private async record(pool: Queryable, job: string, skips: CalendarSkip[]): Promise<number> {
    let recorded = 0;
    for (const skip of skips) {
      const attempt = {
        namespace: this.o.namespace(),
        job,
        scheduledAt: skip.at,
        trigger: 'schedule' as const,
        host: this.o.host,
        pid: process.pid,
      };
      if ((await insertCalendarSkip(pool, attempt, calendarReason(skip))) != null) recorded++;
    }
    return recorded;
  }
}

/** `calendar kr-holidays: skipped`, `… moved to 2027-01-04T03:00:00.000Z`, `not on …`. */
export function calendarReason(skip: CalendarSkip): string {
  const what =
    skip.why === 'only' ? `not on calendar ${skip.calendar}` : `calendar ${skip.calendar}`;
  return skip.movedTo ? `${what}: moved to ${skip.movedTo.toISOString()}` : `${what}: skipped`;
}
