import type { CommandModule } from 'yargs';
import {
  DEFAULT_HEARTBEAT_DEADLINE_MS,
  DEFAULT_HEARTBEAT_MS,
} from '../../coordination/lock-session.js';
import { connectionVariables, jobDatabase } from '../../config/connections.js';
import { openCoordination } from '../../coordination/open-coordination.js';
import { runFire, type RunControl } from '../../fire/run-fire.js';
import { InterruptedError, JobFailedError, LockHeldError, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { openPool } from '../../store/connect.js';
import { DeadlinePool } from '../../store/deadline.js';
import { findPause, pausedReason } from '../../store/pauses.js';
import { action } from '../action.js';
import {
  findJob,
  resolveDatabase,
  resolveHost,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import { resolveConfig } from '../config-options.js';

interface RunArgs extends CommonArgs {
  job: string;
  wait: number;
}

/** How long a run stopped by Ctrl-C gets between SIGTERM and SIGKILL. */
const INTERRUPT_GRACE_MS = 5_000;
/** The same statement deadline as the daemon's pool. */
const STATEMENT_DEADLINE_MS = 10_000;

/**
 * A manual run's fire is the moment it was triggered (database time). Cron instants are whole
 * seconds, so a manual instant is moved off a whole second (by 1 ms, in the rare case it falls on
 * one): otherwise a manual run at exactly 03:00:00.000 would share the 03:00 fire's key, and the
 * scheduled fire would be recorded as "already ran".
 */
export function manualInstant(now: Date): Date {
  return now.getUTCMilliseconds() === 0 ? new Date(now.getTime() + 1) : now;
}

function ignoreBrokenPipe(err: NodeJS.ErrnoException): void {
  if (err.code !== 'EPIPE') throw err;
}

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

    const pool = new DeadlinePool(openPool(target, 2), STATEMENT_DEADLINE_MS);
    const { lock } = await openCoordination(target, pool).catch(async (err: unknown) => {
      await pool.end().catch(() => {});
      throw err;
    });
    // A pause stops scheduled fires; an operator's explicit run goes ahead, with a reminder.
    const pause = await findPause(pool, config.namespace, job.name).catch(() => null);
    if (pause) {
      process.stderr.write(
        `baton: note: ${job.name} is ${pausedReason(pause)}; running it because you asked\n`,
      );
    }
    let running: RunControl | null = null;
    let interruptedBy: NodeJS.Signals | null = null;
    const onSignal = (signal: NodeJS.Signals) => {
      interruptedBy ??= signal;
      if (running) {
        running.stop(`interrupted by ${signal}`, INTERRUPT_GRACE_MS, 'interrupted');
      } else {
        // Still waiting for the lock (`--wait`): cancel the wait on the server, so that the lock
        // is not taken after all once this process has given up.
        void lock.interruptQuery(target).catch(() => {});
      }
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    // `baton run job | head` (or `2>&1 | head`) closes our output early: keep running the job,
    // stop echoing.
    process.stdout.on('error', ignoreBrokenPipe);
    process.stderr.on('error', ignoreBrokenPipe);
    try {
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
        manualInstant(await lock.now()),
        {
          trigger: 'manual',
          database: job.target.kind === 'module' ? jobDatabase(config, job, target) : null,
          withholdEnv: connectionVariables(config),
          waitSeconds: args.wait,
          tee: true,
          onStart: (run) => {
            running = run;
            if (interruptedBy) run.stop(`interrupted by ${interruptedBy}`, 0, 'interrupted');
            // Like the daemon: a lost lock session means the run no longer excludes others.
            lock.watch({
              intervalMs: DEFAULT_HEARTBEAT_MS,
              deadlineMs: DEFAULT_HEARTBEAT_DEADLINE_MS,
              onLost: (reason) =>
                run.stop(
                  `lost: the lock session ended (${reason}); the run was aborted`,
                  1_000,
                  'lost',
                ),
            });
          },
        },
      ).catch((err: unknown) => {
        if (interruptedBy && !running) {
          throw new InterruptedError(
            `${job.name} not run: interrupted by ${interruptedBy} while waiting for the lock`,
          );
        }
        throw err;
      });
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
      process.stdout.off('error', ignoreBrokenPipe);
      process.stderr.off('error', ignoreBrokenPipe);
      await lock.close();
      await pool.end().catch(() => {});
    }
  }),
};
