/**
 * From due fires to contentions: the runner's loop hands each wake's due fires here, recovery
 * its catch-up fires. Each goes down the fire pipeline (fire/run-fire.ts).
 *
 * Fires of one job are contended one after another (a per-job chain), never concurrently: two
 * GET_LOCKs for the same name on one session would nest instead of excluding each other. The
 * chain moves on once a fire's contention is settled — its run may go on, and the next fire of
 * the job then meets it through the overlap policy (fire/local-runs.ts).
 */
import { jobDatabase, outputSecrets, withheldVariables } from '../config/connections.js';
import type { DatabaseTarget } from '../config/database-url.js';
import type { Config, JobDefinition } from '../config/schema.js';
import type { FireContext } from '../coordination/fire-protocol.js';
import { Limiter } from '../fire/limiter.js';
import type { LocalRuns } from '../fire/local-runs.js';
import type { OutputWriter } from '../fire/output-writer.js';
import type { RunTimings } from '../fire/run-timings.js';
import type { RunLease } from '../execution/run-lease.js';
import type { Launchers } from '../execution/job-process.js';
import { startFire, type FireOptions, type FireOutcome } from '../fire/run-fire.js';
import {
  manualStartOf,
  type ManualStart,
  type OperatorFire,
  type OperatorFireHandle,
} from '../fire/operator-fire.js';
import type { VerdictBacklog } from '../fire/verdict-backlog.js';
import type { Trigger } from '../run-status.js';
import type { Schedule } from '../schedule/cron.js';
import type { DueFire, Wake } from '../schedule/fire-schedule.js';
import type { SwitchedSchedule } from '../schedule/timing-switch.js';
import type { RunnerEvents } from './runner-events.js';
import { HOLDS_PROCESS, type KeepAlive } from '../keep-alive.js';
import { FIRST_ASKER_LEAD_MS, firstAsker } from '../coordination/first-asker.js';
import { preferredAsker } from '../config/placement.js';
import * as skips from '../coordination/skip-reasons.js';
import { SentFires, type FireSettled, type SentFire } from './sent-fires.js';
import { childrenOf, instantSource } from '../config/dependencies.js';
import { parseSchedule } from '../schedule/cron.js';
import { planDependents, scheduledDependents, type ChildContention } from '../fire/dependents.js';
import type { DependentKey, DependentPlan } from '../store/dependent-fires.js';
import type { Attempt, ChainFence } from '../store/runs.js';
import { splitSubject } from '../schedule-keys.js';
import type { FireTracer } from '../fire/fire-trace.js';
import { DispatchQueue } from './dispatch-queue.js';

/** A wake's fire in the dispatch queue: the view it was due by (null: the one in force then). */
interface WokenFire {
  job: string;
  fire: DueFire;
  afterLead: boolean;
  view: Loaded | null;
}

/**
 * Fires contended at once (the rest wait their turn). Their lock statements and most of their
 * reads and writes are batched per turn of the event loop (store/batcher.ts), so a whole
 * instant's fires contend together without queueing hundreds of statements before a heartbeat.
 */
const MAX_CONTENTIONS = 1_000;
/** A wake this late is worth a warning: the event loop or the host was stalled. */
const LATE_WAKE_WARN_MS = 1_000;

/** The dispatcher's windows; the runner sets them (timings.ts). */
export interface DispatcherTimings {
  /** FIRST_ASKER_LEAD_MS (coordination/first-asker.ts): the others contend this much later. */
  firstAskerLeadMs: number;
  /** LATE_WAKE_WARN_MS: a wake this late emits `loop:lateWake`. */
  lateWakeWarnMs: number;
}

export const DISPATCHER_TIMINGS: Readonly<DispatcherTimings> = {
  firstAskerLeadMs: FIRST_ASKER_LEAD_MS,
  lateWakeWarnMs: LATE_WAKE_WARN_MS,
};

/** The loaded schedule, as the dispatcher reads it at each fire (a reload replaces it). */
export interface Loaded {
  config: Config;
  jobs: ReadonlyMap<string, JobDefinition>;
  schedules: ReadonlyMap<string, Schedule>;
  /**
   * The parameters of the schedules created at run time (dynamic-schedules.ts), by subject: given
   * to each of its fires but an operator's, and recorded on their rows.
   */
  params?: ReadonlyMap<string, NonNullable<FireOptions['params']>>;
  /**
   * The namespace's revision of the schedules created at run time that `jobs` and `schedules`
   * hold every change up to (dynamic-schedules.ts): a claim fenced by a subject's row passes at
   * once while the revision has not moved (store/fire-writes.ts `definitionFence`).
   */
  schedulesRevision?: () => number;
}

