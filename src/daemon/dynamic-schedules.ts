/**
 * A runner's schedules created at run time (library mode's `scheduler.schedules`,
 * docs/library-mode.md): the rows of `baton_schedules` (store/schedules.ts) as subjects this
 * runner fires — each `<job>:<key>` (src/schedule-keys.ts) with its job's definition (the
 * handler, timeout, retries, overlap, pool, notify…) and the row's timing and parameters.
 *
 * A subject is a job to everything downstream: the loop fires it (dynamic-fires.ts, beside the
 * file's schedule), the dispatcher finds its definition and parameters in `loaded` and sends its
 * fires down the one fire pipeline — its lock, its fire key, its pause, its rows — so each
 * (job, key, instant) runs once across the fleet, by the protocol of every fire
 * (coordination/fire-protocol.ts). Nothing here decides who runs a fire.
 *
 * How a change reaches the runner: the namespace's revision (store/schedules.ts) is read once a
 * second with the run requests (store/replica-inbox.ts, by the library's request watch) and handed
 * to `moved`; a revision past the one read last makes the runner read the rows changed since
 * (`refresh`, one statement), a lower one (a failover to a server that lacks the latest changes)
 * everything again (`refresh({all})`, as at every connect). The replica that made the change refreshes at
 * once. A change is applied between the loop's due fires and its next arm (`change`): fires due by
 * then went out under the old schedule, as at a reload, and the new ones start from their next
 * instant.
 *
 * A row that this runner cannot fire is kept, not loaded: a job it does not have, or may not run
 * here (`runOn`, `enabled: false`), or that is not a handler. A row it cannot read (an expression
 * or time zone this version refuses, params that are not an object of strings: a row written by
 * hand or by another version) is logged once and not fired.
 */
import type { JobDefinition } from '../config/schema.js';
import { errorMessage } from '../errors.js';
import type { FireOptions } from '../fire/run-fire.js';
import { recordedParams } from '../fire/run-params.js';
import type { Logger } from '../log.js';
import { parseSchedule, type Schedule } from '../schedule/cron.js';
import { keyProblem, subjectName } from '../schedule-keys.js';
import type { Queryable } from '../store/deadline.js';
import {
  paramsOf,
  readAllSchedules,
  schedulesAfter,
  type ReadSchedule,
} from '../store/schedules.js';
import { DynamicFires } from './dynamic-fires.js';
import type { Loaded } from './dispatcher.js';

export type SubjectParams = NonNullable<FireOptions['params']>;

/** The definition a subject runs: its job's, with the schedule's timing. */
export function subjectDefinition(job: JobDefinition, row: ReadSchedule): JobDefinition {
  // A subject has no parents (`after:` is refused for its job) and no jitter: its job's jitter
  // was checked against the job's own schedule, not this one.
  const { after: _after, ...rest } = job;
  return {
    ...rest,
    name: subjectName(row.job, row.key),
    schedule: row.schedule,
    timezone: row.timezone,
    jitterMs: 0,
  };
}

/** Why this runner does not fire `row`'s schedule; null when it does. */
function notFired(job: JobDefinition | undefined, row: ReadSchedule): string | null {
  if (!job) return null;
  if (job.target.kind !== 'handler') return `${row.job} is not a handler job`;
  if (job.after) return `${row.job} runs after its parents (\`after:\`)`;
  const key = keyProblem(row.job, row.key);
  if (key) return `the key ${key}`;
  if (paramsOf(row.paramsText) == null) return 'its params are not an object of strings';
  return null;
}

export interface DynamicSchedulesOptions {
  namespace: () => string;
  /** The pool while this runner can coordinate; null: skip. */
  pool: () => Queryable | null;
  log: Logger;
  /** The runner's stop: no read starts, and none that fails is reported, once it is aborted. */
  signal?: AbortSignal;
  /**
   * Runs `apply` where the loop can take it: after the fires due by `now` went out, before it is
   * armed again (runner.ts).
   */
  change: (apply: (now: Date) => void) => void;
  /** Told after each change applied (runner-events.ts `schedules:changed`). */
  changed?: (e: { revision: number; changed: number; loaded: number }) => void;
}

export class DynamicSchedules {
  /** The loop's source of the subjects' fires. */
  readonly fires = new DynamicFires();
  /** The revision read last: every change up to it is applied. */
  private revision = 0;
  /** Every live row of the namespace, by subject: those not fired here too (a rebase may). */
  private readonly rows = new Map<string, ReadSchedule>();
  /** The file's jobs and the subjects fired here, as the dispatcher finds them. */
  private jobs = new Map<string, JobDefinition>();
  private schedules = new Map<string, Schedule>();
  private readonly params = new Map<string, SubjectParams>();
  private base: Loaded;
  private view: Loaded;
  private refreshing: Promise<void> | null = null;
  private again = false;
  /** The next read is of every live row. */
  private readAll = false;

  constructor(
    private readonly o: DynamicSchedulesOptions,
    base: Loaded,
  ) {
    this.base = base;
    this.view = this.rebuildView();
  }

  /** The file's jobs with the subjects fired here: what the dispatcher reads. */
  get loaded(): Loaded {
    return this.view;
  }

  /** The revision this runner has applied. */
  get appliedRevision(): number {
    return this.revision;
  }

