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