export interface DispatcherOptions {
  target: DatabaseTarget;
  loaded: () => Loaded;
  /** This runner's handles for a fire; null while it cannot coordinate. */
  context: () => FireContext | null;
  runs: LocalRuns;
  verdicts: VerdictBacklog;
  /** The lease the runs go on under (execution/run-lease.ts). */
  lease: RunLease;
  /** Where the runs' output is written as it comes (fire/output-writer.ts). */
  output: OutputWriter;
  /** Where the jobs' processes come from: this runner's spawner and warm hosts. */
  launchers: Launchers;
  events: RunnerEvents;
  signal: AbortSignal;
  /** This runner's host id: whether it asks first for a fire (coordination/first-asker.ts). */
  host: string;
  /** The other live runners that run `job`, at the last look at the registry (fleet-watch.ts). */
  companionsRunning?: (job: string) => readonly string[];
  /** DISPATCHER_TIMINGS when not given. */
  timings?: DispatcherTimings;
  /** How the runs are stopped (fire/run-control.ts: RUN_TIMINGS when not given). */
  runTimings?: RunTimings;
  /** Whether its timers hold the process, and what holds it anyway (keep-alive.ts). */
  keepAlive?: KeepAlive;
  /** Where the fires are traced; null or absent: tracing is off. */
  tracer?: () => FireTracer | null;
  /**
   * The children of its jobs (`after:`): how long the other runners leave a verdict's children
   * to this one, and who judges them at once once the verdict is written (dependent-watch.ts).
   */
  dependents?: {
    leadMs: number;
    judge: (scheduledAt: Date, plans: readonly DependentPlan[]) => void;
  };
}

export class Dispatcher {
  private readonly places = new Limiter(MAX_CONTENTIONS);
  private readonly chains = new Map<string, Promise<void>>();
  /** Per job, the contentions in its chain not yet settled. */
  private readonly contending = new Map<string, number>();
  /** A wake's fires waiting for their turn to be dispatched (a storm's, a slice per turn). */
  private readonly ready: DispatchQueue<WokenFire>;
  /** Every fire not yet finished, contended or running. */
  private readonly inflight = new Set<Promise<unknown>>();
  /** The fires sent lately: one contention per fire on this runner (./sent-fires.ts). */
  private readonly sent = new SentFires();

  private readonly t: DispatcherTimings;

  constructor(private readonly o: DispatcherOptions) {
    this.t = o.timings ?? DISPATCHER_TIMINGS;
    this.ready = new DispatchQueue<WokenFire>(
      (w) => void this.dispatch(w.fire, 'schedule', w.afterLead, w.view ?? this.o.loaded()),
      o.signal,
    );
  }

  /** Forgets the fires sent so far (a failover: their rows may be gone with the old primary). */
  forgetSent(): void {
    this.sent.forget();
  }

  /** One wake's fires: the late ones reported, the due ones dispatched. */
  dispatchWake({ due, missed }: Wake): void {
    for (const m of missed) {
      this.o.events.emit('loop:missedFires', {
        job: m.job,
        firstMissed: m.first,
        resumedAt: m.resumedAt,
      });
    }
    // Each fire's first asker contends at once, the others after its lead and looking for its
    // winner first (coordination/first-asker.ts): an instant's fires are spread over the fleet.
    // Fires of the same instant in an order of this runner's own: runners that cannot tell who
    // asks first (a fleet not seen yet) then mostly contend for different jobs first.
    const groups = groupByLead(shuffleWithinInstant(due), (fire) => this.leadOf(fire));
    // The fires due now go out by the view they were due by: a reload or a schedule change
    // dispatches what is due (`wakeNow`) and swaps the view in the same turn, and most of a
    // storm's fires are dispatched turns later (dispatch-queue.ts). The fires after a lead are
    // judged by the view in force when it has passed, as they always were.
    const view = this.o.loaded();
    for (const { leadMs, fires } of groups) {
      if (leadMs === 0) {
        this.ready.push(fires.map((fire) => ({ job: fire.job, fire, afterLead: false, view })));
        continue;
      }
      (this.o.keepAlive ?? HOLDS_PROCESS).background(
        setTimeout(() => {
          this.ready.push(
            fires.map((fire) => ({ job: fire.job, fire, afterLead: true, view: null })),
          );
        }, leadMs),
      );
    }
  }

