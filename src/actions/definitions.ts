/**
 * An operator's say in a job's timing versions (store/timings.ts; the rule is
 * schedule/timing-switch.ts): `baton definitions apply` (cli/commands/definitions.ts) records
 * the timings of a schedules file the fleet lacks — or re-proposes an earlier one, a rollback —
 * effective at an instant the operator chose (`--at`) or at the default instant a runner would
 * record (store/timing-proposal.ts), and moves a pending version's instant. Written once here, with
 * its audit rows, so that another surface (the write API) can call the same two functions.
 *
 * Two steps, so that nothing is half-applied: `planApply` judges every job against the table as
 * read, the database's clock and the file, and refuses the whole invocation (a UsageError listing
 * every job's problem) before `applyPlan` writes anything. A dry run stops after the plan. What
 * the plan cannot rule out is a change between the read and the write (a runner recording the
 * same timing meanwhile, an instant coming within the margin): the write says so for that job,
 * and its audit row keeps the outcome.
 */
import { timingPrint } from '../config/fingerprint.js';
import type { JobDefinition } from '../config/schema.js';
import { errorMessage, UsageError } from '../errors.js';
import { parseSchedule } from '../schedule/cron.js';
import { dayAround, dayStarting } from '../schedule/timing-switch.js';
import { recordAction, setActionOutcome } from '../store/audit.js';
import type { Queryable } from '../store/deadline.js';
import { defaultEffective, timingProposal } from '../store/timing-proposal.js';
import {
  FIRST_VERSION_AT,
  readTimings,
  recordTiming,
  RETIME_MARGIN_SECONDS,
  retimeTiming,
  type TimingChosenBy,
  type TimingRecord,
} from '../store/timings.js';
import { truncate } from '../text.js';
import { transitionPreview, type Timing, type TransitionPreview } from '../fleet/timing-preview.js';
import { versionBefore } from '../fleet/timing-status.js';
import type { Actor } from './pause.js';

/** The instant an operator chose for a switch (`--at`), before it is read in each job's zone. */
export type SwitchAt =
  /** An instant (ISO-8601 with Z or an offset). */
  | { kind: 'instant'; at: Date; given: string }
  /** The first midnight in the job's zone at least the settle window (and the margin) away. */
  | { kind: 'midnight'; given: string }
  /** The first instant of that date (YYYY-MM-DD) in the job's zone. */
  | { kind: 'date'; date: string; given: string };

/**
 * What `apply` does with a job: records its `first` version (in force from the start), a
 * `change` (a timing the table lacks) or a `rollback` (an earlier version's timing, as a new
 * version); moves a pending version's instant (`retime`); or nothing — its timing is the latest
 * version, `pending` or `unchanged` (in force).
 */
export type ApplyKind = 'first' | 'change' | 'rollback' | 'retime' | 'pending' | 'unchanged';

export interface ApplyStep {
  job: string;
  kind: ApplyKind;
  /** The file's timing of the job. */
  timing: Timing;
  /** The version recorded (the latest + 1), moved, or that the file's timing is. */
  version: number;
  /** Its effective instant (FIRST_VERSION_AT for a first version); a retime: the new one. */
  at: Date;
  chosenBy: TimingChosenBy;
  /** A retime: the instant it moves from. */
  previousAt: Date | null;
  /** A rollback: the latest earlier version with this timing. */
  rollbackOf: number | null;
  /** Pending versions this one takes effect before, so that they never do. */
  supersedes: number[];
  /** The switch as the fleet will make it; null for a first version and an unchanged job. */
  preview: TransitionPreview | null;
  /** What the operator should know (an --at that does not apply, a change still pending). */
  notes: string[];
}

export interface ApplyPlan {
  namespace: string;
  /** The database's time the plan was judged at. */
  now: Date;
  settleMs: number;
  steps: ApplyStep[];
}

export interface PlanInput {
  namespace: string;
  now: Date;
  settleMs: number;
  /** The jobs to apply, each with a schedule of its own. */
  jobs: readonly Pick<JobDefinition, 'name' | 'schedule' | 'timezone'>[];
  /** Whether the operator named them (else: every enabled scheduled job of the file). */
  named: boolean;
  timings: ReadonlyMap<string, readonly TimingRecord[]>;
  at: SwitchAt | null;
}

