/**
 * A job's `notify:` as the writers of events use it (run-verdicts, the reaper, catch-up): whom
 * each event of the job is told to. Apart from notify-config.ts, which checks and builds the
 * setting, so that the daemon does not load the schemas (defaults.ts says why).
 */
import type { NotifyEventName } from './defaults.js';
import type { JobNotify } from './notify-schema.js';

/**
 * Targets per event: whom an event of the job is told to — and, for a run's failure and its
 * recovery, from which failure in a row (`notify: {after}`), which the verdict that writes them
 * applies in its transaction (store/run-verdicts.ts), whoever writes it: the run's own runner,
 * or a reaper that declared the run lost.
 */
export type EventTargets = Partial<Record<NotifyEventName, readonly string[]>> & {
  /** `notify.after`; absent: 1, every failure is told. */
  failuresInARow?: number;
};

/** A job's `notify:` as the writers of events use it: the targets of each event it is told of. */
export function eventTargets(notify: JobNotify | null): EventTargets {
  const targets: EventTargets = {};
  for (const event of notify?.on ?? []) targets[event] = notify!.to;
  if (notify && notify.after > 1) targets.failuresInARow = notify.after;
  return targets;
}