  /**
   * How long after its instant this runner contends for `fire`: 0 when it asks first — it is
   * the fire's first asker among the runners that run the job, or the fire is one every runner
   * takes at once (a fan-out job's slots, a job that runs on every runner) — else the lead it
   * leaves the first asker. A job with `prefer` is asked first for by its first preferred runner
   * alive, the others waiting its own lead (config/placement.ts); with none of them alive, as
   * any job.
   */
  private leadOf(fire: DueFire): number {
    const job = this.o.loaded().jobs.get(fire.job);
    if (!job || job.workers > 1 || job.every || !this.o.companionsRunning) return 0;
    const hosts = [this.o.host, ...this.o.companionsRunning(fire.job)];
    const preferred = job.prefer ? preferredAsker(job.prefer, hosts) : null;
    if (preferred != null) return preferred === this.o.host ? 0 : job.prefer!.leadMs;
    if (hosts.length === 1 || firstAsker(hosts, fire.job, fire.scheduledAt) === this.o.host) {
      return 0;
    }
    return this.t.firstAskerLeadMs;
  }

  /**
   * Sends one fire down its job's chain. The promise settles with the fire's outcome once it is
   * over, run included (null: the job is gone, or the runner stopped first) — the catch-up of
   * every missed fire waits for it before the next (daemon/catch-up.ts); the loop does not.
   */
  dispatch(
    fire: DueFire,
    trigger: Trigger,
    afterLead = false,
    view: Loaded = this.o.loaded(),
  ): Promise<FireOutcome | null> {
    const { jobs, schedules } = view;
    const job = jobs.get(fire.job);
    if (!job) return Promise.resolve(null);
    // A fire of a schedule this runner no longer fires by: taken from the loop's schedule before
    // the versions were read again (a runner that was paused across a switch wakes with its old
    // fires due), or a change of a schedule created at run time. The schedule in force now
    // decides; a held stretch has no fires at all.
    const schedule = schedules.get(job.name);
    if (schedule && !isFireOf(schedule, fire.scheduledAt)) {
      this.o.events.emit('fire:notInForce', { job: job.name, scheduledAt: fire.scheduledAt });
      // Told as a skip without a row: a catch-up walk goes on to its next fire.
      const { kind, text } = skips.notAFireInForce();
      return Promise.resolve({ status: 'skipped', runId: null, kind, reason: text, contendMs: 0 });
    }
    // What fences its claim, read now from the same view as the job and the check above: a
    // change applied before the contention begins (it may wait its turn on the job's chain)
    // must not pair this fire with the new view's version or revision.
    const scheduled = scheduledFence(job, schedule, fire.scheduledAt, view);
    if (fire.lateMs > this.t.lateWakeWarnMs && trigger === 'schedule') {
      this.o.events.emit('loop:lateWake', {
        job: job.name,
        scheduledAt: fire.scheduledAt,
        lateMs: fire.lateMs,
      });
    }
    const earlier = this.sent.get(job.name, fire.scheduledAt);
    if (earlier) return this.sentAlready(fire, trigger, afterLead, earlier);
    const contended = this.chain(job.name, () =>
      this.fire(job, fire.scheduledAt, trigger, { afterLead, scheduled }),
    );
    const outcome = contended.then(
      (started) => started?.outcome ?? null,
      () => null,
    );
    // Forgotten when nothing was claimed: no contention (stopped first, or it failed), or one
    // not attempted to the end. A run that started and then failed to record is kept: its row
    // exists, and contending again would write this runner's second.
    const settled = contended.then(
      async (started): Promise<FireSettled> => {
        if (!started) return { forget: true, skipped: null };
        const o = await started.outcome;
        return {
          forget: o?.status === 'not-attempted' || o?.status === 'stopped',
          skipped: o?.status === 'skipped' ? o : null,
        };
      },
      () => ({ forget: true, skipped: null }),
    );
    this.sent.add(job.name, fire.scheduledAt, contended, settled);
    return outcome;
  }

