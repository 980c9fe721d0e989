/**
 * The runner's part in the chains of `after:` (docs/dependencies.md): every runner that has a
 * child job
 * - writes the child's fire for each instant its parents reach (`expect`), so that a parent that
 *   does not run an instant — paused, skipped, nobody there — still decides its child;
 * - judges the children's fires whose time has come (`dueDependents`: a parent's verdict written,
 *   the writer's lead over, or a check postponed), every `pollMs`;
 * - and at once the children of a verdict it wrote itself (`judgeVerdict`, from the dispatcher): the
 *   child starts milliseconds after its parent's verdict while the parent's runner lives, and
 *   within `leadMs` + `pollMs` on another runner when it does not.
 *
 * Judging and acting is fire/dependents.ts; the child's fire goes down the dispatcher's chain of
 * its job (`Dispatcher.dependentFire`) like any fire, so its lock and fire key decide who runs it.
 */
import { chainSources } from '../config/dependencies.js';
import type { JobDefinition } from '../config/schema.js';
import { errorMessage } from '../errors.js';
import type { KeepAlive } from '../keep-alive.js';
import type { Logger } from '../log.js';
import type { Schedule } from '../schedule/cron.js';
import type { Queryable } from '../store/deadline.js';
import {
  deadlineWithinMs,
  dueDependents,
  expectDependents,
  type DependentKey,
  type DependentPlan,
  type Expected,
} from '../store/dependent-fires.js';
import {
  JUDGE_TIMINGS,
  resolveDependent,
  WRITER_LEAD_MS,
  type DependentEnv,
  type JudgeTimings,
} from '../fire/dependents.js';
import type { Loaded } from './dispatcher.js';
import { repeat } from './repeat.js';

export interface DependentTimings extends JudgeTimings {
  /** How often the waiting children's fires are looked at. */
  pollMs: number;
  /**
   * How long the other runners leave the children of a verdict to the runner that wrote it (it
   * judges them at once): a child starts on another runner this long after its parent's runner
   * died right after the verdict (plus up to `pollMs`).
   */
  leadMs: number;
}

export const DEPENDENT_TIMINGS: Readonly<DependentTimings> = {
  pollMs: 1_000,
  leadMs: WRITER_LEAD_MS,
  ...JUDGE_TIMINGS,
};

/** How many children's fires one look judges; the rest wait for the next. */
const JUDGED_PER_LOOK = 100;
/** How many instants of one parent one look writes (a runner back after a long stall). */
const EXPECTED_PER_LOOK = 1_000;

export interface DependentWatchOptions {
  namespace: () => string;
  host: string;
  loaded: () => Loaded;
  /** A pool while the runner can coordinate; null: nothing is judged now. */
  pool: () => Queryable | null;
  /** Now by the database's clock. */
  now: () => Date;
  fire: DependentEnv['fire'];
  /** The children a fire of `job` carries (Dispatcher.dependentsOf). */
  plans: (job: JobDefinition, key: DependentKey) => Promise<DependentPlan[]>;
  log: Logger;
  signal: AbortSignal;
  timings: DependentTimings;
  keepAlive?: KeepAlive;
}

export class DependentWatch {
  /** Children's fires being judged here now, by key: one judgement of a fire at a time. */
  private readonly judging = new Map<string, Promise<void>>();
  /**
   * Per child, its parents' instants up to here have its fires written. A child first seen at a
   * look (the runner's start, a reload that adds it) starts there: never before the runner had
   * the edge, so a chain added to a running fleet starts with the parents' next fire.
   */
  private readonly expectedUntil = new Map<string, Date>();

  constructor(private readonly o: DependentWatchOptions) {}

  start(): void {
    const { timings: t, signal, log, keepAlive } = this.o;
    repeat(t.pollMs, () => this.look(), signal, log, keepAlive);
  }

  /** Settles once every judgement begun here has settled (the children's runs may go on). */
  async stop(): Promise<void> {
    await Promise.allSettled([...this.judging.values()]);
  }

  /** The children of a verdict this runner just wrote: judged now (dispatcher.ts). */
  judgeVerdict(scheduledAt: Date, plans: readonly DependentPlan[]): void {
    const namespace = this.o.namespace();
    for (const plan of plans) {
      this.judge({ namespace, job: plan.job, scheduledAt, rerun: plan.rerun });
    }
  }