const MARGIN_MS = RETIME_MARGIN_SECONDS * 1000;
/** The furthest `--at` accepted: ten years from now. */
const MAX_AHEAD_MS = 10 * 366 * 86_400_000;

/**
 * Judges every job, and refuses them all (UsageError, every problem named) if one cannot be
 * applied. Reads nothing: `timings` and `now` were read by the caller.
 */
export function planApply(input: PlanInput): ApplyPlan {
  const problems: string[] = [];
  const steps: ApplyStep[] = [];
  for (const job of input.jobs) {
    try {
      steps.push(planJob(input, job));
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
      problems.push(err.message);
    }
  }
  if (problems.length > 0) {
    throw new UsageError(
      (problems.length === 1 ? problems[0]! : problems.map((p) => `- ${p}`).join('\n')) +
        '\nnothing was written',
    );
  }
  return { namespace: input.namespace, now: input.now, settleMs: input.settleMs, steps };
}

function planJob(input: PlanInput, job: Pick<JobDefinition, 'name' | 'schedule' | 'timezone'>) {
  const { now } = input;
  const timing = { schedule: job.schedule!, timezone: job.timezone };
  const records = input.timings.get(job.name) ?? [];
  const latest = records.at(-1) ?? null;
  const print = timingPrint(job)!;
  const base = {
    job: job.name,
    timing,
    previousAt: null,
    rollbackOf: null,
    supersedes: [] as number[],
    notes: [] as string[],
  };
  if (!latest) {
    return {
      ...base,
      kind: 'first' as const,
      version: 1,
      at: FIRST_VERSION_AT,
      chosenBy: 'first' as const,
      preview: null,
      notes: input.at
        ? [`--at does not apply: a job's first version is in force from the start`]
        : [],
    };
  }
  if (latest.print === print) {
    const pending = latest.effectiveAt > now;
    const own = { ...base, version: latest.version, chosenBy: latest.chosenBy };
    if (!input.at || (!pending && !input.named)) {
      return {
        ...own,
        kind: pending ? ('pending' as const) : ('unchanged' as const),
        at: latest.effectiveAt,
        preview: pending ? previewOf(records, latest, latest.effectiveAt) : null,
      };
    }
    if (!pending) {
      throw new UsageError(
        `${job.name}: version ${latest.version}, this file's timing, is in force ` +
          (latest.chosenBy === 'first'
            ? 'from the start'
            : `since ${latest.effectiveAt.toISOString()}`) +
          ': an instant in force does not move (--at); nothing to change',
      );
    }
    if (latest.effectiveAt.getTime() <= now.getTime() + MARGIN_MS) {
      throw new UsageError(
        `${job.name}: version ${latest.version} takes effect at ` +
          `${latest.effectiveAt.toISOString()}, less than ${RETIME_MARGIN_SECONDS} s from now ` +
          `(database time ${now.toISOString()}): too late to move it, the runners may be ` +
          'switching already',
      );
    }
    const at = switchInstant(input, job, input.at);
    return {
      ...own,
      kind: 'retime' as const,
      at,
      chosenBy: 'operator' as const,
      previousAt: latest.effectiveAt,
      supersedes: supersededBy(records, at, now, latest.version),
      preview: previewOf(records, latest, at),
    };
  }
  const earlier = records.filter((r) => r.print === print).at(-1) ?? null;
  const next = parseSchedule(timing.schedule, timing.timezone);
  const chosen = input.at
    ? { at: switchInstant(input, job, input.at), chosenBy: 'operator' as const }
    : defaultEffective(latest, next, now, input.settleMs);
  const to = { version: latest.version + 1, effectiveAt: chosen.at, ...timing };
  const notes: string[] = [];
  const pendingLatest = latest.effectiveAt > now;
  if (pendingLatest && chosen.at >= latest.effectiveAt) {
    notes.push(
      `version ${latest.version} (pending) takes effect first, at ` +
        `${latest.effectiveAt.toISOString()}; to cancel it, choose an instant before that with --at`,
    );
  }
  return {
    ...base,
    kind: earlier ? ('rollback' as const) : ('change' as const),
    version: to.version,
    at: chosen.at,
    chosenBy: chosen.chosenBy,
    rollbackOf: earlier?.version ?? null,
    supersedes: supersededBy(records, chosen.at, now, to.version),
    preview: previewOf(records, to, chosen.at),
    notes,
  };
}

