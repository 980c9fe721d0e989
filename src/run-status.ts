/**
 * The vocabulary of the run history, shared by every layer (the store writes it, the protocol
 * decides it, metrics and commands show it, job authors read it): no SQL here, no behaviour.
 * docs/history.md documents each value for operators; `store/runs.ts` draws the life of a row.
 */

export const RUN_STATUSES = [
  'running',
  'done',
  'failed',
  'timeout',
  'interrupted',
  // Stopped by an operator (`baton kill`, the write API): who and why are in `error`.
  'killed',
  'lost',
  'skipped',
  'missed',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
/** How a run that started can end. */
export type FinalStatus = Exclude<RunStatus, 'running' | 'skipped' | 'missed'>;
/** Every final status, in RUN_STATUSES order (the metrics start a series at 0 for each). */
export const FINAL_STATUSES = RUN_STATUSES.filter(
  (s): s is FinalStatus => s !== 'running' && s !== 'skipped' && s !== 'missed',
);

/**
 * What started a run: its schedule, an operator now (`manual`, at the moment asked), a runner
 * catching up, or an operator running a past fire with its own instant (`rerun`: `baton run
 * --fire`, `baton backfill`; any generation of the fire, see docs/history.md "Re-runs"), or its
 * parents' runs of the instant (`after`: a child job, docs/dependencies.md; its instant is theirs).
 */
export const TRIGGERS = ['schedule', 'manual', 'catchup', 'rerun', 'after'] as const;
export type Trigger = (typeof TRIGGERS)[number];

/**
 * Why a runner did not run a fire it considered: the `reason_kind` of its `skipped` row. The
 * row's `reason` is the sentence for people, rendered from the kind once
 * (`coordination/skip-reasons.ts`); queries, filters and metrics use the kind, never the words.
 * - `taken`: another runner has this fire: it is running it, or claiming it right now;
 * - `already-ran`: another runner already ran this fire (or this runner already took one of
 *   its worker slots);
 * - `overlap`: an earlier run of the job is still running (`overlap: skip`, or a queued fire
 *   that gave up waiting), here or on another runner, or a manual run is;
 * - `behind`: a later fire of the job is already running: this runner's clock is behind;
 * - `paused`: the job is paused;
 * - `upstream`: a child job (`after:`) whose parents' runs of the instant did not let it run
 *   (one failed, was skipped, missed, paused, or did not finish in time); written once per fire.
 * - `pool`: every slot of the job's pool (`pool:`, docs/pools.md) was taken by other runs
 *   (`poolFull: skip`, or a queued fire that gave up waiting); the reason names the holders.
 * - `calendar`: an instant of the job's schedule its calendars skip (`skipOn`, `onlyOn`,
 *   docs/schedules.md): no fire at all, written once (daemon/calendar-watch.ts); with `shift`,
 *   the reason names where it moved.
 */
export const SKIP_KINDS = [
  'taken',
  'already-ran',
  'overlap',
  'behind',
  'paused',
  'upstream',
  'pool',
  'calendar',
] as const;
export type SkipKind = (typeof SKIP_KINDS)[number];

/**
 * The kind of a `missed` row: `not-run` (nobody attempted the fire), `in-doubt` (the fire fell
 * before a database failover and the new primary has no row of it: it may have run on the old
 * one, so it is not caught up; daemon/in-doubt.ts) or `not-claimed` (a runner held the job's lock
 * for the fire but could not write its claim — the database did not answer in time, or its clock
 * had not reached the fire — so the job did not run; recorded late, fire/verdict-backlog.ts) or
 * `no-eligible-runner` (runners were alive, but none of them may run the job: its `runOn` asks
 * for tags or hosts none of them has; daemon/placement-watch.ts, docs/placement.md).
 */
export const MISSED_KINDS = ['not-run', 'in-doubt', 'not-claimed', 'no-eligible-runner'] as const;
export type MissedKind = (typeof MISSED_KINDS)[number];

/**
 * `baton_runs.reason_kind`: a skip's kind, or a `missed` row's. NULL on the rows of runs, and on
 * rows written before the column existed whose sentence the migration could not classify.
 */
export const REASON_KINDS = [...SKIP_KINDS, ...MISSED_KINDS] as const;
export type ReasonKind = (typeof REASON_KINDS)[number];
