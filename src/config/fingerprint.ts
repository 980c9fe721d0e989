/**
 * A short fingerprint of a job's definition, so that the runner registry can show when two
 * runners loaded different definitions of the same job — "we updated srv-01 and forgot srv-02".
 * Paths are taken relative to the schedules file's folder: the same file installed under
 * different folders on two servers is the same schedule.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { DEFAULT_OUTPUT_MAX_BYTES } from './defaults.js';
import type { Config, JobDefinition } from './schema.js';

export function jobFingerprint(job: JobDefinition, configFile: string): string {
  const base = path.dirname(configFile);
  const relative = (p: string) => path.relative(base, p) || '.';
  const target =
    job.target.kind === 'module' ? { kind: 'module', path: relative(job.target.path) } : job.target;
  const canonical = {
    schedule: job.schedule,
    timezone: job.timezone,
    enabled: job.enabled,
    target,
    env: Object.fromEntries(Object.entries(job.env).sort(([a], [b]) => a.localeCompare(b))),
    cwd: relative(job.cwd),
    timeoutMs: job.timeoutMs,
    retries: job.retries,
    retryDelayMs: job.retryDelayMs,
    catchUpMs: job.catchUpMs,
    overlap: job.overlap,
    expectMs: job.expectMs,
    // Added later: only when they differ from the default, so fingerprints of jobs that do not
    // use them stay what older runners publish (no false drift during a rolling upgrade).
    ...(job.workers !== 1 ? { workers: job.workers } : {}),
    ...(job.connection != null ? { connection: job.connection } : {}),
    ...(job.jitterMs !== 0 ? { jitterMs: job.jitterMs } : {}),
    ...(job.catchUpFires !== 'latest' ? { catchUpFires: job.catchUpFires } : {}),
    ...(job.onFailover !== 'skip' ? { onFailover: job.onFailover } : {}),
    ...(job.outputLog ? { outputLog: true } : {}),
    ...(job.skips !== 'rows' ? { skips: job.skips } : {}),
    ...(job.outputMaxBytes !== DEFAULT_OUTPUT_MAX_BYTES
      ? { outputMaxBytes: job.outputMaxBytes }
      : {}),
    // An edge is part of the child's definition: runners that disagree on a job's parents would
    // judge its fires differently (drift must show it). Parents in the order written.
    ...(job.after
      ? { after: { jobs: job.after.jobs, on: job.after.on, withinMs: job.after.withinMs } }
      : {}),
    // Soft limits: runners that disagree would stamp different warns on the runs they win, and
    // tell `slow` and `too-short` by different rules depending on who won.
    ...(job.duration ? { duration: job.duration } : {}),
    // Where it runs: runners that disagree would each think others may (or may not) run it.
    ...(job.runOn ? { runOn: job.runOn } : {}),
    ...(job.prefer ? { prefer: job.prefer } : {}),
    ...(job.every ? { every: true } : {}),
    // Runners that disagree on a job's pool would let more runs of the pool go at once than it
    // has slots (or fewer): the pool's size and scope are part of the job's definition.
    ...(job.pool ? { pool: job.pool } : {}),
    // A backoff (`retryDelay: {initial, factor, max}`): its first wait is `retryDelayMs` above.
    ...(job.retryBackoff ? { retryBackoff: job.retryBackoff } : {}),
  };
  return createHash('sha256').update(JSON.stringify(canonical)).digest('hex').slice(0, 16);
}

/**
 * A fingerprint of a job's timing alone — its expression and time zone, what decides which
 * instants are its fires: the versions of `baton_timings` (store/timings.ts) are told apart by
 * it. Null for a job with no schedule of its own (it fires at its parents' instants).
 */
export function timingPrint(job: Pick<JobDefinition, 'schedule' | 'timezone'>): string | null {
  if (job.schedule == null) return null;
  // Spacing is not timing: `0  3 * * *` is `0 3 * * *` (no new version, no runner held).
  const canonical = {
    schedule: job.schedule.trim().split(/\s+/).join(' '),
    timezone: job.timezone,
  };
  return createHash('sha256').update(JSON.stringify(canonical)).digest('hex').slice(0, 16);
}

/** Job name → fingerprint, for every job of the file (enabled or not). */
export function scheduleFingerprint(config: Config): Record<string, string> {
  return Object.fromEntries(config.jobs.map((j) => [j.name, jobFingerprint(j, config.file)]));
}