/** The pending versions (numbered below `version`) that a switch at `at` keeps from taking effect. */
function supersededBy(
  records: readonly TimingRecord[],
  at: Date,
  now: Date,
  version: number,
): number[] {
  return records
    .filter((r) => r.version < version && r.effectiveAt > now && r.effectiveAt >= at)
    .map((r) => r.version);
}

/** The preview of `to` taking effect at `at`, after the versions of `records` below it. */
function previewOf(
  records: readonly TimingRecord[],
  to: Timing & { version: number },
  at: Date,
): TransitionPreview {
  const from = versionBefore(
    records.filter((r) => r.version !== to.version),
    { version: to.version, effectiveAt: at },
  );
  return transitionPreview(from, to, at);
}

/** `--at` for `job`: in its zone where it names a day; refused in the past or within the margin. */
function switchInstant(
  input: PlanInput,
  job: Pick<JobDefinition, 'name' | 'timezone'>,
  chosen: SwitchAt,
): Date {
  const { now } = input;
  let at: Date;
  if (chosen.kind === 'instant') {
    at = chosen.at;
  } else if (chosen.kind === 'midnight') {
    const notBefore = new Date(now.getTime() + Math.max(input.settleMs, MARGIN_MS));
    const day = dayAround(job.timezone, notBefore);
    at = day.start.getTime() === notBefore.getTime() ? day.start : day.end;
  } else {
    // A date croner cannot reach (the year 3000 on) is no date of a schedule either.
    let start: Date | null;
    try {
      start = dayStarting(job.timezone, chosen.date);
    } catch {
      start = null;
    }
    if (!start) throw new UsageError(`--at "${chosen.given}": no such date`);
    at = start;
  }
  const where = chosen.kind === 'instant' ? '' : ` (${job.timezone})`;
  // A switch decades ahead would hold back every change after it (none is recorded before the
  // latest version's instant): almost surely a typo in the year (2999 for 2029).
  if (at.getTime() > now.getTime() + MAX_AHEAD_MS) {
    throw new UsageError(
      `${job.name}: --at "${chosen.given}" is ${at.toISOString()}${where}, more than ten ` +
        `years ahead (database time ${now.toISOString()}); choose a nearer instant`,
    );
  }
  if (at.getTime() <= now.getTime()) {
    throw new UsageError(
      `${job.name}: --at "${chosen.given}" is ${at.toISOString()}${where}, in the past by the ` +
        `database's clock (now ${now.toISOString()})`,
    );
  }
  if (at.getTime() <= now.getTime() + MARGIN_MS) {
    throw new UsageError(
      `${job.name}: --at "${chosen.given}" is ${at.toISOString()}${where}, less than ` +
        `${RETIME_MARGIN_SECONDS} s from now (database time ${now.toISOString()}): every runner ` +
        'must have read the new version before its instant comes; choose a later one',
    );
  }
  return at;
}

/** What came of one step. */
export interface ApplyResult {
  step: ApplyStep;
  /** The table changed as the step says. */
  applied: boolean;
  /** The version as recorded (or moved), when it is. */
  record: TimingRecord | null;
  auditId: number | null;
  /** In words, as the audit row's outcome says it. */
  outcome: string;
}

/** The steps that write: a version recorded or an instant moved. */
export function writes(step: ApplyStep): boolean {
  return (
    step.kind === 'first' ||
    step.kind === 'change' ||
    step.kind === 'rollback' ||
    step.kind === 'retime'
  );
}

/**
 * Writes the plan's steps, each with its audit row (written first; its outcome once known).
 * Steps that write nothing are answered as planned.
 */
