/**
 * Jitter: a job with `jitter: 30s` starts its fire up to 30 s after the fire's instant, so that
 * many jobs on one expression (every `0 * * * *` of a fleet) do not all hit their targets in the
 * same second.
 *
 * The delay is not random: every runner must compute the same one, or the runner that drew the
 * shortest delay would always win the fire, and `baton list` could not say when a fire will
 * start. It is derived from what every runner already agrees on — the namespace, the job's name
 * and the fire's instant — through sha256, so it is spread evenly over [0, jitter), differs
 * between jobs and between fires, and stays the same across restarts, hosts and versions.
 *
 * The fire keeps its instant: `scheduled_at` and BATON_SCHEDULED_AT are the cron instant (the
 * fire key is unchanged), and lag and lateness are measured from the planned start
 * (`plannedStart`), not from the instant, since the delay is wanted.
 */
import { createHash } from 'node:crypto';

/**
 * The delay in ms, in [0, jitterMs), of the fire of `job` at `fireAt` in `namespace`; 0 when
 * `jitterMs` is 0 (no jitter). 6 bytes of the hash (2^48) are well within a double's exact
 * integers and make the modulo's bias negligible for any jitter a schedule can have.
 */
export function jitterDelayMs(
  namespace: string,
  job: string,
  fireAt: Date,
  jitterMs: number,
): number {
  const range = Math.floor(jitterMs);
  if (!(range > 0)) return 0;
  const digest = createHash('sha256')
    .update(`${namespace}\0${job}\0${fireAt.toISOString()}`)
    .digest();
  return digest.readUIntBE(0, 6) % range;
}

/**
 * A number in [0, 1) drawn from the fire's identity and `salt`, the same on every runner: what
 * other delays that must be the same everywhere are spread by (a retry's backoff,
 * config/retry-delay.ts, salts it with the attempt). Apart from `jitterDelayMs`, whose values
 * must not change between versions.
 */
export function fireFraction(namespace: string, job: string, fireAt: Date, salt: string): number {
  const digest = createHash('sha256')
    .update(`${namespace}\0${job}\0${fireAt.toISOString()}\0${salt}`)
    .digest();
  return digest.readUIntBE(0, 6) / 2 ** 48;
}

/** When the fire of `job` at `fireAt` starts: its instant plus its jitter delay. */
export function plannedStart(namespace: string, job: string, fireAt: Date, jitterMs: number): Date {
  return new Date(fireAt.getTime() + jitterDelayMs(namespace, job, fireAt, jitterMs));
}