  private async look(): Promise<void> {
    const pool = this.o.pool();
    const children = this.children();
    if (children.length === 0) this.expectedUntil.clear();
    if (!pool || children.length === 0) return;
    await this.expect(pool, children);
    const due = await dueDependents(
      pool,
      this.o.namespace(),
      children.map((c) => c.name),
      JUDGED_PER_LOOK,
    );
    for (const row of due) this.judge(row);
  }

  /** The children this runner runs. */
  private children(): JobDefinition[] {
    return [...this.o.loaded().jobs.values()].filter((j) => j.after != null);
  }

  /** The children's fires of the instants their parents reached since the last look. */
  private async expect(pool: Queryable, children: readonly JobDefinition[]): Promise<void> {
    const until = this.o.now();
    const namespace = this.o.namespace();
    const rows: Expected[] = [];
    const reached = new Map<string, Date>();
    for (const child of children) {
      const from = this.expectedUntil.get(child.name) ?? until;
      // Each parent schedule's instants in (from, until], at most EXPECTED_PER_LOOK of them: a
      // runner back from a long stall writes the rest at its next looks.
      const instants = new Set<number>();
      let cut: number | null = null;
      for (const schedule of this.instantsOf(child)) {
        let at = schedule.nextAfter(from);
        let n = 0;
        for (; at && at <= until && n < EXPECTED_PER_LOOK; n++) {
          instants.add(at.getTime());
          at = schedule.nextAfter(at);
        }
        if (n === EXPECTED_PER_LOOK && at && at <= until) {
          cut = Math.min(
            cut ?? Infinity,
            [...instants].reduce((a, b) => Math.max(a, b), 0),
          );
        }
      }
      for (const ms of instants) {
        if (cut != null && ms > cut) continue;
        const deadline = ms + deadlineWithinMs(child.after!.withinMs);
        rows.push({
          key: { namespace, job: child.name, scheduledAt: new Date(ms), rerun: 0 },
          // First looked at once a parent's skip is final, or at the deadline when that is sooner
          // (`within` under settleMs): a verdict that comes sooner moves it to its own time.
          checkAt: new Date(Math.min(ms + this.o.timings.settleMs, deadline)),
          deadline: new Date(deadline),
        });
      }
      reached.set(child.name, cut != null ? new Date(cut) : until);
    }
    await expectDependents(pool, rows);
    // A child gone from the schedule is forgotten; back, it starts afresh.
    this.expectedUntil.clear();
    for (const [job, at] of reached) this.expectedUntil.set(job, at);
  }

  /** The schedules this runner has (enabled here) whose instants the child's fires are. */
  private instantsOf(child: JobDefinition): Schedule[] {
    const { config, schedules } = this.o.loaded();
    return chainSources(config.jobs, child.name)
      .map((source) => schedules.get(source.name))
      .filter((schedule): schedule is Schedule => schedule != null);
  }

  /** Judges one child's fire, unless it is being judged here already. */
  private judge(key: DependentKey): void {
    const id = `${key.job}\0${key.scheduledAt.getTime()}\0${key.rerun}`;
    const pool = this.o.pool();
    const child = this.o.loaded().jobs.get(key.job);
    if (this.judging.has(id) || !pool || !child || this.o.signal.aborted) return;
    const judged = resolveDependent(
      {
        pool,
        host: this.o.host,
        pid: process.pid,
        now: this.o.now,
        timings: this.o.timings,
        fire: this.o.fire,
        plans: this.o.plans,
      },
      child,
      key,
    ).then(
      (resolution) => {
        // A child skipped leaves its own children with nothing to wait for: judged now too.
        if (resolution.state !== 'skipped') return;
        for (const plan of resolution.dependents) {
          this.judge({ ...key, job: plan.job, rerun: plan.rerun });
        }
      },
      (err: unknown) =>
        this.o.log.warn(
          { job: key.job, scheduledAt: key.scheduledAt, err: errorMessage(err) },
          'could not judge a child job’s fire; it is judged again at the next look',
        ),
    );
    const tracked = judged.finally(() => this.judging.delete(id));
    this.judging.set(id, tracked);
  }
}
