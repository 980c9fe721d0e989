/**
 * The runner's log lines about fires and faults, written from its events: one line per event,
 * each fire's line bound to its job, instant and trigger (never to user-controlled keys).
 */
import type { FireRef } from '../fire/fire-events.js';
import type { Logger } from '../log.js';
import type { RunnerEvents } from './runner-events.js';
import type { FleetState } from './fleet-watch.js';

/**
 * `fleetState`: where the runner stands with its fleet (fleet-watch.ts) when a fire finds no
 * context — held after a failover, or detached, it is connected and holds its fires on purpose.
 */
export function logEvents(
  events: RunnerEvents,
  log: Logger,
  fleetState: () => FleetState = () => 'with-fleet',
): void {
  // One child logger per fire, as every event of a fire carries the same FireRef (a child's
  // bindings are serialized when it is made: in a storm of fires, once each is enough).
  const children = new WeakMap<FireRef, Logger>();
  const of = (fire: FireRef) => {
    let child = children.get(fire);
    if (!child) {
      child = log.child({ job: fire.job, scheduledAt: fire.scheduledAt, trigger: fire.trigger });
      children.set(fire, child);
    }
    return child;
  };

  events.on('fire:won', (e) =>
    of(e.fire).info({ runId: e.runId, jobPid: e.jobPid }, 'fire won: running'),
  );
  events.on('fire:skipped', (e) =>
    of(e.fire).info({ runId: e.runId, reason: e.reason }, 'fire skipped'),
  );
  events.on('fire:notAttempted', (e) => {
    const fireLog = of(e.fire);
    const err = { err: e.error };
    switch (e.cause) {
      case 'no-session':
        // A holding or detached runner's fires find no fire context either (fleet-watch.ts).
        switch (fleetState()) {
          case 'detached':
            return fireLog.warn('fire not run: held, detached from the fleet');
          case 'holding':
            return fireLog.warn(
              'fire not run: held after a failover until the fleet is seen on this server',
            );
          case 'with-fleet':
            return fireLog.warn('fire not run: no connection to the database to coordinate it');
        }
        return;
      case 'session-lost':
        // The loss itself is logged once, as an error (`lock:lost`).
        return fireLog.warn(err, 'fire not run: the lock session was lost while it was contended');
      case 'read-only':
        return fireLog.error('fire not run: the database is read-only');
      case 'job-database':
        return fireLog.error(err, 'fire not run: its database connection is unusable');
      case 'error':
        // Usually the database (it cannot record or coordinate the fire); the message says.
        return fireLog.error(err, 'fire not completed');
      case 'stale-schedule':
        // The fleet fires it by the schedule in force; this runner reads it again.
        return fireLog.warn(
          "fire not run: the job's schedule in the database has changed since this runner read it",
        );
    }
  });
  events.on('run:notCompleted', (e) => of(e.fire).error({ err: e.error }, 'fire not completed'));
  events.on('run:finished', (e) =>
    of(e.fire)[e.status === 'done' ? 'info' : 'warn'](
      {
        runId: e.runId,
        status: e.status,
        exitCode: e.exitCode,
        attempts: e.attempts,
        error: e.error,
      },
      'run finished',
    ),
  );
  events.on('run:output', (e) => {
    const runLog = of(e.fire);
    for (const { stream, line, droppedBefore } of e.lines) {
      runLog.info(
        {
          runId: e.runId,
          attempt: e.attempt,
          stream,
          line,
          ...(droppedBefore ? { droppedBefore } : {}),
        },
        'job output',
      );
    }
  });
  events.on('verdict:kept', (e) =>
    of(e.fire).warn(
      { runId: e.runId, status: e.status },
      'verdict kept: the database did not answer',
    ),
  );

  events.on('schedules:changed', (e) =>
    log.debug(
      { revision: e.revision, changed: e.changed, loaded: e.loaded },
      'dynamic schedules changed',
    ),
  );
  events.on('loop:missedFires', (e) =>
    log.warn(
      { job: e.job, firstMissed: e.firstMissed, resumedAt: e.resumedAt },
      'fires missed: the runner woke too late to run them',
    ),
  );
  events.on('loop:lateWake', (e) =>
    log.warn({ job: e.job, scheduledAt: e.scheduledAt, lateMs: e.lateMs }, 'late wake'),
  );
  events.on('fire:notInForce', (e) =>
    log.info(
      { job: e.job, scheduledAt: e.scheduledAt },
      'fire dropped: not a fire of the schedule in force now (its timing changed)',
    ),
  );
  events.on('fires:missed', (e) =>
    log.warn({ job: e.job, count: e.count }, 'missed fires recorded'),
  );
  events.on('fires:inDoubt', (e) =>
    log.warn(
      { job: e.job, count: e.count },
      'fires in doubt after the failover recorded: not caught up',
    ),
  );
  events.on('lock:lost', (e) =>
    log.error(
      { reason: e.reason, lockConnectionId: e.lockConnectionId, aborting: e.aborting },
      'lock session lost',
    ),
  );
  events.on('db:failover', (e) => {
    const facts = { fromServer: e.from, toServer: e.to, gtid: e.toGtid, lostAt: e.lostAt };
    if (e.settledSince) {
      log.warn(
        { ...facts, semiSyncSince: e.settledSince },
        'the database failed over: reconnected to another server; semi-sync acknowledged ' +
          'every commit on the old one up to the loss: no fire in doubt since then',
      );
    } else {
      log.error(
        facts,
        'the database failed over: reconnected to another server; fires up to the loss are in doubt',
      );
    }
  });
  events.on('db:detached', (e) => {
    if (e.detached) {
      log.error({ reason: e.reason }, 'detached from the fleet: no fire runs on this server');
    } else {
      log.warn('the fleet is on this server after all: fires run again');
    }
  });
  events.on('fleet:companions', (e) => log.debug({ companions: e.hosts }, 'fleet: companions'));
  events.on('db:readOnly', (e) => {
    if (e.readOnly) {
      log.error(
        'the database is read-only (a demoted primary?): no fire runs until it is writable',
      );
    } else {
      log.warn('the database is writable again: fires run again');
    }
  });
  events.on('clock:offset', (e) => {
    if (e.over) {
      log.warn(
        { clockOffsetMs: e.clockOffsetMs, thresholdMs: e.thresholdMs },
        "this host's clock is off from the database's: fires still run on database time",
      );
    } else {
      log.info(
        { clockOffsetMs: e.clockOffsetMs },
        "this host's clock is back within the threshold",
      );
    }
  });
}
