/**
 * One fire end to end, forward only, the same for the daemon (scheduled and catch-up fires) and
 * for `baton run` (manual ones):
 *
 *   local overlap (local-runs.ts) → a contention place → contend (coordination/fire-protocol.ts)
 *     → the winner's part: the job's attempts, each in its own process, checked right before it
 *       starts that the lock session still vouches for it (and, for an operator's foreground
 *       fire, that no Ctrl-C came while the lock was taken), again on failure while `retries`
 *       allow
 *     → the verdict, written while the lock is still held → release the lock (`finally`)
 *
 * The verdict is written before the release, so that a runner arriving late for the same fire
 * meets the fire key (already ran), never a free lock and no row.
 *
 * One `Fire` holds one fire's state from the overlap to the release: the contention place it
 * holds while it contends, its run once started (in `LocalRuns` until the fire is over), and
 * `contended`, which settles once the run has started — when the contention place is given back
 * and a per-job chain may go on.
 *
 * The pipeline tells what happens through its events (`fire-events.ts`) and answers with a
 * `FireOutcome`; it calls nothing back in its caller. What the caller shares with it is passed
 * down: the runs this process has going (`LocalRuns`: the pipeline adds its run once started and
 * removes it when done, so a lost lock session can stop every one), the bound on contentions, and
 * where to keep a verdict the database cannot take yet.
 */
import type { DatabaseTarget } from '../config/database-url.js';
import { formatDuration } from '../config/duration.js';
import { eventTargets } from '../config/notify-targets.js';
import { retryWaitMs } from '../config/retry-delay.js';
import type { JobPool } from '../config/pools.js';
import type { JobDefinition, OverlapPolicy } from '../config/schema.js';
import {
  ClaimNotRecordedError,
  contend,
  type ContendOptions,
  type Contention,
  type FireContext,
} from '../coordination/fire-protocol.js';
import { ReadOnlyDatabaseError } from '../coordination/lock-session.js';
import * as skips from '../coordination/skip-reasons.js';
import { errorMessage } from '../errors.js';
import type { FireInfo } from '../execution/job-context.js';
import type { OutputSink } from '../execution/job-launch.js';
import { startJob, type JobResult } from '../execution/job-process.js';
import { plannedStart } from '../schedule/jitter.js';
import { hostSlot } from '../store/host-slots.js';
import { RELATIVE_WARN_RUNS, relativeWarnMs } from '../config/duration-limits.js';
import { recentDurations, setWarn } from '../store/duration-flags.js';
import type { NoticeScope } from '../store/notifications.js';
import {
  finishRun,
  recordAttempt,
  type RunLimits,
  type RunOutcome,
} from '../store/run-verdicts.js';
import type { Attempt } from '../store/runs.js';
import type { FireRef, NotAttemptedCause } from './fire-events.js';
import type { AttemptTrace, RunTrace } from './fire-trace.js';
import type { FireOptions, FireOutcome } from './fire-types.js';
import {
  localOverlap,
  takesContentionPlace,
  type LocalOverlap,
  type LocalRun,
} from './local-runs.js';
import { OutputLines } from './output-lines.js';
import { KILL_GRACE_MS, LOST_KILL_GRACE_MS, RunControl } from './run-control.js';
import { LIMIT_JUDGE_MARGIN_MS, SlowWatch } from './slow-watch.js';

export type { FireOptions, FireOutcome } from './fire-types.js';

/** A fire under way: `contended` settles once the run has started or the fire is over. */
export interface FireHandle {
  contended: Promise<void>;
  outcome: Promise<FireOutcome>;
  /**
   * This fire's own run, once it has started (by `contended`): its row's id; null while it has
   * not (or never will). Not another run of the same instant (a re-run's generation 0).
   */
  startedRunId(): number | null;
}

/**
 * Starts one fire. Its contention is over when `contended` settles (a per-job chain may go on to
 * the next fire then, while the run goes on); `outcome` settles when everything is done, and
 * rejects with what baton could not do (the database failed) once the events have told it.
 */
export function startFire(job: JobDefinition, scheduledAt: Date, o: FireOptions): FireHandle {
  const fire = new Fire(job, scheduledAt, o);
  return {
    contended: fire.contended,
    outcome: fire.run(),
    startedRunId: () => fire.startedRunId,
  };
}

