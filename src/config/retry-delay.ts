/**
 * The wait before a retry (`retryDelay:`, docs/configuration.md): a fixed delay (`retryDelay:
 * 30s`, the same before every retry, as it always was), or a backoff (`retryDelay: {initial: 10s,
 * factor: 2, max: 10m}`) that grows with each retry of the fire: initial × factor^(k−1) before the
 * k-th retry, never more than `max`.
 *
 * A backoff's delay has a jitter of ±RETRY_JITTER (10 %), so that the retries of jobs failing
 * together (a database down at 03:00 for every batch of the fleet) do not all come back in the
 * same second — and `max` stays a bound: at the cap the jitter only shortens. The jitter is not
 * random: it is drawn from the namespace, the job, the fire's instant and the attempt
 * (schedule/jitter.ts `fireFraction`), so every runner computes the same delays for a fire — the
 * runner that retries is the fire's winner, but `baton explain` on any host, and a test, can say
 * exactly how long each wait of a fire was meant to be. A fixed delay has no jitter: `retryDelay:
 * 30s` means what it always meant. `factor: 1` is allowed: a constant delay with the jitter.
 *
 * Plain rules, no schema: the daemon imports this module (defaults.ts says why).
 */
import { formatDuration } from './duration.js';
import { fireFraction } from '../schedule/jitter.js';

/** A backoff delay is spread by up to this fraction of itself, either way (never past `max`). */
export const RETRY_JITTER = 0.1;

/** The largest `factor` a backoff may have: a bigger step is a typo, not a policy. */
export const MAX_RETRY_FACTOR = 10;

/** How a backoff grows from its first delay (the job's `retryDelayMs`). */
export interface RetryBackoff {
  /** Each retry waits this many times the previous wait (before the jitter); at least 1. */
  factor: number;
  /** No wait is longer. */
  maxMs: number;
}

/** What of a job decides its retries' waits. */
export interface RetryPolicy {
  name: string;
  retries: number;
  /** The fixed delay, or a backoff's first. */
  retryDelayMs: number;
  /** Absent: every retry waits `retryDelayMs`. */
  retryBackoff?: RetryBackoff;
}

/**
 * How long the fire of `job` at `fireAt` waits before its attempt `attempt` (2 is the first
 * retry): a pure function of its arguments, the same on every runner.
 */
export function retryWaitMs(
  namespace: string,
  job: Omit<RetryPolicy, 'retries'>,
  fireAt: Date,
  attempt: number,
): number {
  const backoff = job.retryBackoff;
  if (!backoff) return job.retryDelayMs;
  const base = backoffBase(job.retryDelayMs, backoff, attempt);
  const spread = 2 * fireFraction(namespace, job.name, fireAt, `retry ${attempt}`) - 1;
  return Math.min(backoff.maxMs, Math.round(base * (1 + RETRY_JITTER * spread)));
}

/** The wait before attempt `attempt` without the jitter: initial × factor^(attempt−2), capped. */
function backoffBase(initialMs: number, backoff: RetryBackoff, attempt: number): number {
  // Capped step by step: a factor of 10 over 100 retries would leave a double's range.
  let wait = initialMs;
  for (let k = 2; k < attempt && wait < backoff.maxMs; k++) wait *= backoff.factor;
  return Math.min(wait, backoff.maxMs);
}

/**
 * The longest a job's waits between attempts can add up to, whatever the fire: every retry
 * taken, each at its jitter's longest. What a lock that may expire under its holder must outlast
 * (coordination/lock-probe.ts).
 */
export function longestRetryWaitsMs(job: Omit<RetryPolicy, 'name'>): number {
  const backoff = job.retryBackoff;
  if (!backoff) return job.retryDelayMs * job.retries;
  let total = 0;
  for (let attempt = 2; attempt <= job.retries + 1; attempt++) {
    const base = backoffBase(job.retryDelayMs, backoff, attempt);
    total += Math.min(backoff.maxMs, Math.ceil(base * (1 + RETRY_JITTER)));
  }
  return total;
}

/**
 * The policy in words: "3 retries, 10s apart"; "3 retries, from 1s, ×2 up to 10m, ±10%";
 * "no retries".
 */
export function describeRetries(job: Omit<RetryPolicy, 'name'>): string {
  if (job.retries === 0) return 'no retries';
  const count = `${job.retries} ${job.retries === 1 ? 'retry' : 'retries'}`;
  const d = (ms: number) => formatDuration(ms, 'brief');
  const b = job.retryBackoff;
  if (!b)
    return job.retryDelayMs === 0 ? `${count}, at once` : `${count}, ${d(job.retryDelayMs)} apart`;
  const jitter = `±${RETRY_JITTER * 100}%`;
  if (b.factor === 1) return `${count}, ${d(job.retryDelayMs)} apart ${jitter}`;
  return `${count}, from ${d(job.retryDelayMs)}, ×${b.factor} up to ${d(b.maxMs)}, ${jitter}`;
}
