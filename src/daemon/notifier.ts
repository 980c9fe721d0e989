/**
 * The deliverer of the notification outbox (docs/notifications.md). Every runner with targets in
 * its schedule runs one; together they deliver each row once:
 *
 * 1. Each second, an indexed probe asks whether anything is due for this runner's targets.
 * 2. If so, the runner takes the namespace's notify lock (`GET_LOCK(…, 0)` on a connection of its
 *    own) and, holding it, decides: the throttle lets a new failure through or holds it, held
 *    failures whose window has passed become one summary, a recovery folds the held ones in; the
 *    evaluations no verdict carries (`no-success`, `runner-gone`, `no-eligible-runner`, a
 *    blackout's start and end) run here, every 15 s — and at a blackout's edge, once an
 *    evaluation has seen it coming — and write their events under the unique key: once per
 *    episode. Then it claims the due rows
 *    (`claim_until`: the claim lapses if this runner dies) and lets the lock go.
 * 3. It delivers what it claimed, outside the lock, and records each outcome: sent, a retry
 *    with backoff, or given up. A claim that lapsed is taken over by whoever comes next; a
 *    delivery whose outcome was unknown is then repeated, with the same event id.
 *
 * A failure here (the database away, a target down) is logged and tried again; it never reaches
 * the runner's fires.
 */
import { jobOfSubject } from '../schedule-keys.js';
import type { PoolConnection } from 'mysql2/promise';
import { withheldVariables } from '../config/connections.js';
import { DEFAULT_NOTIFY_TIMEOUT_MS, DEFAULT_THROTTLE_MS } from '../config/defaults.js';
import { deadManSource } from '../config/dependencies.js';
import type { Config, NotifyTarget } from '../config/schema.js';
import { delay } from '../delay.js';
import type { KeepAlive } from '../keep-alive.js';

import { errorMessage } from '../errors.js';
import { hostWith } from '../host-name.js';
import { notifyLockName } from '../lock-names.js';
import type { Logger } from '../log.js';
import { NOTIFY_COMMAND_KILL_GRACE_MS } from '../notify/command.js';
import { buildEvent } from '../notify/event.js';
import type { DeliveryResult, EnvLookup, NotificationEvent } from '../notify/types.js';
import { expectation } from '../schedule/dead-man.js';
import { parseSchedule } from '../schedule/cron.js';
import { queryWithDeadline, type DeadlinePool, type Queryable } from '../store/deadline.js';
import { jobHistoryFacts } from '../store/fleet-reads.js';
import {
  FAILURE_EVENTS,
  anythingDue,
  claimNotices,
  decide,
  dueNotices,
  enqueueNotices,
  foldHeld,
  heldGroups,
  lastToldFailure,
  mergeDetails,
  noticeId,
  recordDelivery,
  type DeliveryRecord,
  type Notice,
  type NoticeRow,
} from '../store/notifications.js';
import { DEFAULT_GONE_AFTER_MS, listRunners, runnerState } from '../store/runners.js';
import { databaseNow, unplacedEpisode } from '../store/fire-reads.js';
import { anyBlackoutSince, listBlackouts } from '../store/blackouts.js';
import { BLACKOUT_EVENTS, BLACKOUT_NEWS_MS, blackoutNotices } from './blackout-notices.js';

export const NOTIFY_INTERVAL_MS = 1_000;
/** How often the evaluations without a verdict (no-success, runner-gone, detached) run. */
export const EVALUATE_INTERVAL_MS = 15_000;
/** Rows decided and claimed per pass. */
const BATCH = 50;
/** A claim outlives the delivery's own timeout by this much (a command's SIGKILL grace, …). */
const CLAIM_MARGIN_MS = 5_000;
/** Tries before a row is given up (with the backoff below: about two hours). */
export const MAX_ATTEMPTS = 25;
/** Each statement on the lock's connection. */
const NOTIFY_STATEMENT_DEADLINE_MS = 10_000;
/** The first retry's wait; each next one doubles, up to BACKOFF_MAX_MS. */
const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 300_000;