type Ran = Extract<FireOutcome, { status: 'ran' }>;

/** What the winner's part works with: the fire won, and its run's handle. */
interface Win {
  ctx: FireContext;
  claim: Extract<Contention, { won: true }>;
  control: RunControl;
  /** The database a module job gets as `ctx.db`. */
  database: DatabaseTarget | null;
  /** When the fire was planned to start: its lag counts from then. */
  startAt: Date;
  /** How long the contention took; null for a queued fire (not a lock latency). */
  contendMs: number | null;
  /**
   * When the contention began (`performance.now()`, and this host's clock) and ended (this
   * host's clock): the row's `started_at` is between them, which is what the run's soft limits
   * are measured against here (slow-watch.ts).
   */
  claimFrom: number;
  claimFromWall: number;
  claimedWall: number;
  /** The run's span, when tracing is on. */
  trace: RunTrace | null;
}

/** One fire, from its local overlap to the lock given back (see the header). */
class Fire {
  /** Settles once the run has started or the fire is over. */
  readonly contended: Promise<void>;
  private settleContended!: () => void;
  private readonly ref: FireRef;
  /** Gives back the contention place while this fire holds one. */
  private place: (() => void) | null = null;
  /** The run once started, in `LocalRuns` until the fire is over. */
  private local: LocalRun | null = null;
  /** This runner's attempt span, once the fire's namespace is known (tracing on). */
  private trace: AttemptTrace | null = null;

  /** The run's id once it has started (see FireHandle). */
  get startedRunId(): number | null {
    return this.local?.control.runId ?? null;
  }
  private startedAt = 0;
  /** Settles `whenFinished`, which `LocalRuns` (a queued next fire, a lost session) waits on. */
  private finished!: () => void;
  private readonly whenFinished: Promise<void>;

  constructor(
    private readonly job: JobDefinition,
    private readonly scheduledAt: Date,
    private readonly o: FireOptions,
  ) {
    this.ref = { job: job.name, scheduledAt, trigger: o.trigger };
    this.contended = new Promise<void>((resolve) => (this.settleContended = resolve));
    this.whenFinished = new Promise<void>((resolve) => (this.finished = resolve));
  }

  run(): Promise<FireOutcome> {
    return this.fire().finally(this.settleContended);
  }

  private get stopping(): boolean {
    return this.o.signal?.aborted === true;
  }

  private notAttempted(cause: NotAttemptedCause, error?: string): FireOutcome {
    this.trace?.notAttempted(cause, error);
    this.o.events?.emit('fire:notAttempted', {
      fire: this.ref,
      cause,
      ...(error != null ? { error } : {}),
    });
    return { status: 'not-attempted', cause };
  }

  private releasePlace(): void {
    const place = this.place;
    this.place = null;
    place?.();
  }