  /**
   * A fire this runner has sent already: what came of that contention, once it has settled —
   * its skip, or, where this runner won it, a skip saying so (the caller, a catch-up, then waits
   * for the run's row as it would for another runner's: daemon/catch-up.ts, stoppable, where
   * waiting here for the run would not be). A fire that turns out not attempted is sent anew;
   * one forgotten by a failover meanwhile is not (null: the recovery after the failover decides,
   * and this sender, a walk from before it, stops).
   */
  private async sentAlready(
    fire: DueFire,
    trigger: Trigger,
    afterLead: boolean,
    earlier: SentFire,
  ): Promise<FireOutcome | null> {
    await earlier.contended.catch(() => null);
    // A contention that ended without a run tells its outcome a few promise jobs later.
    await Promise.race([earlier.over, new Promise((r) => setImmediate(r))]);
    if (this.sent.get(fire.job, fire.scheduledAt) !== earlier) {
      const again = earlier.forgotten === 'not-attempted' && !this.o.signal.aborted;
      return again ? this.dispatch(fire, trigger, afterLead) : null;
    }
    if (earlier.skipped) return earlier.skipped;
    const { kind, text } = skips.sentAlready(earlier.settledAt != null);
    return { status: 'skipped', runId: null, kind, reason: text, contendMs: 0 };
  }

  /**
   * An operator's fire (fire/operator-fire.ts: a run now, a past fire again) as `baton run` does
   * it: through the job's lock, a paused or disabled job included, and never queued behind a run
   * (overlap `skip`: a run going on makes it `busy`). It goes down the job's chain like any fire,
   * so it never contends beside a scheduled fire of the job on this runner's session; and it
   * never waits for the lock there, as the session's heartbeat would wait behind it.
   */
  operatorFire(f: OperatorFire): OperatorFireHandle {
    const { job } = f;
    // Behind a fire still contending here (a `queue` fire may wait until the next fire) the
    // request would hang that long: the job is busy now.
    if (this.contending.has(job.name) || this.ready.has(job.name)) {
      const reason = `a fire of ${job.name} is being contended on this runner right now (waiting for its turn)`;
      // A skip like one for a run going on: a backfill tries the fire again (actions/backfill.ts).
      return {
        started: Promise.resolve({ status: 'busy', runId: null, reason }),
        outcome: Promise.resolve({
          status: 'skipped',
          runId: null,
          kind: 'overlap',
          reason,
          contendMs: 0,
        }),
      };
    }
    const contended = this.chain(job.name, () =>
      this.fire(job, f.at, f.trigger, {
        manual: true,
        ...(f.params?.recorded ? { params: f.params } : {}),
        ...(f.rerun ? { rerun: f.rerun } : {}),
        ...(f.unlessDone ? { unlessDone: true } : {}),
        ...(f.dependents ? { dependents: f.dependents } : {}),
        ...(f.chain ? { chain: f.chain } : {}),
      }),
    );
    const outcome = contended.then((c) => c?.outcome ?? null);
    const started = contended.then((c): Promise<ManualStart> | ManualStart =>
      c
        ? manualStartOf(f, c.startedRunId, outcome)
        : { status: 'not-run', reason: 'the runner is stopping' },
    );
    return { started, outcome };
  }

  /**
   * A child job's fire (`after:`, fire/dependents.ts), once its parents' runs let it: down the
   * job's chain like a scheduled fire — its overlap policy, its pause — with the trigger `after`
   * and the parents' instant.
   */
  async dependentFire(
    job: JobDefinition,
    key: DependentKey,
    fence: ChainFence,
  ): Promise<ChildContention | null> {
    const dependents = await this.dependentsOf(job, key);
    return this.chain(job.name, () =>
      this.fire(job, key.scheduledAt, 'after', {
        ...(key.rerun ? { rerun: key.rerun } : {}),
        dependents,
        chain: fence,
      }),
    );
  }

  /**
   * The children a child's fire carries: the schedule's chain's (generation 0); a generation of
   * an operator's chain, their next free generations.
   */
  async dependentsOf(job: JobDefinition, key: DependentKey): Promise<DependentPlan[]> {
    const { config } = this.o.loaded();
    if (key.rerun === 0) return scheduledDependents(config.jobs, job);
    const ctx = this.o.context();
    if (!ctx) return [];
    const children = childrenOf(config.jobs, job.name).filter((c) => c.enabled);
    return planDependents(ctx.pool, key.namespace, children, key.scheduledAt, true);
  }

