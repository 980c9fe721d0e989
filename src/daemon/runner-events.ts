/**
 * What a runner reports as it goes: the events of its fires (fire/fire-events.ts) and its own — the
 * loop, the lock session, the database's mode, the clock. Logging (`log-events.ts`) and the
 * metrics (`http/metrics.ts`) subscribe; nothing in the runner waits on a listener.
 */
import { Events } from '../events.js';
import type { FireEventMap } from '../fire/fire-events.js';
import type { Logger } from '../log.js';
import { errorMessage } from '../errors.js';
import type { MissedKind } from '../run-status.js';

export interface RunnerEventMap extends FireEventMap {
  /** A schedule was loaded (at start, at each reload): the enabled jobs it runs from now on. */
  'schedule:loaded': { jobs: string[] };
  /**
   * Library mode: this runner applied changes of the schedules created at run time
   * (daemon/dynamic-schedules.ts): `changed` rows read (all of them at a connect), up to the
   * namespace's `revision`; `loaded`, how many of them it fires now.
   */
  'schedules:changed': { revision: number; changed: number; loaded: number };
  /** The loop woke more than LATE_TOLERANCE_MS after fires of a job: they are not run. */
  'loop:missedFires': { job: string; firstMissed: Date; resumedAt: Date | null };
  /** The loop woke late for a fire (over LATE_WAKE_WARN_MS), but in time to run it. */
  'loop:lateWake': { job: string; scheduledAt: Date; lateMs: number };
  /**
   * A due fire was dropped: its instant is no fire of the job's schedule in force now (it came
   * from the loop's schedule before the timing versions, or a schedule created at run time, were
   * read again).
   */
  'fire:notInForce': { job: string; scheduledAt: Date };
  /** `skipped` rows of kind `calendar` this runner recorded: instants its calendars skip. */
  'fires:calendar': { job: string; count: number };
  /**
   * `missed` rows this runner recorded: fires nobody attempted (after a reconnect, a catch-up that
   * stopped, no eligible runner); `instants`, the fires recorded, `count` of them.
   */
  'fires:missed': { job: string; count: number; instants: Date[]; kind: MissedKind };
  /** `missed` rows of kind `in-doubt` this runner recorded after a failover (daemon/in-doubt.ts). */
  'fires:inDoubt': { job: string; count: number; instants: Date[] };
  /** The lock session died: its locks are gone, and the runs it covered are being aborted. */
  'lock:lost': { reason: string; lockConnectionId: number; aborting: string[] };
  /**
   * A reconnect reached another server than before (a failover, not a restart): the fires up to
   * the loss are in doubt (daemon/recovery.ts).
   */
  'db:failover': {
    from: string;
    to: string;
    toGtid: string | null;
    lostAt: Date;
    /** Semi-sync vouched for the old server's commits since then (daemon/semi-sync.ts). */
    settledSince: Date | null;
  };
  /**
   * After a failover, no other runner heartbeated on this server: the fleet has left it, and this
   * runner holds its fires (`detached`); or a runner of the fleet heartbeated here after all.
   */
  'db:detached': { detached: boolean; reason: string };
  /**
   * The runners alive with this one changed, as the registry shows them (daemon/fleet-watch.ts):
   * who shares the fires (coordination/first-asker.ts).
   */
  'fleet:companions': { hosts: string[] };
  /** The database turned read-only (a demoted primary) or writable again. */
  'db:readOnly': { readOnly: boolean };
  /** This host's clock crossed the warning threshold, off from the database's or back within. */
  'clock:offset': { clockOffsetMs: number; thresholdMs: number; over: boolean };
  /** This runner tried to deliver a notification (daemon/notifier.ts): sent, retried, given up. */
  'notify:delivery': { target: string; outcome: 'sent' | 'retry' | 'failed' };
  /**
   * A pass of this runner's notifier ended (daemon/notifier.ts); `evaluated`: it evaluated the
   * fleet events (`no-success`, `runner-gone`) too.
   */
  'notify:pass': { evaluated: boolean };
}

export type RunnerEvents = Events<RunnerEventMap>;

/** A runner's event map, whose failing listeners are logged (and never fail the runner). */
export function runnerEvents(log: Logger): RunnerEvents {
  return new Events<RunnerEventMap>((event, err) =>
    log.error({ event, err: errorMessage(err) }, 'an event listener failed'),
  );
}
