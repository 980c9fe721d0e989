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
 * The walk is the backfill action's (actions/backfill.ts), the same the write API's
 * `POST /api/jobs/{job}/backfill` runs in a runner; here, its fires run in this command's
 * foreground session, and its progress is told on the terminal (cli/backfill-progress.ts).
 */
import type { CommandModule } from 'yargs';
import {
  BACKFILL_BOUND,
  planBackfill,
  previewBackfill,
  runBackfill,
} from '../../actions/backfill.js';
import { ownSchedule } from '../../actions/past-fires.js';
import { errorMessage, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { parseFireTime } from '../../instants.js';
import { checkedReason, operatorName } from '../../operator.js';
import { action } from '../action.js';
import { progressFor } from '../backfill-progress.js';
import { resolveConfig } from '../config-options.js';
import { ForegroundSession } from '../foreground-fire.js';
import {
  FREE_TEXT,
  findJob,
  resolveDatabase,
  resolveHost,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';

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
  'with-dependents': boolean;
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
      .option('with-dependents', {
        type: 'boolean',
        default: false,
        describe:
          "run each fire's children (after:) after it, the instant's chain over before the next " +
          'instant (docs/dependencies.md)',
      })
      .option('reason', { ...FREE_TEXT, describe: 'why, for the audit (baton audit)' })
      .option('json', {
        type: 'boolean',
        default: false,
        describe: 'one JSON object per fire on stdout (also whenever stderr is not a terminal)',
      }) as never,
  handler: action(async (args: BackfillArgs) => {
    const config = resolveConfig(args);
    const job = findJob(config, args.job);
    ownSchedule(job); // refused before the database is opened: a job after others has no fires
    const from = parseRangeEnd('--from', args.from);
    const to = parseRangeEnd('--to', args.to);
    if (to < from) throw new UsageError(`--to ${args.to} is before --from ${args.from}`);
    const reason = checkedReason(args.reason);
    const host = resolveHost(args);
    const session = await ForegroundSession.open(config, resolveDatabase(args), host, 'finish');
    try {
      const plan = await planBackfill(session, {
        job,
        from,
        to,
        again: args.again,
        yes: args.yes,
        withDependents: args['with-dependents'],
      });
      const progress = progressFor(args.json);
      if (args['dry-run']) {
        const preview = await previewBackfill(session, plan, progress);
        progress.done({ outcome: 'dry run', ...preview });
        return ExitCode.Ok;
      }
      session.onFinishRequested = (running) =>
        progress.note(
          running
            ? 'stopping after the fire that is running (Ctrl-C again to interrupt it)'
            : 'stopping',
        );
      const result = await runBackfill(
        session,
        plan,
        { operator: operatorName(), via: 'cli', host, reason },
        progress,
        () => session.interruptedBy ?? 'a signal',
      );
      progress.done({
        outcome: result.outcome,
        ...result.counts,
        fires: result.fires,
        auditId: result.auditId,
      });
      if (result.ended === 'interrupted') return ExitCode.Interrupted;
      if (result.ended === 'blocked') return ExitCode.TempFail;
      return result.counts.failed > 0 ? ExitCode.Failure : ExitCode.Ok;
    } finally {
      await session.close();
    }
  }),
};

function parseRangeEnd(option: string, value: string): Date {
  try {
    return parseFireTime(value);
  } catch (err) {
    throw new UsageError(`${option}: ${errorMessage(err)}`);
  }
}