  private async fire(): Promise<FireOutcome> {
    const { job, o, scheduledAt } = this;
    const begun = new Date();
    if (this.stopping) return { status: 'stopped' };
    // Nobody can prove it is alone without a lock session: not running is the safe side.
    let c = o.context();
    if (!c) return this.notAttempted('no-session');

    const policy = o.overlap ?? 'skip';
    const overlap = await localOverlap(job.name, policy, scheduledAt, {
      runs: o.runs,
      schedule: o.schedule ?? null,
      now: () => c!.now?.() ?? new Date(),
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.timings?.bookkeepingWaitMaxMs
        ? { bookkeepingWaitMaxMs: o.timings.bookkeepingWaitMaxMs }
        : {}),
    });
    if (this.stopping) return { status: 'stopped' };
    let database: DatabaseTarget | null;
    try {
      database = o.database?.() ?? null;
    } catch (err) {
      return this.notAttempted('job-database', errorMessage(err));
    }
    // The place is held while the fire contends, not while its run goes on — nor while it waits
    // for a slot of its pool (`poolFull: queue`), which may be until the job's next fire.
    const waitsForPool = job.pool?.full === 'queue';
    this.place =
      o.places && takesContentionPlace(policy) && !waitsForPool ? await o.places.acquire() : null;
    try {
      if (this.stopping) return { status: 'stopped' };
      // Taken again only now: a queued fire, or one that waited for its place, may have waited
      // across a reconnect.
      c = o.context();
      if (!c) return this.notAttempted('no-session');
      const ctx = c;
      // Begun now that the fire's namespace is known, dated from when this runner took it up.
      this.trace =
        o.tracer?.attempt(
          { namespace: ctx.namespace, job: job.name, scheduledAt, generation: o.rerun ?? 0 },
          { trigger: o.trigger, host: ctx.host, startedAt: begun },
        ) ?? null;
      // A scheduled fire of a job with jitter is meant to start after its instant: its lag and
      // staleness count from then (manual runs and catch-ups start when asked).
      const startAt =
        o.trigger === 'schedule'
          ? plannedStart(ctx.namespace, job.name, scheduledAt, job.jitterMs)
          : scheduledAt;
      const attempt: Attempt = {
        namespace: ctx.namespace,
        job: job.name,
        scheduledAt,
        startAt,
        trigger: o.trigger,
        host: ctx.host,
        pid: ctx.pid,
        ...(o.rerun ? { rerun: o.rerun } : {}),
        ...(o.unlessDone ? { unlessDone: true } : {}),
        ...(o.params?.recorded ? { params: o.params.recorded } : {}),
        ...(o.chain ? { chain: o.chain } : {}),
        ...(job.duration?.warn?.kind === 'fixed' ? { warnMs: job.duration.warn.ms } : {}),
        ...(o.timingVersion != null ? { timingVersion: o.timingVersion } : {}),
        ...(o.dynamic ? { dynamic: o.dynamic } : {}),
      };
      const contendStart = performance.now();
      const claimFromWall = Date.now();
      const claim = await this.tryWin(ctx, attempt, policy, overlap);
      const contendMs = performance.now() - contendStart;
      const claimedWall = Date.now();
      this.trace?.contended(new Date(claimFromWall), new Date(claimedWall), claim.won);
      // A queued fire's contention includes its wait for the previous run: not a lock latency.
      const measured = policy === 'queue' ? null : contendMs;
      if (!claim.won) {
        // Refused by the claim's fence (a stale read of the job's schedule): no row, and the
        // fire is forgotten here, so that a read of the schedule in force may send it again.
        if (claim.stale) return this.notAttempted('stale-schedule', claim.reason);
        const { runId, kind, reason } = claim;
        this.trace?.skipped(kind, reason);
        o.events?.emit('fire:skipped', {
          fire: this.ref,
          runId,
          kind,
          reason,
          contendMs: measured,
        });
        return { status: 'skipped', runId, kind, reason, contendMs };
      }
      const control = new RunControl(claim.runId, scheduledAt);
      return await this.win({
        ctx,
        claim,
        control,
        database,
        startAt,
        contendMs: measured,
        claimFrom: contendStart,
        claimFromWall,
        claimedWall,
        trace: this.trace?.won(claim.runId, claim.slot, claim.rerun) ?? null,
      });
    } finally {
      this.releasePlace();
      if (this.local) o.runs.delete(this.local);
      this.finished();
      this.trace?.end();
    }
  }

  /**
   * Contends (coordination/fire-protocol.ts). A contention that throws is told, and a claim the
   * database did not take is kept for the backlog before the error goes on up.
   */
  private async tryWin(
    ctx: FireContext,
    attempt: Attempt,
    policy: OverlapPolicy,
    { runningHere, queueUntil }: LocalOverlap,
  ): Promise<Contention> {
    const { job, o } = this;
    try {
      // An `every` job's fire is this runner's own to run, in its host's slot for good: a
      // restart claims the same slot and meets its own row (store/host-slots.ts).
      const slot = job.every ? await hostSlot(ctx.pool, ctx.namespace, ctx.host) : null;
      const pool = job.pool ? this.poolWait(ctx, job.pool) : null;
      // A run of the pool that outlives the session it took its slot on (lost: being stopped) is
      // one the server no longer counts: no slot of that pool here until it is gone.
      const stopping = job.pool
        ? o.runs.outlivingItsSlot(job.pool.name, (name) => ctx.lock.holds(name))
        : undefined;
      return await contend(ctx, attempt, {
        overlap: policy,
        runningHere,
        queueUntil,
        workers: job.workers,
        ...(slot != null ? { slot } : {}),
        skips: job.skips,
        ...(job.notify ? { eventTargets: eventTargets(job.notify) } : {}),
        ...(o.waitSeconds != null ? { waitSeconds: o.waitSeconds } : {}),
        ...(o.pauseCheck != null ? { pauseCheck: o.pauseCheck } : {}),
        ...(o.afterLead ? { afterLead: true } : {}),
        ...(o.signal ? { signal: o.signal } : {}),
        ...(pool ? { pool } : {}),
        ...(stopping
          ? { heldBack: skips.poolSlotLost(job.pool!.name, ctx.host, stopping.job) }
          : {}),
      });
    } catch (thrown) {
      // A claim not recorded carries what the backlog needs; what went wrong is its cause (a
      // command maps that to its exit code).
      const unrecorded = thrown instanceof ClaimNotRecordedError ? thrown : null;
      const err = unrecorded ? unrecorded.cause : thrown;
      if (err instanceof ReadOnlyDatabaseError) this.notAttempted('read-only');
      // The session died while this fire was contended: like a fire that found no session.
      else if (!ctx.lock.usable) this.notAttempted('session-lost', errorMessage(err));
      else {
        this.notAttempted('error', errorMessage(err));
        // Its lock session up, nothing else would ever record this fire: recorded `missed`
        // once the database takes it. (A lost session's fires are the look-back's, after the
        // reconnect: caught up, or missed.)
        if (unrecorded) {
          o.verdicts?.keepUnrecordedFire({
            ...unrecorded.claim,
            reason: unrecorded.reason(ctx.host),
            ...(job.notify ? { targets: eventTargets(job.notify) } : {}),
          });
        }
      }
      throw err;
    }
  }

  /**
   * How long a fire may wait for a slot of its pool, in database time: with `poolFull: queue`,
   * until the job's next fire (a manual run has no schedule here: it does not queue);
   * `baton run --wait N` waits N seconds whatever the policy. `until` null: not at all (a full
   * pool skips the fire). `current`: the job's pool as loaded now (a reload may change it while
   * the fire waits).
   */
  private poolWait(ctx: FireContext, pool: JobPool): NonNullable<ContendOptions['pool']> {
    const { o, scheduledAt } = this;
    const current = o.currentPool ? { current: o.currentPool } : {};
    const now = ctx.now?.() ?? new Date();
    if ((o.waitSeconds ?? 0) > 0) {
      const until = new Date(now.getTime() + o.waitSeconds! * 1000);
      return { pool, until, waitFor: 'operator', ...current };
    }
    const until = pool.full === 'queue' ? (o.schedule?.nextAfter(scheduledAt) ?? null) : null;
    return { pool, until, waitFor: 'next-fire', ...current };
  }

  /** The winner's part, told: `run:finished`, or what kept the run from completing. */
  private async win(w: Win): Promise<Ran> {
    let outcome: Ran;
    try {
      outcome = await this.attemptAndRecord(w);
    } catch (err) {
      const error = errorMessage(err);
      if (this.local)
        this.o.events?.emit('run:notCompleted', { fire: this.ref, runId: w.claim.runId, error });
      // Not started: like a contention that failed (the session may have died meanwhile).
      else this.notAttempted(w.ctx.lock.usable ? 'error' : 'session-lost', error);
      throw err;
    }
    const { result } = outcome;
    this.o.events?.emit('run:finished', {
      fire: this.ref,
      runId: outcome.runId,
      status: result.status,
      exitCode: result.exitCode,
      attempts: outcome.attempts,
      error: result.error,
      durationMs: this.startedAt ? performance.now() - this.startedAt : 0,
    });
    return outcome;
  }

  /** The attempts, the verdict, and the lock given back in `finally`. */
  private async attemptAndRecord(w: Win): Promise<Ran> {
    const { ctx: c, claim, control } = w;
    const { job, o, ref } = this;
    // The children this run's verdict tells, whichever verdict it is (docs/dependencies.md).
    const dependents =
      o.dependents && o.dependents.plans.length > 0
        ? {
            namespace: c.namespace,
            scheduledAt: ref.scheduledAt,
            plans: o.dependents.plans,
            parentJob: job.name,
            leadMs: o.dependents.leadMs,
          }
        : undefined;
    const slowWatch = this.watchSlow(w);
    let ran: Parameters<RunTrace['end']>[0] = null;
    try {
      const fire: FireInfo = {
        job: job.name,
        runId: claim.runId,
        // The fence is the run id (coordination/fire-protocol.ts, "Fencing").
        fence: claim.runId,
        scheduledAt: ref.scheduledAt,
        trigger: ref.trigger,
        host: c.host,
        attempt: 1,
        // An `every` run is not a share of a fan-out: its host slot means nothing to the job.
        worker: job.every ? { slot: 1, count: 1 } : { slot: claim.slot, count: job.workers },
        ...(o.params ? { params: o.params.given } : {}),
        ...(w.trace ? { trace: w.trace.context } : {}),
      };
      const { result, attempts } = await this.attemptRuns(w, fire);
      ran = { status: result.status, attempts, error: result.error };
      // From here on the run is bookkeeping only: the next fire may wait for it (local-runs.ts).
      control.markProcessesEnded();
      slowWatch?.stop();
      const outcome: RunOutcome = {
        status: result.status,
        exitCode: result.exitCode,
        error:
          attempts > 1 && result.error ? `${result.error} (attempt ${attempts})` : result.error,
        outputTail: result.outputTail,
      };
      if (job.notify) {
        outcome.notices = { scope: this.noticeScope(w), targets: eventTargets(job.notify) };
      }
      if (dependents) outcome.dependents = dependents;
      const limits = this.limitsToJudge(w, slowWatch, result);
      if (limits) outcome.limits = limits;
      // `finished_at` says when the run ended, in database time — not when the verdict reached
      // the database, which can be much later (a lost run written after reconnecting, a verdict
      // kept through a pool outage) or first by another runner.
      const endedAt = c.lock.toDatabaseTime(result.endedAt);
      if (endedAt) outcome.finishedAt = endedAt;
      // A run that reads finished has all its output in (`baton logs --follow` stops there).
      await o.output?.settle(claim.runId);
      let recorded = false;
      const verdictFrom = new Date();
      const notifies = outcome.notices != null;
      try {
        recorded = await finishRun(c.pool, claim.runId, outcome);
        w.trace?.verdict(verdictFrom, new Date(), 'recorded', notifies);
      } catch (err) {
        w.trace?.verdict(verdictFrom, new Date(), o.verdicts ? 'kept' : 'failed', notifies);
        if (!o.verdicts) throw err;
        o.verdicts.keep(claim.runId, outcome);
        o.events?.emit('verdict:kept', { fire: ref, runId: claim.runId, status: outcome.status });
      }
      const written = recorded ? outcome.dependents?.written : undefined;
      return {
        status: 'ran',
        runId: claim.runId,
        result,
        attempts,
        recorded,
        ...(written ? { dependents: written } : {}),
      };
    } catch (err) {
      // The job could not be started or its verdict not written; leave no row `running` if the
      // database still answers.
      await finishRun(c.pool, claim.runId, {
        status: 'failed',
        exitCode: null,
        error: `baton could not complete the run: ${errorMessage(err)}`,
        outputTail: null,
        ...(dependents ? { dependents } : {}),
      }).catch(() => {});
      throw err;
    } finally {
      slowWatch?.stop();
      o.output?.forget(claim.runId);
      // The pool's slot with the job's lock: both after the verdict, in one statement.
      const held = [claim.lockName, claim.poolLock].filter((n): n is string => n != null);
      if (c.lock.usable) await Promise.all(held.map((n) => c.lock.release(n).catch(() => {})));
      w.trace?.end(ran);
    }
  }

  /** What the run's events are about: its fire, worker slot and generation. */
  private noticeScope(w: Win): NoticeScope {
    return {
      namespace: w.ctx.namespace,
      subject: this.job.name,
      fire: this.ref.scheduledAt,
      slot: w.claim.slot,
      rerun: w.claim.rerun,
    };
  }

  /**
   * The run's own watch for `slow` (slow-watch.ts), for a job with `duration.warn`. A fixed warn
   * is on the row since the claim; a relative one (`p95x3`) is computed now from the job's latest
   * successful runs — one indexed read, by the winner only, beside the run's start — and set on
   * the row. A read that fails leaves this run without a warn (nothing else depends on it).
   */
  private watchSlow(w: Win): SlowWatch | null {
    const warn = this.job.duration?.warn;
    if (!warn) return null;
    const { ctx: c, claim } = w;
    const targets = this.job.notify ? eventTargets(this.job.notify).slow : undefined;
    const told = targets?.length ? { scope: this.noticeScope(w), targets } : undefined;
    const watch = new SlowWatch(c.pool, claim.runId, told, w.claimFrom, w.claimFromWall);
    if (warn.kind === 'fixed') {
      watch.arm(warn.ms);
    } else {
      recentDurations(c.pool, c.namespace, this.job.name, RELATIVE_WARN_RUNS).then(
        (durations) => {
          const ms = relativeWarnMs(warn, durations);
          if (ms != null) watch.arm(ms, setWarn(c.pool, claim.runId, ms));
        },
        () => {},
      );
    }
    return watch;
  }

  /**
   * Which of the run's soft limits its verdict must judge (RunOutcome.limits): `slow` when it may
   * have ended past its warn unflagged; `min` when it succeeded and may be shorter than that (by
   * this runner's measure, within LIMIT_JUDGE_MARGIN_MS: the database judges by the row's times).
   * Undefined when neither: the verdict goes alone.
   */
  private limitsToJudge(w: Win, watch: SlowWatch | null, result: JobResult): RunLimits | undefined {
    const limits: RunLimits = {};
    if (watch?.verdictJudges(result.endedAt)) limits.slow = true;
    const minMs = this.job.duration?.minMs ?? null;
    const ranAtLeast = result.endedAt.getTime() - w.claimedWall;
    if (minMs != null && result.status === 'done' && ranAtLeast < minMs + LIMIT_JUDGE_MARGIN_MS) {
      limits.minMs = minMs;
    }
    return limits.slow || limits.minMs != null ? limits : undefined;
  }

  /**
   * The run has started (its first attempt's process, pid known): it joins `LocalRuns`, `fire:won`
   * is told, and the contention is over — its place given back, `contended` settled.
   */
  private started(w: Win): void {
    const { ctx, claim, control } = w;
    const o = this.o;
    const pool = this.job.pool;
    this.local = {
      job: this.job.name,
      scheduledAt: this.scheduledAt,
      control,
      finished: this.whenFinished,
      ...(pool && claim.poolLock
        ? { poolSlot: { pool: pool.name, lockName: claim.poolLock } }
        : {}),
    };
    o.runs.add(this.local);
    this.startedAt = performance.now();
    const lagMs =
      o.trigger === 'schedule' ? (ctx.now?.() ?? new Date()).getTime() - w.startAt.getTime() : null;
    o.events?.emit('fire:won', {
      fire: this.ref,
      runId: claim.runId,
      jobPid: control.pid,
      contendMs: w.contendMs,
      lagMs,
    });
    // The session may have died between GET_LOCK and now (the claim runs on the pool): whoever
    // stopped the runs of the lost session did not see this one, so it is aborted here.
    if (!ctx.lock.usable) {
      control.stop(
        `lost: the runner's lock session ended while the run was being claimed ` +
          `(${ctx.lock.lossReason ?? 'replaced'})`,
        o.timings?.lostKillGraceMs ?? LOST_KILL_GRACE_MS,
        'lost',
      );
    }
    // A fire won while a stop begins is waited for like any other run: the daemon lets
    // contention settle before it decides what to wait for and what to stop.
    this.releasePlace();
    this.settleContended();
  }

  private async attemptRuns(
    w: Win,
    fire: FireInfo,
  ): Promise<{ result: JobResult; attempts: number }> {
    const { ctx: c, control, database } = w;
    const { job, o } = this;
    const killGraceMs = o.timings?.killGraceMs ?? KILL_GRACE_MS;
    for (let attempt = 1; ; attempt++) {
      if (attempt > 1) await recordAttempt(c.pool, fire.runId, attempt);
      // Checked right before each spawn, not only once the process exists: a session lost while
      // the fire was being claimed, or before a retry, starts nothing.
      const cannotStart = whyNotStart(c, o, attempt);
      if (cannotStart) return { result: cannotStart, attempts: attempt };
      const processFrom = new Date();
      const run = startJob(
        job,
        { ...fire, attempt },
        {
          tee: o.tee ?? false,
          database,
          batonDatabase: c.database,
          withholdEnv: o.withholdEnv ?? [],
          lease: o.lease,
          secrets: o.secrets,
          output: this.outputSink(c, fire, attempt),
          launchers: o.launchers,
        },
      );
      // The spawner reports the job's pid a moment later; the run is "started" with its pid known.
      await run.started;
      control.attach(run);
      if (attempt === 1) this.started(w);
      // A timeout ends this attempt only (a retry may follow), so it stops the attempt directly
      // rather than through `control`, whose stop is for good.
      const timer =
        job.timeoutMs != null
          ? setTimeout(() => {
              const limit = formatDuration(job.timeoutMs!);
              void run.stop(`timeout: the run took longer than ${limit}`, killGraceMs, 'timeout');
            }, job.timeoutMs)
          : undefined;
      let result: JobResult;
      try {
        result = await run.result;
      } finally {
        clearTimeout(timer);
      }
      w.trace?.processRan(attempt, processFrom, result);
      if (control.stopRequested || !retryable(result) || attempt > job.retries) {
        return { result, attempts: attempt };
      }
      // The same wait on every runner (config/retry-delay.ts): fixed, or a backoff's k-th.
      const waitMs = retryWaitMs(c.namespace, job, fire.scheduledAt, attempt + 1);
      w.trace?.retryWait(attempt + 1, waitMs);
      await control.waitBeforeRetry(waitMs);
      if (control.stopRequested)
        return { result: control.stoppedResult(result), attempts: attempt };
    }
  }

  /**
   * Where an attempt's output goes: the history (fire/output-writer.ts) and, with `output: {log:
   * true}`, the runner's log line by line (fire/output-lines.ts). None with `output: {max: 0}`.
   */
  private outputSink(c: FireContext, fire: FireInfo, attempt: number): OutputSink | undefined {
    const { job, o } = this;
    if (!o.output || job.outputMaxBytes === 0) return undefined;
    const stored = o.output.sink(
      c.pool,
      { runId: fire.runId, namespace: c.namespace, attempt },
      job.outputMaxBytes,
    );
    if (!job.outputLog || !o.events) return stored;
    const events = o.events;
    const lines = new OutputLines();
    const ref = this.ref;
    return {
      maxBytes: stored.maxBytes,
      deliver(chunks, final) {
        stored.deliver(chunks, final);
        const out = [...lines.push(chunks), ...(final ? lines.end() : [])];
        if (out.length > 0)
          events.emit('run:output', { fire: ref, runId: fire.runId, attempt, lines: out });
      },
    };
  }
}

