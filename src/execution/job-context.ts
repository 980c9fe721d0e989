/**
 * What a module job receives, and the environment every job (command or module) gets. A batch
 * computes "yesterday" from its fire (`scheduledAt`), never from the moment it happened to start.
 */
import type { Logger } from 'pino';
import type { FencedPool } from '../sdk/fence.js';
import type { Trigger } from '../run-status.js';
import { parseTraceparent, type TraceContext } from '../trace-context.js';

/** The fire being run, identical on every host for the same fire. */
export interface FireInfo {
  job: string;
  /** `baton_runs.id` of this run's row. */
  runId: number;
  /**
   * The run's fence (issue 43; docs/job-sdk.md, "Fenced writes"): a number that only grows per
   * job — a newer run of the job always has a higher one, across failovers too. Its run id.
   * Store it with effects in other systems and refuse a lower one there; in the job's database,
   * `ctx.db.fenced(…)` (and the helpers given `fence: ctx.db.fence`) refuse a stale run's writes.
   */
  fence: number;
  /** The cron instant (UTC), or the moment of a manual trigger. */
  scheduledAt: Date;
  trigger: Trigger;
  /** The runner's host id. */
  host: string;
  /** 1 for the first attempt at this fire, 2 for its first retry, and so on. */
  attempt: number;
  /**
   * Which of the fire's worker slots this run holds (`workers: N` lets N runners share one fire;
   * `{ slot: 1, count: 1 }` for an ordinary job). Use the slot as the worker id when claiming rows.
   */
  worker: { slot: number; count: number };
  /**
   * The manual parameters of this run (`baton run --env K=V`), by name; `{}` for a scheduled
   * fire. They are in the environment too; BATON_PARAMS lists their names.
   */
  params?: Record<string, string>;
  /**
   * With tracing on (docs/tracing.md): the run's span in its fire's trace, which the job's own
   * spans name as their parent — `traceparent` as W3C trace-context has it, and its two ids. Also
   * in the environment as TRACEPARENT. Absent when the runner does not trace.
   */
  trace?: TraceContext;
}

/** The argument of a module job's default export: `export default async (ctx: JobContext) => …`. */
export interface JobContext extends FireInfo {
  fire: FireInfo;
  /**
   * The run's parameters: an operator's (`baton run --env K=V`), or those of the schedule created
   * at run time it is a fire of (library mode's `scheduler.schedules.upsert`); `{}` when there are
   * none.
   */
  params: Record<string, string>;
  /**
   * Library mode: the key of the schedule created at run time this run is a fire of
   * (`scheduler.schedules.upsert(job, key, …)`; `job` is then `<job>:<key>`, the name its rows
   * carry); absent for any other run.
   */
  key?: string;
  /** A pino logger bound to job, runId and host; it writes to the run's output. */
  log: Logger;
  /**
   * Aborted when the run must stop (timeout, lost lock, shutdown): the runner sends SIGTERM and
   * kills the process after a grace. Pass it to what you await.
   */
  signal: AbortSignal;
  /**
   * A mysql2 pool (promise API, UTC) on the job's database: the connection its `connection:`
   * names in schedules.yaml, else baton's own database. Created on first use. With the run's
   * fence: `ctx.db.fenced(async (tx) => …)` commits only while the run still holds its job
   * (sdk/fence.ts), and `ctx.db.fence` is what the helpers take as `fence`.
   */
  db: FencedPool;
}

export type JobFunction = (ctx: JobContext) => unknown;

/** The environment variables that carry the fire into a job's process. */
export function fireEnvironment(fire: FireInfo, batonDatabase?: string): Record<string, string> {
  return {
    BATON_JOB: fire.job,
    BATON_RUN_ID: String(fire.runId),
    BATON_FENCE: String(fire.fence),
    // Where the fence is checked (sdk/fence.ts `runFenceFromEnvironment`): a name, no secret.
    ...(batonDatabase ? { BATON_FENCE_DATABASE: batonDatabase } : {}),
    BATON_SCHEDULED_AT: fire.scheduledAt.toISOString(),
    BATON_TRIGGER: fire.trigger,
    BATON_HOST: fire.host,
    BATON_ATTEMPT: String(fire.attempt),
    BATON_WORKER: String(fire.worker.slot),
    BATON_WORKERS: String(fire.worker.count),
    // The names only: the values are the variables themselves (and may be secrets).
    ...(fire.params && Object.keys(fire.params).length > 0
      ? { BATON_PARAMS: JSON.stringify(Object.keys(fire.params)) }
      : {}),
    // The name OpenTelemetry's SDKs and instrumentations read a parent from (W3C's header's).
    ...(fire.trace ? { TRACEPARENT: fire.trace.traceparent } : {}),
  };
}

/** The run's parameters inside the job's process: the variables BATON_PARAMS names. */
function paramsFromEnvironment(env: NodeJS.ProcessEnv): Record<string, string> {
  let names: unknown;
  try {
    names = JSON.parse(env.BATON_PARAMS ?? '[]');
  } catch {
    return {};
  }
  if (!Array.isArray(names)) return {};
  return Object.fromEntries(names.map((n) => [String(n), env[String(n)] ?? '']));
}

/** The inverse of `fireEnvironment`, for the module host inside the child process. */
export function fireFromEnvironment(env: NodeJS.ProcessEnv): FireInfo {
  const scheduledAt = new Date(env.BATON_SCHEDULED_AT ?? '');
  if (!env.BATON_JOB || Number.isNaN(scheduledAt.getTime())) {
    throw new Error('BATON_JOB and BATON_SCHEDULED_AT must be set (this file is run by baton)');
  }
  return {
    job: env.BATON_JOB,
    runId: Number(env.BATON_RUN_ID),
    fence: Number(env.BATON_FENCE ?? env.BATON_RUN_ID),
    scheduledAt,
    trigger: (env.BATON_TRIGGER ?? 'manual') as Trigger,
    host: env.BATON_HOST ?? '',
    attempt: Number(env.BATON_ATTEMPT ?? 1),
    worker: { slot: Number(env.BATON_WORKER ?? 1), count: Number(env.BATON_WORKERS ?? 1) },
    params: paramsFromEnvironment(env),
    ...traceFromEnvironment(env),
  };
}

function traceFromEnvironment(env: NodeJS.ProcessEnv): { trace?: TraceContext } {
  const trace = parseTraceparent(env.TRACEPARENT);
  return trace ? { trace } : {};
}