  /** Puts a contention at the end of its job's chain, counted in `contending` until settled. */
  private chain<T>(job: string, contend: () => Promise<T>): Promise<T> {
    const previous = this.chains.get(job) ?? Promise.resolve();
    this.contending.set(job, (this.contending.get(job) ?? 0) + 1);
    const contended = previous.then(contend);
    const settled = () => {
      const left = this.contending.get(job)! - 1;
      if (left > 0) this.contending.set(job, left);
      else this.contending.delete(job);
    };
    // Wrapped, so that the chain waits for the contention only, not for the outcome inside.
    this.chains.set(job, contended.then(settled, settled));
    return contended;
  }

  /** Settles when every contention begun so far has settled (runs may go on). */
  async contentionsSettled(): Promise<void> {
    await Promise.allSettled([...this.chains.values()]);
  }

  /** Settles when every fire begun so far is over, runs included. */
  async finished(): Promise<void> {
    await Promise.allSettled([...this.inflight]);
  }

  /** Contends for one fire; resolves once contention is settled (the run may go on). */
  private async fire(
    job: JobDefinition,
    scheduledAt: Date,
    trigger: Trigger,
    o: FireAsked = {},
  ): Promise<{ outcome: Promise<FireOutcome | null>; startedRunId: () => number | null } | null> {
    const manual = o.manual === true;
    const { signal, events } = this.o;
    if (signal.aborted) return null;
    const { config, schedules, params: scheduled } = this.o.loaded();
    // A schedule created at run time gives its fires its parameters; an operator's run, its own.
    const params = o.params ?? (manual ? undefined : scheduled?.get(job.name));
    // A run's children are told by its verdict: always for the schedule's fires (and those of
    // the chain), for an operator's only when asked (`--with-dependents`).
    const plans = o.dependents ?? (manual ? [] : scheduledDependents(config.jobs, job));
    const told = this.o.dependents;
    // A scheduled fire's fence (taken by `dispatch`); an operator's run or a child's has none.
    const { version = null, dynamic = null } = o.scheduled ?? {};
    const tracer = this.o.tracer?.() ?? null;
    const handle = startFire(job, scheduledAt, {
      trigger,
      context: this.o.context,
      runs: this.o.runs,
      // An operator's run is contended like `baton run`'s: never queued, never paused.
      overlap: manual ? 'skip' : job.overlap,
      // A queued fire waits at most until the job's next fire: for a child with no schedule of
      // its own, its parents' next instant.
      schedule: manual ? null : (schedules.get(job.name) ?? instantScheduleOf(config, job.name)),
      ...(version != null ? { timingVersion: version } : {}),
      ...(dynamic ? { dynamic } : {}),
      // A fire waiting for a slot of its pool sees a reload's pool, not the one it began with.
      currentPool: () => {
        const loaded = this.o.loaded();
        return (loaded.config.jobs.find((j) => j.name === job.name) ?? loaded.jobs.get(job.name))
          ?.pool;
      },
      // A paused job is skipped at its next fire on every runner (checked with the lock).
      pauseCheck: !manual,
      ...(o.afterLead ? { afterLead: true } : {}),
      ...(o.rerun ? { rerun: o.rerun } : {}),
      ...(o.unlessDone ? { unlessDone: true } : {}),
      ...(o.chain ? { chain: o.chain } : {}),
      signal,
      places: this.places,
      verdicts: this.o.verdicts,
      lease: this.o.lease,
      output: this.o.output,
      launchers: this.o.launchers,
      events,
      ...(tracer ? { tracer } : {}),
      ...(job.target.kind === 'module' || job.target.kind === 'handler'
        ? { database: () => jobDatabase(this.o.loaded().config, job, this.o.target) }
        : {}),
      withholdEnv: withheldVariables(config),
      // Parameters only where some were given: a plain manual run's row records none.
      ...(params?.recorded ? { params } : {}),
      secrets: outputSecrets(config, job, this.o.target),
      ...(this.o.runTimings ? { timings: this.o.runTimings } : {}),
      ...(plans.length > 0 && told ? { dependents: { plans, leadMs: told.leadMs } } : {}),
    });
    if (plans.length > 0 && told) {
      // Judged here at once, the verdict just written; the others wait out the lead first.
      void handle.outcome.then(
        (o) => {
          if (o?.status === 'ran' && o.recorded) told.judge(scheduledAt, o.dependents ?? plans);
        },
        () => {},
      );
    }
    // A failure was told already (`fire:notAttempted`, `run:notCompleted`); a read-only server
    // was noted by the lock session itself, before the fire reported it.
    // A fire in flight holds the process even where the scheduler's background work does not.
    const outcome = (this.o.keepAlive ?? HOLDS_PROCESS).holdWhile(handle.outcome.catch(() => null));
    this.inflight.add(outcome);
    void outcome.finally(() => this.inflight.delete(outcome));
    await handle.contended;
    return { outcome, startedRunId: handle.startedRunId };
  }
}