/** The notifier's pace; the runner sets it (timings.ts), these are the defaults. */
export interface NotifierTimings {
  /** NOTIFY_INTERVAL_MS: the probe for due rows. */
  passMs: number;
  /** EVALUATE_INTERVAL_MS: the evaluations without a verdict (no-success, runner-gone, …). */
  evaluateMs: number;
  /** CLAIM_MARGIN_MS: a claim outlives its delivery's timeout by this much. */
  claimMarginMs: number;
  /** NOTIFY_STATEMENT_DEADLINE_MS: each statement on the notify lock's connection. */
  statementDeadlineMs: number;
  /** BACKOFF_FIRST_MS and BACKOFF_MAX_MS: a failed delivery's retries (see backoffMs). */
  backoffFirstMs: number;
  backoffMaxMs: number;
  /** DEFAULT_GONE_AFTER_MS: a runner not heartbeated this long is gone (`runner-gone`). */
  goneAfterMs: number;
  /** NOTIFY_COMMAND_KILL_GRACE_MS (notify/command.ts): a command target's SIGTERM → SIGKILL. */
  commandKillGraceMs: number;
}

export const NOTIFIER_TIMINGS: Readonly<NotifierTimings> = {
  passMs: NOTIFY_INTERVAL_MS,
  evaluateMs: EVALUATE_INTERVAL_MS,
  claimMarginMs: CLAIM_MARGIN_MS,
  statementDeadlineMs: NOTIFY_STATEMENT_DEADLINE_MS,
  backoffFirstMs: BACKOFF_FIRST_MS,
  backoffMaxMs: BACKOFF_MAX_MS,
  goneAfterMs: DEFAULT_GONE_AFTER_MS,
  commandKillGraceMs: NOTIFY_COMMAND_KILL_GRACE_MS,
};

