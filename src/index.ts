/**
 * The public surface of the `baton` package for job authors: types for module jobs, and the
 * helpers that make a batch safe on redundant servers (docs/job-sdk.md).
 *
 *     import type { JobContext } from 'baton-cron';
 *     import { claimRows, once } from 'baton-cron';
 *     export default async (ctx: JobContext) => { ... };
 */
export type { FireInfo, JobContext, JobFunction } from './execution/job-context.js';
export type { Trigger, RunStatus } from './run-status.js';
export * from './sdk/index.js';

// Library mode: the scheduler inside an application (docs/library-mode.md).
export { createScheduler, Scheduler } from './library/scheduler.js';
export type { Duration, SchedulerOptions } from './library/scheduler.js';
export type { PartialTimings, Timings } from './daemon/timings.js';
export type { CodeSettings, JobDefaults, JobOptions } from './library/job-options.js';
export type { JobHandler } from './execution/in-process.js';
export type {
  DynamicSchedule,
  ScheduleInput,
  Schedules,
  UpsertResult,
} from './library/schedules.js';
export type { RunnerEventMap, RunnerEvents } from './daemon/runner-events.js';
export type { ManualStart } from './fire/operator-fire.js';
export { ConfigError, BatonError } from './errors.js';
