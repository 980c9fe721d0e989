import type { CommandModule } from 'yargs';
import { LockSession } from '../../coordination/lock-session.js';
import { runFire } from '../../coordination/run-fire.js';
import { JobFailedError, LockHeldError, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import type { RunningJob } from '../../execution/job-process.js';
import { openConnection, openPool } from '../../store/connect.js';
import { migrate } from '../../store/migrate.js';
import { action } from '../action.js';
import {
  findJob,
  resolveConfig,
  resolveDatabase,
  resolveHost,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';

interface RunArgs extends CommonArgs {
  job: string;
  wait: number;
}

/** How long a run stopped by Ctrl-C gets between SIGTERM and SIGKILL. */
const INTERRUPT_GRACE_MS = 5_000;

export const runCommand: CommandModule<object, RunArgs> = {
  command: 'run <job>',
  describe:
    'Run one job now, in the foreground, through the same lock as scheduled fires ' +
    "(exit: the job's code; 75 when it is running elsewhere)",
  builder: (y) =>
    withCommonOptions(y)
      .positional('job', { type: 'string', demandOption: true, describe: 'job name' })
      .option('wait', {
        type: 'number',
        default: 0,
        describe: 'seconds to wait for a running instance of the job to finish',
      }) as never,
  handler: action(async (args: RunArgs) => {
    if (!Number.isFinite(args.wait) || args.wait < 0) {
      throw new UsageError('--wait must be a number of seconds >= 0');
    }
    const config = resolveConfig(args);
    const job = findJob(config, args.job);
    const target = resolveDatabase(args);
    const host = resolveHost(args);

    const conn = await openConnection(target);
    try {
      await migrate(conn, target.database);
    } finally {
      await conn.end().catch(() => {});
    }
    const pool = openPool(target, 2);
    const lock = await LockSession.open(target);
    let running: RunningJob | null = null;
    const onSignal = (signal: NodeJS.Signals) => {
      void running?.stop(`interrupted by ${signal}`, INTERRUPT_GRACE_MS);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      const scheduledAt = await lock.now();
      const outcome = await runFire(
        {
          database: target.database,
          namespace: config.namespace,
          host,
          pid: process.pid,
          pool,
          lock,
        },
        job,
        scheduledAt,
        {
          trigger: 'manual',
          waitSeconds: args.wait,
          tee: true,
          onStart: (run) => {
            running = run;
          },
        },
      );
      if (!outcome.ran) {
        throw new LockHeldError(`${job.name} not run: ${outcome.reason} (run ${outcome.runId})`);
      }
      const { result } = outcome;
      if (result.status !== 'done') {
        throw new JobFailedError(
          `${job.name} failed: ${result.error} (run ${outcome.runId})`,
          result.exitCode,
        );
      }
      process.stderr.write(`baton: ${job.name} done (run ${outcome.runId})\n`);
      return ExitCode.Ok;
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await lock.close();
      await pool.end().catch(() => {});
    }
  }),
};
