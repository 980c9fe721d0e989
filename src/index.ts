/**
 * The public surface of the `baton` package for job authors: types for module jobs.
 *
 *     import type { JobContext } from 'baton';
 *     export default async (ctx: JobContext) => { ... };
 */
export type { FireInfo, JobContext, JobFunction } from './execution/job-context.js';
export type { Trigger, RunStatus } from './store/runs.js';
