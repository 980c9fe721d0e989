/**
 * `baton backfill <job> --from A --to B`: every fire of the job's schedule in [A, B], oldest
 * first, one at a time, each as `baton run <job> --fire T` would run it — its own instant, the
 * job's lock, a fire-key claim (docs/history.md, "Re-runs").
 *
 * Which fires run: by default (`--only-missing`) those without a `done` run in any generation, so
 * a backfill never runs a fire twice, and the history itself is its progress record — a backfill
 * started again after an interruption skips what the first one did. `--again` runs every fire as
 * a new generation; its progress is the audit row of the backfill (`details.lastFire`), and a
 * backfill `--again` of the same range started after one that did not complete resumes after
 * that fire.
 *
 * Ctrl-C (SIGINT, or SIGTERM) lets the fire that is running finish and record its verdict, then
 * stops (exit 130); no further fire starts; a second one interrupts that run too. A fire whose job
 * is running elsewhere (a scheduled run holds the lock) is tried again for up to BLOCKED_MS, then
 * the backfill stops (exit 75). Exit 1 when some fire's run failed (the others still ran), 0
 * otherwise.
 *
 * Started by a runner for its write API (cli/backfill-child.ts), it has an IPC channel to that
 * runner: when the channel closes (the runner died) it stops as on a second signal — its run
 * recorded `interrupted`, no further fire — and exits: a backfill never outlives its runner.
 */