  /** How many subjects this runner fires. */
  get size(): number {
    return this.fires.size;
  }

  /** Since when a subject has had its current definition: recovery looks back no further. */
  knownSince(subject: string): Date | null {
    return this.rows.get(subject)?.updatedAt ?? null;
  }

  /** A new file schedule (start, reload): every row is judged again against its jobs. */
  rebase(base: Loaded, now: Date): void {
    this.base = base;
    this.view = this.rebuildView();
    for (const [subject, row] of this.rows) this.load(subject, row, now);
  }

  /** The namespace's revision, as read by the replica's inbox: read what changed, if anything. */
  moved(revision: number): void {
    // A full read that failed (at a connect) is tried again at the next look.
    if (revision === this.revision && !this.readAll) return;
    void this.refresh({ all: revision < this.revision });
  }

  /**
   * Reads the rows changed since the last read and applies them; `all`: every live row (each
   * connect, since the server may be another after a failover; a revision that went back). One
   * read at a time: a call while one is going on makes one more after it, which reads
   * everything changed meanwhile.
   */
  refresh({ all = false }: { all?: boolean } = {}): Promise<void> {
    if (all) this.readAll = true;
    if (this.refreshing) {
      this.again = true;
      return this.refreshing;
    }
    const run = async () => {
      do {
        this.again = false;
        const whole = this.readAll;
        this.readAll = false;
        await (whole ? this.readEverything() : this.readChanges());
      } while (this.again);
    };
    this.refreshing = run().finally(() => (this.refreshing = null));
    return this.refreshing;
  }

  private async readEverything(): Promise<void> {
    const pool = this.o.pool();
    if (!pool || this.o.signal?.aborted) return;
    try {
      const { revision, rows } = await readAllSchedules(pool, this.o.namespace());
      this.o.change((now) => {
        const live = new Map(rows.map((r) => [subjectName(r.job, r.key), r]));
        for (const subject of this.rows.keys()) if (!live.has(subject)) this.unload(subject);
        this.rows.clear();
        for (const [subject, row] of live) this.apply(subject, row, now);
        this.revision = revision;
      });
      this.told(rows.length);
    } catch (err) {
      // Tried again at the next look (`moved`).
      this.readAll = true;
      if (this.o.signal?.aborted) return;
      this.o.log.warn({ err: errorMessage(err) }, 'could not read the dynamic schedules');
    }
  }

  private async readChanges(): Promise<void> {
    const pool = this.o.pool();
    if (!pool || this.o.signal?.aborted) return;
    try {
      const rows = await schedulesAfter(pool, this.o.namespace(), this.revision);
      if (rows.length === 0) return;
      this.o.change((now) => {
        for (const row of rows) {
          this.apply(subjectName(row.job, row.key), row, now);
          this.revision = Math.max(this.revision, row.revision);
        }
      });
      this.told(rows.length);
    } catch (err) {
      if (this.o.signal?.aborted) return;
      this.o.log.warn({ err: errorMessage(err) }, 'could not read the dynamic schedules');
    }
  }

  private told(changed: number): void {
    this.o.changed?.({ revision: this.revision, changed, loaded: this.fires.size });
  }

  private apply(subject: string, row: ReadSchedule, now: Date): void {
    if (row.removedAt != null) {
      this.rows.delete(subject);
      this.unload(subject);
      return;
    }
    this.rows.set(subject, row);
    this.load(subject, row, now);
  }

  /** Fires `subject` here, or stops firing it when this runner may not. */
  private load(subject: string, row: ReadSchedule, now: Date): void {
    const job = this.base.jobs.get(row.job);
    const why = notFired(job, row);
    if (!job || why != null) {
      if (why != null) {
        this.o.log.warn({ job: row.job, subject, revision: row.revision }, `not fired: ${why}`);
      }
      this.unload(subject);
      return;
    }
    let schedule: Schedule;
    try {
      schedule = parseSchedule(row.schedule, row.timezone);
    } catch (err) {
      this.o.log.warn(
        { job: row.job, subject, revision: row.revision },
        `not fired: ${errorMessage(err)}`,
      );
      this.unload(subject);
      return;
    }
    const definition = subjectDefinition(job, row);
    this.jobs.set(subject, definition);
    this.schedules.set(subject, schedule);
    const recorded = recordedParams(job, { env: { ...row.params }, args: [] });
    if (recorded) this.params.set(subject, { given: { ...row.params }, recorded });
    else this.params.delete(subject);
    // Its instants since the change are due too, when the change is this recent (dynamic-fires.ts).
    this.fires.set(subject, schedule, now, row.updatedAt);
  }

  private unload(subject: string): void {
    this.jobs.delete(subject);
    this.schedules.delete(subject);
    this.params.delete(subject);
    this.fires.delete(subject);
  }

  /** The file's part of the view, anew (the subjects are loaded into it after). */
  private rebuildView(): Loaded {
    this.jobs = new Map(this.base.jobs);
    this.schedules = new Map(this.base.schedules);
    this.params.clear();
    this.fires.clear();
    return {
      config: this.base.config,
      jobs: this.jobs,
      schedules: this.schedules,
      params: this.params,
      schedulesRevision: () => this.revision,
    };
  }
}