/**
 * Why the job must not be started now, if it must not, as the run's result: its lock session is
 * gone, so its lock keeps nobody out any more (`lost`); or, before the first attempt, the fire's
 * owner was asked to stop while the lock was being taken (`interrupted`: interruptBeforeStart).
 * (The runs' lease is the spawner's and the watchdogs' to enforce: a runner that is checking is
 * running, and its own lateness is no news about the session.)
 */
function whyNotStart(c: FireContext, o: FireOptions, attempt: number): JobResult | null {
  if (!c.lock.usable) {
    const why = `the runner's lock session ended before the job was started (${c.lock.lossReason ?? 'replaced'})`;
    return notStarted('lost', why);
  }
  const interrupted = attempt === 1 ? (o.interruptBeforeStart?.() ?? null) : null;
  return interrupted ? notStarted('interrupted', interrupted) : null;
}

function notStarted(status: 'lost' | 'interrupted', why: string): JobResult {
  return {
    status,
    exitCode: null,
    signal: null,
    error: `${status}: not started: ${why}`,
    outputTail: '',
    endedAt: new Date(),
  };
}

/** Whether a result is worth another attempt: the job's own failure, not a stop by the runner. */
function retryable(result: JobResult): boolean {
  // A handler that ignored its timeout may still be going: a retry would run the fire twice.
  return !result.mayStillRun && (result.status === 'failed' || result.status === 'timeout');
}
