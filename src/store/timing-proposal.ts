/**
 * A job's timing as a proposal to `baton_timings` (store/timings.ts `recordTiming`), and the rule
 * that chooses its effective instant when nobody else does. One rule for the two recorders — a
 * runner that loads a timing the fleet lacks (daemon/timing-watch.ts) and an operator's
 * `baton definitions apply` without `--at` (actions/definitions.ts) — so that the instant an
 * operator is shown in a dry run is the one a runner would record.
 *
 * The rule (schedule/timing-switch.ts has its reasons): a job's first version is in force from
 * the start; a later one takes effect at the first fire instant of either timing, at least the
 * settle window after it is recorded and not before the latest version's own instant, whose day
 * the switch neither doubles nor skips.
 *
 * Kept out of config/schema.ts and value-schemas.ts: the runner imports this, and it must not
 * load zod (its file is parsed in a worker thread, config/load-isolated.ts).
 */
import { DEFAULT_SETTLE_MS } from '../config/defaults.js';
import { timingPrint } from '../config/fingerprint.js';
import type { Config, JobDefinition } from '../config/schema.js';
import { parseSchedule, type Schedule } from '../schedule/cron.js';
import { defaultSwitchInstant } from '../schedule/timing-switch.js';
import {
  FIRST_VERSION_AT,
  type TimingChosenBy,
  type TimingProposal,
  type TimingRecord,
} from './timings.js';

/** The settle window of a schedules file: `scheduleChanges.settle`, else DEFAULT_SETTLE_MS. */
export function settleMsOf(config: Pick<Config, 'scheduleChanges'>): number {
  return config.scheduleChanges?.settleMs ?? DEFAULT_SETTLE_MS;
}

/**
 * The default effective instant of `next` recorded at `now` after `latest` (none: the job's
 * first version, in force from the start).
 */
export function defaultEffective(
  latest: Pick<TimingRecord, 'schedule' | 'timezone' | 'effectiveAt'> | null,
  next: Schedule,
  now: Date,
  settleMs: number,
): { at: Date; chosenBy: TimingChosenBy } {
  if (!latest) return { at: FIRST_VERSION_AT, chosenBy: 'first' };
  const notBefore = Math.max(now.getTime() + settleMs, latest.effectiveAt.getTime());
  const old = parseSchedule(latest.schedule, latest.timezone);
  return { at: defaultSwitchInstant(old, next, new Date(notBefore)), chosenBy: 'settle' };
}

/**
 * The proposal of `job`'s timing (a job with a schedule of its own), effective at the default
 * instant unless `effective` says otherwise.
 */
export function timingProposal(
  job: Pick<JobDefinition, 'name' | 'schedule' | 'timezone'>,
  o: {
    namespace: string;
    recordedBy: string;
    settleMs: number;
    effective?: TimingProposal['effective'];
    again?: boolean;
  },
): TimingProposal {
  if (job.schedule == null) throw new Error(`job "${job.name}" has no schedule of its own`);
  const next = parseSchedule(job.schedule, job.timezone);
  return {
    namespace: o.namespace,
    job: job.name,
    print: timingPrint(job)!,
    schedule: job.schedule,
    timezone: job.timezone,
    recordedBy: o.recordedBy,
    effective: o.effective ?? ((latest, now) => defaultEffective(latest, next, now, o.settleMs)),
    ...(o.again ? { again: true } : {}),
  };
}