import type { CommandModule } from 'yargs';
import type { JobDefinition } from '../../config/schema.js';
import { BatonError, errorMessage, InterruptedError, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { actingOperator, checkedReason, passedReason } from '../../operator.js';
import {
  listActions,
  recordAction,
  setActionDetails,
  setActionOutcome,
} from '../../store/audit.js';
import { winnersOfFire, winnersOfFires } from '../../store/fire-reads.js';
import type { Queryable } from '../../store/deadline.js';
import type { Run } from '../../store/runs.js';
import { delay } from '../../delay.js';
import { action } from '../action.js';
import { progressFor, type FireLine, type Progress } from '../backfill-progress.js';
import { ForegroundSession } from '../foreground-fire.js';
import {
  findJob,
  resolveDatabase,
  resolveHost,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import { parseFireTime } from '../../instants.js';
import { resolveConfig } from '../config-options.js';
import { firesBetween } from '../past-fires.js';
import { describePlan, describeRun, planRerun } from '../rerun-plan.js';

/** More fires than this need `--yes`. */
export const BACKFILL_BOUND = 100;
/** Never more than this many fires in one backfill, `--yes` or not. */
const BACKFILL_MAX = 100_000;
/** How long one fire may find its job running elsewhere before the backfill gives up. */
const BLOCKED_MS = 60_000;
const RETRY_MS = 250;
/** GET_LOCK's wait per try: short, because the session's heartbeat waits behind it. */
const LOCK_WAIT_SECONDS = 1;

interface BackfillArgs extends CommonArgs {
  job: string;
  from: string;
  to: string;
  'only-missing': boolean;
  again: boolean;
  'dry-run': boolean;
  yes: boolean;
  reason?: string;
  json: boolean;
}

class BackfillBlockedError extends BatonError {
  constructor(message: string) {
    super('LOCK_HELD', message, ExitCode.TempFail);
  }
}

export const backfillCommand: CommandModule<object, BackfillArgs> = {
  command: 'backfill <job>',
  describe:
    "Run a job's past fires in [--from, --to], oldest first, one at a time, each with its own " +
    'instant; resumable (exit 0; 1 when a run failed; 75 when the job stays busy; 130 on Ctrl-C)',
  builder: (y) =>
    withCommonOptions(y)
      .positional('job', { type: 'string', demandOption: true, describe: 'job name' })
      .option('from', {
        type: 'string',
        demandOption: true,
        describe: 'the first instant of the range (ISO-8601; without an offset: UTC)',
      })
      .option('to', {
        type: 'string',
        demandOption: true,
        describe: 'the last instant of the range, included (a past instant)',
      })
      .option('only-missing', {
        type: 'boolean',
        default: true,
        describe: 'run only the fires without a successful run (the default)',
      })
      .option('again', {
        type: 'boolean',
        default: false,
        describe: 'run every fire of the range, as a new generation of each',
      })
      .option('dry-run', {
        type: 'boolean',
        default: false,
        describe: 'list the fires and what would happen to each; run nothing',
      })
      .option('yes', {
        type: 'boolean',
        default: false,
        describe: `go ahead with more than ${BACKFILL_BOUND} fires`,
      })
      .option('reason', { type: 'string', describe: 'why, for the audit (baton audit)' })
      .option('json', {
        type: 'boolean',
        default: false,
        describe: 'one JSON object per fire on stdout (also whenever stderr is not a terminal)',
      }) as never,
  handler: action(async (args: BackfillArgs) => {
    const owner = new OwningRunner();
    const config = resolveConfig(args);
    const job = findJob(config, args.job);
    const from = parseRangeEnd('--from', args.from);
    const to = parseRangeEnd('--to', args.to);
    if (to < from) throw new UsageError(`--to ${args.to} is before --from ${args.from}`);
    const reason = checkedReason(args.reason) ?? passedReason();
    const again = args.again;
    const target = resolveDatabase(args);
    const host = resolveHost(args);
    const session = await ForegroundSession.open(config, target, host, 'finish');
    const { pool } = session;
    owner.follow(session);
    try {
      const now = await session.lock.now();
      if (to > now) {
        throw new UsageError(
          `--to ${to.toISOString()} has not come yet (the database's clock says ` +
            `${now.toISOString()}): a backfill runs past fires; the schedule runs the rest`,
        );
      }
      const fires = firesBetween(job, from, to, args.yes ? BACKFILL_MAX : BACKFILL_BOUND);
      if (fires.length === 0) {
        throw new UsageError(
          `${job.name} ("${job.schedule}", ${job.timezone}) has no fire in ` +
            `[${from.toISOString()}, ${to.toISOString()}]`,
        );
      }
      if (!args.yes && fires.length > BACKFILL_BOUND) {
        const n = firesBetween(job, from, to, BACKFILL_MAX).length;
        throw new UsageError(
          `the range has ${n > BACKFILL_MAX ? `more than ${BACKFILL_MAX}` : n} fires of ` +
            `${job.name}, more than ${BACKFILL_BOUND}: add --yes to run them all`,
        );
      }
      if (fires.length > BACKFILL_MAX) {
        throw new UsageError(`the range has more than ${BACKFILL_MAX} fires: split it`);
      }
      const progress = progressFor(args.json);
      const range = { from: from.toISOString(), to: to.toISOString() };
      const resumeAfter = again
        ? await interruptedAgain(pool, config.namespace, job.name, range)
        : null;
      if (args['dry-run'])
        return dryRun(pool, config.namespace, job, fires, again, resumeAfter, progress);

      const details: Record<string, unknown> = {
        ...range,
        mode: again ? 'again' : 'only-missing',
        fires: fires.length,
        lastFire: resumeAfter?.toISOString() ?? null,
        ...(resumeAfter ? { resumedAfter: resumeAfter.toISOString() } : {}),
        finished: false,
      };
      const audit = {
        namespace: config.namespace,
        job: job.name,
        ...actingOperator(),
        host,
        reason,
      };
      const auditId = await recordAction(pool, { ...audit, action: 'backfill', details });
      if (resumeAfter)
        progress.note(`resuming the --again backfill after ${resumeAfter.toISOString()}`);
      session.onFinishRequested = (running) =>
        progress.note(
          running
            ? 'stopping after the fire that is running (Ctrl-C again to interrupt it)'
            : 'stopping',
        );
      const counts = { ran: 0, failed: 0, skipped: 0 };
      let outcome = 'completed';
      let code: number = ExitCode.Ok;
      try {
        for (let i = 0; i < fires.length; i++) {
          const at = fires[i]!;
          const line = { fire: at.toISOString(), index: i + 1, of: fires.length };
          if (session.stopRequested) throw new InterruptedError('interrupted');
          if (resumeAfter && at <= resumeAfter) {
            counts.skipped++;
            progress.fire({ ...line, action: 'skip', reason: 'run by the interrupted backfill' });
            continue;
          }
          // Recorded once the run has ended, with its outcome, as `baton run --fire` says it.
          const result = await backfillOne(session, job, at, again, (runId, status) =>
            recordAction(pool, {
              ...audit,
              action: 'rerun',
              fire: at,
              runId,
              details: { backfill: auditId, again },
              outcome: status,
            }),
          );
          progress.fire({ ...line, ...result });
          if (result.action === 'skip') counts.skipped++;
          else if (result.status === 'done') counts.ran++;
          else counts.failed++;
          details.lastFire = at.toISOString();
          await setActionDetails(pool, auditId, details);
        }
        details.finished = true;
        if (counts.failed > 0) code = ExitCode.Failure;
      } catch (err) {
        if (err instanceof InterruptedError) {
          outcome = `interrupted by ${session.interruptedBy ?? 'a signal'}`;
          code = ExitCode.Interrupted;
        } else if (err instanceof BackfillBlockedError) {
          outcome = `stopped: ${err.message}`;
          code = err.exitCode;
        } else {
          outcome = `stopped: ${errorMessage(err)}`;
          await setActionOutcome(pool, auditId, outcome).catch(() => {});
          throw err;
        }
      }
      const said = `${outcome}: ${counts.ran} run, ${counts.failed} failed, ${counts.skipped} skipped`;
      await setActionDetails(pool, auditId, details);
      await setActionOutcome(pool, auditId, said);
      progress.done({ outcome, ...counts, fires: fires.length, auditId });
      return code;
    } finally {
      owner.close();
      await session.close();
    }
  }),
};

/**
 * The runner that started this backfill for its write API, if one did: its IPC channel closes
 * when it dies, and the backfill then stops as on a second signal (see the header). A process
 * without the channel (an operator's `baton backfill`) has nothing to follow.
 */
class OwningRunner {
  private gone = false;
  private session: ForegroundSession | null = null;

  constructor() {
    if (!process.connected) return;
    process.once('disconnect', this.onGone);
    // The channel is only watched: it must not keep this process alive once the backfill is done.
    process.channel?.unref();
  }

  private readonly onGone = () => {
    this.gone = true;
    // Its stderr was a pipe to the runner: what is written there now goes nowhere.
    process.stderr.on('error', () => {});
    this.session?.stopNow(WHY_RUNNER_GONE);
  };

  /** The session to stop when the runner goes (at once if it has gone already). */
  follow(session: ForegroundSession): void {
    this.session = session;
    if (this.gone) session.stopNow(WHY_RUNNER_GONE);
  }

  close(): void {
    process.off('disconnect', this.onGone);
    this.session = null;
  }
}

const WHY_RUNNER_GONE = 'the end of the runner that started it';

function parseRangeEnd(option: string, value: string): Date {
  try {
    return parseFireTime(value);
  } catch (err) {
    throw new UsageError(`${option}: ${errorMessage(err)}`);
  }
}

type Result = Pick<FireLine, 'action' | 'rerun' | 'runId' | 'status' | 'reason'>;

/**
 * One fire: planned from its winners, run through the lock, tried again while the job runs
 * elsewhere; a fire that turns out done meanwhile (a claim refused by `unlessDone`) is planned
 * again and skipped.
 */
async function backfillOne(
  session: ForegroundSession,
  job: JobDefinition,
  at: Date,
  again: boolean,
  audit: (runId: number, status: string) => Promise<number>,
): Promise<Result> {
  const blockedUntil = Date.now() + BLOCKED_MS;
  for (;;) {
    const winners = await winnersOfFire(session.pool, session.namespace, job.name, at);
    const plan = planRerun(winners, again);
    if (plan.kind === 'refuse') {
      return {
        action: 'skip',
        runId: plan.done.id,
        reason: `already ran (${describeRun(plan.done)})`,
      };
    }
    const outcome = await session.run({
      job,
      at,
      trigger: 'rerun',
      rerun: plan.rerun,
      unlessDone: !again,
      waitSeconds: LOCK_WAIT_SECONDS,
      tee: false,
    });
    if (outcome.status === 'ran') {
      await audit(outcome.runId, outcome.result.status);
      return {
        action: 'run',
        rerun: plan.rerun,
        runId: outcome.runId,
        status: outcome.result.status,
      };
    }
    if (outcome.status !== 'skipped') throw new Error(`${job.name} not run (${outcome.status})`);
    if (session.stopRequested) throw new InterruptedError('interrupted');
    if (outcome.kind === 'already-ran') continue;
    if (Date.now() > blockedUntil) {
      throw new BackfillBlockedError(
        `the fire ${at.toISOString()} could not be run for ${BLOCKED_MS / 1000} s: ${outcome.reason}`,
      );
    }
    await delay(RETRY_MS);
  }
}

/**
 * The last fire done by the newest `--again` backfill of the same job and range, when that one
 * did not finish (interrupted, stopped): the fire to resume after. Null to start at the range's
 * beginning.
 */
async function interruptedAgain(
  db: Queryable,
  namespace: string,
  job: string,
  range: { from: string; to: string },
): Promise<Date | null> {
  const actions = await listActions(db, { namespace, jobs: [job], limit: 200 });
  const last = actions.find(
    (a) =>
      a.action === 'backfill' &&
      a.details?.mode === 'again' &&
      a.details.from === range.from &&
      a.details.to === range.to,
  );
  if (!last || last.details?.finished === true || typeof last.details?.lastFire !== 'string') {
    return null;
  }
  return new Date(last.details.lastFire);
}

/** `--dry-run`: every fire and what a backfill would do to it; exit 0. */
async function dryRun(
  pool: Queryable,
  namespace: string,
  job: JobDefinition,
  fires: readonly Date[],
  again: boolean,
  resumeAfter: Date | null,
  progress: Progress,
): Promise<number> {
  const winners = await winnersOfFires(
    pool,
    namespace,
    fires.map((scheduledAt) => ({ job: job.name, scheduledAt })),
  );
  const byFire = new Map<number, Run[]>();
  for (const w of winners.sort((a, b) => a.rerun - b.rerun || a.id - b.id)) {
    const key = w.scheduledAt.getTime();
    byFire.set(key, [...(byFire.get(key) ?? []), w]);
  }
  let toRun = 0;
  fires.forEach((at, i) => {
    const line = {
      fire: at.toISOString(),
      index: i + 1,
      of: fires.length,
      action: 'plan' as const,
    };
    if (resumeAfter && at <= resumeAfter) {
      progress.fire({ ...line, reason: 'skip: run by the interrupted backfill' });
      return;
    }
    const plan = planRerun(byFire.get(at.getTime()) ?? [], again);
    if (plan.kind === 'run') toRun++;
    progress.fire({
      ...line,
      ...(plan.kind === 'run' ? { rerun: plan.rerun } : {}),
      reason: describePlan(plan),
    });
  });
  progress.done({ outcome: 'dry run', fires: fires.length, wouldRun: toRun });
  return ExitCode.Ok;
}