/** `due` (sorted by instant) with the fires of each instant in random order. */
export function shuffleWithinInstant(due: DueFire[]): DueFire[] {
  const out = [...due];
  for (let start = 0; start < out.length;) {
    let end = start + 1;
    while (
      end < out.length &&
      out[end]!.scheduledAt.getTime() === out[start]!.scheduledAt.getTime()
    ) {
      end++;
    }
    // Fisher–Yates over [start, end).
    for (let i = end - 1; i > start; i--) {
      const j = start + Math.floor(Math.random() * (i - start + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    start = end;
  }
  return out;
}

/**
 * A wake's fires (oldest first) grouped by how long after the wake this runner contends for them
 * (`leadOf`: 0 at once), shortest lead first, each group in order. A job's fires keep their order
 * in its chain: once one of them waits for a lead, its later ones (a late wake can hold several
 * of one job) wait at least as long, or the later fire would run first and the earlier one be
 * skipped as overlapping it.
 */
export function groupByLead(
  due: readonly DueFire[],
  leadOf: (fire: DueFire) => number,
): { leadMs: number; fires: DueFire[] }[] {
  const waiting = new Map<string, number>();
  const groups = new Map<number, DueFire[]>();
  for (const fire of due) {
    const leadMs = Math.max(waiting.get(fire.job) ?? 0, leadOf(fire));
    if (leadMs > 0) waiting.set(fire.job, leadMs);
    let group = groups.get(leadMs);
    if (!group) groups.set(leadMs, (group = []));
    group.push(fire);
  }
  return [...groups.entries()]
    .sort(([a], [b]) => a - b)
    .map(([leadMs, fires]) => ({ leadMs, fires }));
}

/** How a fire was asked for: by the schedule (the default), or by an operator. */
interface FireAsked {
  /** An operator's fire: contended like `baton run`'s (never queued, never paused). */
  manual?: boolean;
  params?: FireOptions['params'];
  /** A re-run's generation, and whether its claim is refused once a generation is done. */
  rerun?: number;
  unlessDone?: boolean;
  /** Contended after the fire's first asker's lead (coordination/first-asker.ts). */
  afterLead?: boolean;
  /**
   * The children its verdict carries: an operator's (`--with-dependents`) or an operator chain's;
   * absent, the schedule's fires carry their job's (`scheduledDependents`), an operator's none.
   */
  dependents?: readonly DependentPlan[];
  /** A chain's child: the judgement its claim rests on (store/runs.ts). */
  chain?: ChainFence;
  /** A scheduled fire: what fences its claim (`scheduledFence`). */
  scheduled?: ScheduledFence;
}

/** What fences a scheduled fire's claim by the job's schedule as the database has it. */
interface ScheduledFence {
  /** The fleet's timing version the fire falls under, as this runner read the versions. */
  version?: number | null;
  /** A schedule created at run time: its row as read (store/runs.ts `Attempt.dynamic`). */
  dynamic?: Attempt['dynamic'] | null;
}

/** The fence of a scheduled fire of `job` at `at`, from one view of the runner's schedules. */
function scheduledFence(
  job: JobDefinition,
  schedule: Schedule | undefined,
  at: Date,
  loaded: Loaded,
): ScheduledFence {
  const version = (schedule as Partial<SwitchedSchedule> | undefined)?.versionAt?.(at) ?? null;
  const subject = splitSubject(job.name);
  const dynamic =
    subject && job.schedule != null
      ? {
          ...subject,
          schedule: job.schedule,
          timezone: job.timezone,
          revision: loaded.schedulesRevision?.() ?? 0,
        }
      : null;
  return { version, dynamic };
}

/** The schedule a job's instants come from: its own, or its first parent's up the chain. */
function instantScheduleOf(config: Config, job: string): Schedule | null {
  const source = instantSource(config.jobs, job);
  return source?.schedule != null ? parseSchedule(source.schedule, source.timezone) : null;
}

/** Whether `at` is a fire of `schedule`. */
function isFireOf(schedule: Schedule, at: Date): boolean {
  return schedule.nextAfter(new Date(at.getTime() - 1))?.getTime() === at.getTime();
}
