/**
 * A job no live runner may run (docs/placement.md, "No eligible runner"). A job's `runOn` keeps
 * it off the runners without its tags or hosts: they load it as placed elsewhere
 * (`LoadedSchedule.elsewhere`), neither contend for its fires nor write rows for them. When the
 * last runner that may run it is gone, nobody writes anything for its fires — and "it did not
 * run at 03:00" would be nowhere in the history. This watch writes it.
 *
 * Every runner that has jobs placed elsewhere looks every `lookMs` at each of them with a
 * schedule: does a live runner run it? The answer is the fleet watch's (fleet-watch.ts: the
 * companions alive at its last look, and the jobs each registered as run, not `ineligible`).
 * - Some live runner runs it: nothing to do; the runner remembers when it last saw one.
 * - None does: each fire of the window since an eligible runner was last seen, settled
 *   (`settleMs` after its instant and jitter), that has no row at all gets one `missed` row of
 *   kind `no-eligible-runner`, its reason naming what the job needs and the live runners. The
 *   window reaches back `goneAfterMs` and a look's pace before that last sighting: a runner
 *   killed is seen gone only once its heartbeat is that old, and the fires it left meanwhile
 *   have no row at all. The row takes the fire key's `winner = 0` slot (store/fire-writes.ts
 *   `insertMissed`), so however many runners write it, a fire has one — and none once it has a
 *   winner (an eligible runner that came back and ran it after all).
 *
 * Bounded per look: at most MAX_FIRES_PER_LOOK fires of a job, oldest first; the rest at the
 * next look. Only from a fleet look newer than the watch's start (before it, this runner does not
 * know who runs what), and only while the runner coordinates (`pool()`: connected, with the
 * fleet). The notification of the episode, once fleet-wide, is the notifier's
 * (daemon/notifier.ts); `baton status`'s CRITICAL finding is fleet/status.ts's.
 *
 * What this cannot see: the fires of a time when no runner at all was alive (recovery.ts writes
 * those `not-run` — for the jobs it runs, so not for a job placed elsewhere), and an eligible
 * runner that runs a fire without having registered yet (its first seconds): the row it writes
 * wins over a `missed` row written just before, and the fire has both.
 */
import { delay } from '../delay.js';
import { errorMessage } from '../errors.js';
import type { KeepAlive } from '../keep-alive.js';
import type { Logger } from '../log.js';
import type { JobDefinition } from '../config/schema.js';
import { scheduledDependents } from '../fire/dependents.js';
import { parseSchedule, type Schedule } from '../schedule/cron.js';
import { scheduleByVersions } from '../schedule/timing-switch.js';
import type { Queryable } from '../store/deadline.js';
import { insertMissed } from '../store/fire-writes.js';
import { firesWithRows } from '../store/fire-reads.js';
import { UNREAD, type LoadedSchedule } from './loaded-schedule.js';
import type { RunnerEvents } from './runner-events.js';

/** The placement watch's pace; the runner sets it (timings.ts), these are the defaults. */
export interface PlacementTimings {
  /** How often the jobs placed elsewhere are looked at. */
  lookMs: number;
  /**
   * How long after a fire's instant (and jitter) it is judged: an eligible runner that ran it
   * has written its row by then.
   */
  settleMs: number;
}

export const PLACEMENT_TIMINGS: Readonly<PlacementTimings> = {
  lookMs: 1_000,
  settleMs: 2_000,
};

/** Fires of one job written per look (a per-second job left for a day is caught up in turns). */
export const MAX_FIRES_PER_LOOK = 60;

/** What the watch reads of the fleet watch (fleet-watch.ts). */
export interface FleetView {
  companionsRunning(job: string): string[];
  lastLook(): { hosts: readonly string[]; atMs: number } | null;
  /** The companions' pace and when one counts as gone: how far back a window reaches. */
  readonly timings: { companionsMs: number; goneAfterMs: number };
}

export interface PlacementWatchOptions {
  host: string;
  namespace: () => string;
  loaded: () => LoadedSchedule;
  /** The pool, only while this runner coordinates (connected, with the fleet). */
  pool: () => Queryable | null;
  fleet: FleetView;
  /** The database's clock. */
  now: () => Date;
  events: RunnerEvents;
  log: Logger;
  signal: AbortSignal;
  /** PLACEMENT_TIMINGS when not given. */
  timings?: PlacementTimings | undefined;
  keepAlive?: KeepAlive | undefined;
}

/** What the watch remembers of one job placed elsewhere (database time). */
interface Watched {
  /** When a live runner was last seen running it (or the watch first had it). */
  lastEligible: Date;
  /** The fires of this episode up to this instant are judged; null: none yet. */
  doneTo: Date | null;
}

export class PlacementWatch {
  private readonly t: PlacementTimings;
  private readonly watched = new Map<string, Watched>();
  /** The schedules of the jobs placed elsewhere, parsed once per loaded schedule. */
  private parsed: { for: LoadedSchedule; schedules: Map<string, Schedule> } | null = null;
  private startedAtMs = 0;
  private running = false;