/** 1 s, 2 s, 4 s, … at most 5 min between tries, ±20 %. */
export function backoffMs(
  attempts: number,
  t: Pick<NotifierTimings, 'backoffFirstMs' | 'backoffMaxMs'> = NOTIFIER_TIMINGS,
): number {
  const base = Math.min(t.backoffFirstMs * 2 ** Math.max(0, attempts - 1), t.backoffMaxMs);
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

export type DeliverFn = (
  target: NotifyTarget,
  event: NotificationEvent,
  options: {
    env: EnvLookup;
    signal?: AbortSignal;
    withholdEnv?: readonly string[];
    targets?: Readonly<Record<string, NotifyTarget>>;
    killGraceMs?: number;
  },
) => Promise<DeliveryResult>;

export interface NotifierOptions {
  /** The runner's pool while it can coordinate; null while it cannot. */
  pool: () => DeadlinePool | null;
  database: string;
  namespace: string;
  host: string;
  /** The schedule now (a reload changes targets and jobs). */
  config: () => Config;
  deliver: DeliverFn;
  log: Logger;
  /** Each delivery's outcome, for the metrics. */
  onDelivery?: (target: string, outcome: DeliveryRecord['outcome']) => void;
  /**
   * Each pass of the loop, once it has ended (delivered what it claimed, or failed): whether it
   * evaluated the fleet events. What "nothing more was told" waits for, instead of a sleep.
   */
  onPass?: (pass: { evaluated: boolean }) => void;
  env?: EnvLookup;
  /** NOTIFIER_TIMINGS, or some of them replaced. */
  timings?: Partial<NotifierTimings>;
  /** Whether its sleeps hold the process (keep-alive.ts). */
  keepAlive?: KeepAlive;
}

export class Notifier {
  private readonly stopSignal = new AbortController();
  private loop: Promise<void> | null = null;
  private lastEvaluation = 0;
  /** When (this process's clock) the next blackout start or end is due: evaluate then. */
  private nextBlackoutEdge: number | null = null;
  /** Whether the pass under way evaluated the fleet events (for onPass). */
  private evaluatedInPass = false;
  /** Distinguishes this process's claims from any other's, even on the same host. */
  private readonly claimant: string;
  private readonly t: NotifierTimings;

  constructor(private readonly o: NotifierOptions) {
    this.t = { ...NOTIFIER_TIMINGS, ...o.timings };
    // claimed_by is as wide as a host name: the host gives way, the pid and token stay whole.
    this.claimant = hostWith(o.host, `#${process.pid}#${Math.random().toString(36).slice(2, 8)}`);
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopSignal.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    const signal = this.stopSignal.signal;
    while (!signal.aborted) {
      this.evaluatedInPass = false;
      try {
        await this.pass();
      } catch (err) {
        this.o.log.warn({ err: errorMessage(err) }, 'notifications: pass failed, trying again');
      }
      this.o.onPass?.({ evaluated: this.evaluatedInPass });
      await delay(this.t.passMs, signal, this.o.keepAlive).catch(() => {});
    }
  }

  /** One pass: probe, decide and claim under the lock, deliver outside it. */
  async pass(): Promise<number> {
    const pool = this.o.pool();
    const config = this.o.config();
    const targets = Object.keys(config.notifyTargets);
    if (!pool || targets.length === 0) return 0;
    const edgeDue = this.nextBlackoutEdge != null && Date.now() >= this.nextBlackoutEdge;
    const evaluationDue = Date.now() - this.lastEvaluation >= this.t.evaluateMs || edgeDue;
    // Blackout events are on by default: a namespace without a blackout to tell must not take
    // the notify lock for them at every evaluation — one lock-free look tells (store/blackouts.ts).
    let evaluate = evaluationDue && hasEvaluations(config);
    if (evaluationDue && !evaluate && watchesBlackouts(config)) {
      evaluate = await anyBlackoutSince(pool, this.o.namespace, BLACKOUT_NEWS_MS);
      if (!evaluate) this.lastEvaluation = Date.now();
    }
    if (!evaluate && !(await anythingDue(pool, this.o.namespace, targets))) return 0;
    const claimed = await this.underLock(pool, async (db) => {
      if (evaluate) {
        this.lastEvaluation = Date.now();
        await this.evaluate(db, config);
        this.evaluatedInPass = true;
      }
      return this.decideAndClaim(db, config, targets);
    });
    if (!claimed) return 0;
    for (const row of claimed) {
      if (this.stopSignal.signal.aborted) break;
      await this.deliverOne(pool, config, row);
    }
    return claimed.length;
  }

  /**
   * `work` on a connection of its own holding the notify lock; null when another runner holds
   * it. The lock is released on that connection, or the connection is destroyed (which frees it).
   */
  private async underLock<T>(
    pool: DeadlinePool,
    work: (db: Queryable) => Promise<T>,
  ): Promise<T | null> {
    const conn: PoolConnection = await pool.pool.getConnection();
    const db: Queryable = {
      query: (sql, values) =>
        queryWithDeadline(conn, sql, values ?? [], this.t.statementDeadlineMs),
    };
    const lock = notifyLockName(this.o.database, this.o.namespace);
    let clean = false;
    try {
      const [[row]] = await db.query<{ got: number | null }[]>('SELECT GET_LOCK(?, 0) AS got', [
        lock,
      ]);
      if (row?.got !== 1) {
        clean = true;
        return null;
      }
      const value = await work(db);
      await db.query('DO RELEASE_LOCK(?)', [lock]);
      clean = true;
      return value;
    } finally {
      if (clean) conn.release();
      else conn.destroy();
    }
  }

  /** Under the lock: the throttle's decisions, summaries, and the claim. */
  private async decideAndClaim(
    db: Queryable,
    config: Config,
    targets: readonly string[],
  ): Promise<NoticeRow[]> {
    const ns = this.o.namespace;
    const now = await databaseNow(db);
    // A dynamic schedule's subject (`<job>:<key>`) is throttled as its job says.
    const throttleOf = (subject: string) =>
      config.jobs.find((j) => j.name === jobOfSubject(subject))?.notify?.throttleMs ??
      DEFAULT_THROTTLE_MS;
    // The start of each (subject, target)'s window, as decided so far in this pass.
    const told = new Map<string, Date | null>();
    const lastTold = async (subject: string, target: string) => {
      const key = `${subject}\0${target}`;
      if (!told.has(key)) told.set(key, await lastToldFailure(db, ns, subject, target));
      return { key, at: told.get(key)! };
    };

    for (const g of await heldGroups(db, ns, targets)) {
      const { key, at } = await lastTold(g.subject, g.target);
      const throttle = throttleOf(g.subject);
      if (at && now.getTime() - at.getTime() < throttle) continue;
      const scope = { namespace: ns, subject: g.subject, fire: at ?? g.firstFire };
      const details = {
        count: g.count,
        since: (at ?? g.firstFire).toISOString(),
        firstFire: g.firstFire.toISOString(),
        lastFire: g.lastFire.toISOString(),
        events: g.events,
      };
      const summary: Notice = {
        ...scope,
        event: 'summary',
        targets: [g.target],
        runId: null,
        details,
        decided: true,
      };
      await enqueueNotices(db, [summary]);
      const id = await noticeId(db, { ...scope, event: 'summary', target: g.target });
      if (id != null) await foldHeld(db, ns, g.subject, g.target, g.maxId, id);
      told.set(key, now);
    }

    const due = await dueNotices(db, ns, targets, BATCH);
    const deliver: NoticeRow[] = [];
    for (const row of due) {
      if (row.decidedAt == null && FAILURE_EVENTS.includes(row.event)) {
        const { key, at } = await lastTold(row.subject, row.target);
        const throttle = throttleOf(row.subject);
        const held = throttle > 0 && at != null && now.getTime() - at.getTime() < throttle;
        await decide(db, row.id, held);
        if (held) continue;
        told.set(key, now);
      } else if (row.decidedAt == null && row.event === 'recovered') {
        // The failures held back since the last one told end with this recovery: it says so.
        const group = (await heldGroups(db, ns, [row.target])).find(
          (g) => g.subject === row.subject,
        );
        if (group) {
          const folded = await foldHeld(db, ns, row.subject, row.target, group.maxId, row.id);
          await mergeDetails(db, row.id, { folded });
          row.details = { ...(row.details ?? {}), folded };
        }
        await decide(db, row.id, false);
      } else if (row.decidedAt == null) {
        await decide(db, row.id, false);
      }
      deliver.push(row);
    }
    const claimMs = (row: NoticeRow) =>
      (config.notifyTargets[row.target]?.timeoutMs ?? DEFAULT_NOTIFY_TIMEOUT_MS) +
      this.t.claimMarginMs;
    const longest = Math.max(0, ...deliver.map(claimMs)) * Math.max(1, deliver.length);
    const ids = await claimNotices(
      db,
      deliver.map((r) => r.id),
      this.claimant,
      longest,
    );
    const mine = new Set(ids);
    return deliver.filter((r) => mine.has(r.id));
  }

  private async deliverOne(pool: DeadlinePool, config: Config, row: NoticeRow): Promise<void> {
    const target = config.notifyTargets[row.target];
    let record: DeliveryRecord;
    if (!target) {
      record = {
        outcome: 'retry',
        responseStatus: null,
        error: `target "${row.target}" is not in this runner's schedule (any more)`,
        retryInMs: backoffMs(row.attempts + 1, this.t),
      };
    } else {
      const event = await buildEvent(pool, this.o.namespace, row);
      const env = this.o.env ?? ((name: string) => process.env[name]);
      const result = await this.o.deliver(target, event, {
        env,
        signal: this.stopSignal.signal,
        withholdEnv: withheldVariables(config),
        targets: config.notifyTargets,
        killGraceMs: this.t.commandKillGraceMs,
      });
      record = toRecord(result, row.attempts + 1, this.t);
      const log = { target: row.target, event: row.event, job: row.subject, eventId: event.id };
      if (result.ok) this.o.log.info(log, 'notification sent');
      else this.o.log.warn({ ...log, error: result.error }, 'notification not delivered');
    }
    if (await recordDelivery(pool, row.id, this.claimant, record)) {
      this.o.onDelivery?.(row.target, record.outcome);
    }
  }

  /**
   * The events no verdict carries: a job silent past its `expect`, a job no live runner may run,
   * a runner gone or detached.
   */
  private async evaluate(db: Queryable, config: Config): Promise<void> {
    const ns = this.o.namespace;
    const now = await databaseNow(db);
    const notices: Notice[] = [];
    const watched = config.jobs.filter((j) => j.notify?.on.includes('no-success') && j.enabled);
    if (watched.length > 0) {
      const facts = await jobHistoryFacts(
        db,
        ns,
        watched.map((j) => j.name),
      );
      for (const job of watched) {
        const f = facts.get(job.name);
        const since = f?.lastSuccessAt ?? f?.firstSeenAt;
        if (!since) continue;
        // A child without a schedule of its own is expected at its parents' instants (one that
        // runs on their failures is not: config/dependencies.ts).
        const source = deadManSource(config.jobs, job.name);
        const schedule =
          source?.schedule != null ? safeSchedule(source.schedule, source.timezone) : null;
        const e = expectation({ expectMs: job.expectMs, schedule }, since);
        if (!e || now < e.overdueAt) continue;
        notices.push({
          namespace: ns,
          subject: job.name,
          // One episode per silence: it begins at the success (or first row) it is measured from.
          fire: since,
          event: 'no-success',
          targets: job.notify!.to,
          runId: null,
          details: {
            lastSuccessAt: f?.lastSuccessAt?.toISOString() ?? null,
            overdueAt: e.overdueAt.toISOString(),
            expectMs: e.expectMs,
          },
        });
      }
    }
    // A job no live runner may run (daemon/placement-watch.ts writes its fires' `missed` rows):
    // one event per episode, keyed by its first such fire after the job last ran.
    const unplaced = config.jobs.filter(
      (j) => j.enabled && j.runOn && j.notify?.on.includes('no-eligible-runner'),
    );
    for (const job of unplaced) {
      const episode = await unplacedEpisode(db, ns, job.name);
      // Episodes older than a week are history, not news (a target added since).
      if (!episode || now.getTime() - episode.scheduledAt.getTime() > 7 * 86_400_000) continue;
      notices.push({
        namespace: ns,
        subject: job.name,
        fire: episode.scheduledAt,
        event: 'no-eligible-runner',
        targets: job.notify!.to,
        runId: episode.runId,
        details: { reason: episode.reason },
      });
    }
    const targetsOf = (event: 'runner-gone' | 'detached') => [
      ...new Set(
        config.jobs.filter((j) => j.notify?.on.includes(event)).flatMap((j) => j.notify!.to),
      ),
    ];
    const [goneTargets, detachedTargets] = [targetsOf('runner-gone'), targetsOf('detached')];
    const fleet = goneTargets.length + detachedTargets.length > 0 ? await listRunners(db, ns) : [];
    if (detachedTargets.length > 0) {
      // A runner that holds its fires, detached from the fleet (daemon/fleet-watch.ts): told by
      // whoever delivers on its server — itself, on a server the rest of the fleet has left.
      for (const r of fleet) {
        if (!r.detached || runnerState(r, now, this.t.goneAfterMs) !== 'alive') continue;
        notices.push({
          namespace: ns,
          subject: r.host,
          fire: r.startedAt,
          event: 'detached',
          targets: detachedTargets,
          runId: null,
          details: { host: r.host, reason: r.detached },
        });
      }
    }
    if (goneTargets.length > 0) {
      for (const r of fleet) {
        if (runnerState(r, now, this.t.goneAfterMs) !== 'gone') continue;
        // Runners not seen for a week are history, not news.
        if (now.getTime() - r.lastSeenAt.getTime() > 7 * 86_400_000) continue;
        notices.push({
          namespace: ns,
          subject: r.host,
          // One episode per life of the runner: the start it registered.
          fire: r.startedAt,
          event: 'runner-gone',
          targets: goneTargets,
          runId: null,
          details: { host: r.host, lastSeenAt: r.lastSeenAt.toISOString() },
        });
      }
    }
    if (watchesBlackouts(config)) {
      // Those not over, and those over within the week (a start or an end not yet told).
      const since = new Date(now.getTime() - BLACKOUT_NEWS_MS);
      const blackouts = await listBlackouts(db, ns, { endedSince: since });
      const told = blackoutNotices(ns, config.jobs, blackouts, now);
      notices.push(...told.notices);
      // On this process's clock: the database's `now` was read a moment ago.
      this.nextBlackoutEdge = told.nextEdge
        ? Date.now() + (told.nextEdge.getTime() - now.getTime())
        : null;
    } else {
      this.nextBlackoutEdge = null;
    }
    const added = await enqueueNotices(db, notices);
    if (added > 0) this.o.log.info({ added }, 'notifications: fleet events recorded');
  }
}

/** Whether a job asks for an evaluation that needs the notify lock whatever the tables hold. */
function hasEvaluations(config: Config): boolean {
  return config.jobs.some((j) =>
    (['no-success', 'runner-gone', 'detached', 'no-eligible-runner'] as const).some((e) =>
      j.notify?.on.includes(e),
    ),
  );
}

/** Whether a job is told of blackouts (on by default: config/defaults.ts). */
function watchesBlackouts(config: Config): boolean {
  return config.jobs.some((j) => BLACKOUT_EVENTS.some((e) => j.notify?.on.includes(e)));
}

function safeSchedule(expression: string, timezone: string) {
  try {
    return parseSchedule(expression, timezone);
  } catch {
    return null;
  }
}

function toRecord(
  result: DeliveryResult,
  attempts: number,
  t: Pick<NotifierTimings, 'backoffFirstMs' | 'backoffMaxMs'>,
): DeliveryRecord {
  if (result.ok) return { outcome: 'sent', responseStatus: result.status };
  const unknown = result.outcomeUnknown ? ' (outcome unknown: it may have been received)' : '';
  if (!result.retryable || attempts >= MAX_ATTEMPTS) {
    return { outcome: 'failed', responseStatus: result.status, error: result.error + unknown };
  }
  return {
    outcome: 'retry',
    responseStatus: result.status,
    error: result.error + unknown,
    retryInMs: backoffMs(attempts, t),
  };
}