export async function applyPlan(db: Queryable, plan: ApplyPlan, by: Actor): Promise<ApplyResult[]> {
  const results: ApplyResult[] = [];
  for (const step of plan.steps) {
    if (!writes(step)) {
      results.push({ step, applied: false, record: null, auditId: null, outcome: step.kind });
      continue;
    }
    results.push(await applyStep(db, plan, step, by));
  }
  return results;
}

async function applyStep(
  db: Queryable,
  plan: ApplyPlan,
  step: ApplyStep,
  by: Actor,
): Promise<ApplyResult> {
  const { namespace } = plan;
  const auditId = await recordAction(db, {
    namespace,
    action: step.kind === 'retime' ? 'retime' : 'timing',
    job: step.job,
    operator: by.operator,
    via: by.via,
    host: by.host,
    reason: by.reason,
    details: {
      change: step.kind,
      version: step.version,
      schedule: step.timing.schedule,
      timezone: step.timing.timezone,
      effectiveAt: step.kind === 'first' ? null : step.at.toISOString(),
      chosenBy: step.chosenBy,
      ...(step.previousAt ? { previousAt: step.previousAt.toISOString() } : {}),
      ...(step.rollbackOf != null ? { rollbackOf: step.rollbackOf } : {}),
    },
  });
  let result: Omit<ApplyResult, 'auditId' | 'step'>;
  try {
    result =
      step.kind === 'retime'
        ? await retime(db, namespace, step, step.version)
        : await record(db, plan, step, by);
  } catch (err) {
    await setActionOutcome(db, auditId, `failed: ${errorMessage(err)}`).catch(() => {});
    throw err;
  }
  await setActionOutcome(db, auditId, result.outcome);
  return { ...result, step, auditId };
}

async function retime(
  db: Queryable,
  namespace: string,
  step: ApplyStep,
  version: number,
): Promise<Omit<ApplyResult, 'auditId' | 'step'>> {
  const moved = await retimeTiming(db, namespace, step.job, version, step.at);
  if (!moved) {
    return {
      applied: false,
      record: null,
      outcome:
        `not moved: version ${version} is no longer pending more than ` +
        `${RETIME_MARGIN_SECONDS} s ahead, or a newer version was recorded meanwhile`,
    };
  }
  return {
    applied: true,
    record: await readVersion(db, namespace, step.job, version),
    outcome: `moved version ${version} to ${step.at.toISOString()}`,
  };
}

async function record(
  db: Queryable,
  plan: ApplyPlan,
  step: ApplyStep,
  by: Actor,
): Promise<Omit<ApplyResult, 'auditId' | 'step'>> {
  const operatorAt = step.chosenBy === 'operator' ? step.at : null;
  const proposal = timingProposal(
    { name: step.job, ...step.timing },
    {
      namespace: plan.namespace,
      recordedBy: truncate(`${by.operator}@${by.host}`, 255),
      settleMs: plan.settleMs,
      // A rollback's timing is recorded already, as an older version: recorded again.
      again: true,
      ...(operatorAt
        ? { effective: () => ({ at: operatorAt, chosenBy: 'operator' as const }) }
        : {}),
    },
  );
  const { record: recorded, recorded: ours } = await recordTiming(db, proposal);
  if (ours) {
    return {
      applied: true,
      record: recorded,
      outcome:
        `recorded version ${recorded.version}` +
        (recorded.chosenBy === 'first'
          ? ', in force from the start'
          : `, effective ${recorded.effectiveAt.toISOString()}`),
    };
  }
  // Someone (a runner that loaded the file) recorded this timing between the plan and now.
  const by2 = `recorded meanwhile as version ${recorded.version} by ${recorded.recordedBy}`;
  if (!operatorAt || recorded.effectiveAt.getTime() === operatorAt.getTime()) {
    return { applied: true, record: recorded, outcome: by2 };
  }
  const moved = await retime(db, plan.namespace, step, recorded.version);
  return { ...moved, outcome: `${by2}; ${moved.outcome}` };
}

async function readVersion(
  db: Queryable,
  namespace: string,
  job: string,
  version: number,
): Promise<TimingRecord | null> {
  return (
    (await readTimings(db, namespace, [job])).get(job)?.find((r) => r.version === version) ?? null
  );
}