  constructor(private readonly o: PlacementWatchOptions) {
    this.t = o.timings ?? PLACEMENT_TIMINGS;
  }

  /** Starts looking, until the runner stops (at the first connect). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.startedAtMs = Date.now();
    void (async () => {
      while (!this.o.signal.aborted) {
        try {
          await this.look();
        } catch (err) {
          this.o.log.warn({ err: errorMessage(err) }, 'could not look at jobs placed elsewhere');
        }
        await delay(this.t.lookMs, this.o.signal, this.o.keepAlive);
      }
    })();
  }

  /** One look at every job placed elsewhere. */
  private async look(): Promise<void> {
    const loaded = this.o.loaded();
    const schedules = this.schedulesOf(loaded);
    for (const job of this.watched.keys()) if (!schedules.has(job)) this.watched.delete(job);
    if (schedules.size === 0) return;
    const now = this.o.now();
    for (const job of schedules.keys()) {
      if (!this.watched.has(job)) this.watched.set(job, { lastEligible: now, doneTo: null });
    }
    const pool = this.o.pool();
    const look = this.o.fleet.lastLook();
    // Before a look of the fleet newer than this watch, nobody is known to run anything.
    if (!pool || !look || look.atMs < this.startedAtMs) return;
    for (const [job, schedule] of schedules) {
      if (this.o.signal.aborted) return;
      const w = this.watched.get(job)!;
      if (this.o.fleet.companionsRunning(job).length > 0) {
        // The next episode's window starts from this sighting, not from what was judged before.
        w.lastEligible = now;
        w.doneTo = null;
        continue;
      }
      const definition = loaded.config.jobs.find((j) => j.name === job);
      if (!definition) continue;
      const live = [this.o.host, ...look.hosts].sort();
      await this.recordFires(pool, definition, schedule, w, now, live, loaded);
    }
  }

  /** The settled fires of the window without a row: one `missed` row each. */
  private async recordFires(
    pool: Queryable,
    job: JobDefinition,
    schedule: Schedule,
    w: Watched,
    now: Date,
    live: readonly string[],
    loaded: LoadedSchedule,
  ): Promise<void> {
    const { companionsMs, goneAfterMs } = this.o.fleet.timings;
    const reachBack = new Date(w.lastEligible.getTime() - goneAfterMs - companionsMs);
    const from = w.doneTo && w.doneTo > reachBack ? w.doneTo : reachBack;
    const settledBy = now.getTime() - this.t.settleMs;
    const delayOf = (at: Date) => loaded.startDelay.delayMs(job.name, at);
    const fires: Date[] = [];
    for (let at = schedule.nextAfter(from); at && fires.length < MAX_FIRES_PER_LOOK;) {
      if (at.getTime() + delayOf(at) > settledBy) break;
      fires.push(at);
      at = schedule.nextAfter(at);
    }
    if (fires.length === 0) return;
    const namespace = this.o.namespace();
    const seen = await firesWithRows(pool, namespace, job.name, fires[0]!, fires.at(-1)!);
    const why = loaded.elsewhere.get(job.name) ?? 'placed on runners that are not alive';
    const reason =
      `no live runner may run this job (${why}); live runners: ${live.join(', ')} ` +
      `(recorded by ${this.o.host})`;
    const children = scheduledDependents(
      loaded.config.jobs.filter((j) => j.enabled),
      job,
    );
    const recorded: Date[] = [];
    for (const at of fires) {
      if (this.o.signal.aborted) break;
      w.doneTo = at;
      if (seen.has(at.getTime())) continue;
      const attempt = {
        namespace,
        job: job.name,
        scheduledAt: at,
        trigger: 'schedule' as const,
        host: this.o.host,
        pid: process.pid,
      };
      if (await insertMissed(pool, attempt, reason, undefined, 'no-eligible-runner', children)) {
        recorded.push(at);
      }
    }
    if (recorded.length > 0) {
      this.o.events.emit('fires:missed', {
        job: job.name,
        count: recorded.length,
        instants: recorded,
        kind: 'no-eligible-runner',
      });
    }
  }

  /**
   * The fleet's fires of each job placed elsewhere: by the timing version in force at each
   * instant (schedule/timing-switch.ts), as the eligible runners would fire it. None until the
   * versions are read: an instant recorded `missed` by a timing the fleet has left would be a
   * fire that never was.
   */
  private schedulesOf(loaded: LoadedSchedule): Map<string, Schedule> {
    if (this.parsed?.for === loaded) return this.parsed.schedules;
    const schedules = new Map<string, Schedule>();
    const timings = loaded.timings;
    for (const name of timings === UNREAD ? [] : loaded.elsewhere.keys()) {
      const job = loaded.config.jobs.find((j) => j.name === name);
      if (job?.schedule == null || timings === UNREAD) continue;
      try {
        const own = parseSchedule(job.schedule, job.timezone);
        schedules.set(name, scheduleByVersions(own, timings.get(name) ?? []));
      } catch {
        // The file was validated at load; a schedule croner refuses now is not this watch's to tell.
      }
    }
    this.parsed = { for: loaded, schedules };
    return schedules;
  }
}
