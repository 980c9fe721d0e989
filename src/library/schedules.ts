/**
 * `scheduler.schedules`: schedules an application creates, changes and removes while it runs — a
 * schedule per tenant (docs/library-mode.md, "Schedules created at run time"). The job
 * (`scheduler.job(name, options, handler)`) is what runs, with its policies; a schedule adds a
 * timing and parameters under a key, and fires as the subject `<job>:<key>` through the same fire
 * protocol as every job: one run per key and instant across the fleet.
 *
 * The schedules live in the database (store/schedules.ts), not in the replica: an upsert on one
 * replica is fired by all of them, a replica started later has them, and `remove` on any replica
 * stops them on every one. This replica applies its own change at once; the others read it within
 * a second (their look for run requests reads the schedules' revision too, store/replica-inbox.ts).
 */
import { JOB_NAME_MAX, JOB_NAME_PATTERN } from '../config/names.js';
import type { JobDefinition } from '../config/schema.js';
import { BatonError, ConfigError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import { keyProblem } from '../schedule-keys.js';
import type { Queryable } from '../store/deadline.js';
import {
  listSchedules,
  removeSchedule,
  upsertSchedule,
  type StoredSchedule,
  type UpsertStatus,
} from '../store/schedules.js';
import { CODE_PLACE } from './job-options.js';
import { checkScheduleInput, jobProblem, type ScheduleInput } from './schedule-input.js';

export type { ScheduleInput };

/** A live schedule, as `list` returns it. */
export type DynamicSchedule = StoredSchedule;

export interface UpsertResult {
  job: string;
  key: string;
  /** `unchanged`: the same definition was there already; nothing was written. */
  status: UpsertStatus;
  /** The namespace's revision of the schedule's last change. */
  revision: number;
}

/** What the schedules need of their scheduler. */
export interface SchedulesHost {
  namespace: string;
  /** The job as defined (a handler's or a loaded file's); null for a name it does not have. */
  definition(job: string): JobDefinition | null;
  /** The jobs defined with `scheduler.job`, for an unknown job's message. */
  handlerJobs(): string[];
  /** The pool to write with; throws when the scheduler is not started or the database not usable. */
  pool(call: string): Queryable;
  /** This replica's own change: applied at once, not at its next look. */
  changed(): void;
}

export class Schedules {
  constructor(private readonly host: SchedulesHost) {}

  /**
   * Creates the schedule `key` of `job`, or changes it to this definition. The same definition
   * again is no change (status `unchanged`, nothing written); two replicas upserting one key at
   * once give one schedule. Refused whole (a ConfigError naming each field) on bad input.
   */
  async upsert(job: string, key: string, input: ScheduleInput): Promise<UpsertResult> {
    const call = 'schedules.upsert';
    const definition = typeof job === 'string' ? this.host.definition(job) : null;
    const wrongJob = jobProblem(job, definition, this.host.handlerJobs());
    if (wrongJob) throw refused(call, 'job', wrongJob);
    const checked = checkScheduleInput(call, job, key, input, definition!);
    const pool = this.host.pool(call);
    const { status, revision } = await upsertSchedule(pool, this.host.namespace, job, key, checked);
    if (status !== 'unchanged') this.host.changed();
    return { job, key, status, revision };
  }

  /**
   * Removes the schedule `key` of `job` on every replica (each within a second); false when there
   * was no such live schedule. A job no longer defined here may still have its schedules removed.
   */
  async remove(job: string, key: string): Promise<boolean> {
    const call = 'schedules.remove';
    checkName(call, job);
    const wrongKey = keyProblem(job, key);
    if (wrongKey) throw refused(call, 'key', wrongKey);
    const removed = await removeSchedule(this.host.pool(call), this.host.namespace, job, key);
    if (removed) this.host.changed();
    return removed;
  }

  /** The live schedules of the namespace (of `job`, when given), by job and key. */
  async list(job?: string): Promise<DynamicSchedule[]> {
    const call = 'schedules.list';
    if (job != null) checkName(call, job);
    return listSchedules(this.host.pool(call), this.host.namespace, job);
  }
}

function refused(call: string, field: string, message: string): ConfigError {
  return new ConfigError([{ file: CODE_PLACE, path: `${call}.${field}`, message }]);
}

function checkName(call: string, job: unknown): void {
  if (typeof job !== 'string')
    throw refused(call, 'job', `expected a job's name, got ${typeof job}`);
  if (job.length > JOB_NAME_MAX || !JOB_NAME_PATTERN.test(job)) {
    throw refused(
      call,
      'job',
      `${JSON.stringify(job.slice(0, 40))} is not a job's name (letters, digits, '.', '_' and ` +
        `'-', starting with a letter or digit, at most ${JOB_NAME_MAX} characters)`,
    );
  }
}

/** Before `start()`: the schedules live in the database, which the scheduler has not reached. */
export function notStarted(call: string): BatonError {
  return new BatonError(
    'SCHEDULER_NOT_STARTED',
    `scheduler.${call}(): start the scheduler first (await scheduler.start()): the schedules ` +
      'live in the database',
    ExitCode.Usage,
  );
}
