import type { CommandModule } from 'yargs';
import { connectionVariables, jobDatabase, outputSecrets } from '../../config/connections.js';
import {
  DEFAULT_HEARTBEAT_DEADLINE_MS,
  DEFAULT_HEARTBEAT_MS,
} from '../../coordination/lock-session.js';
import { openCoordination, STATEMENT_DEADLINE_MS } from '../../coordination/open-coordination.js';
import { InterruptedError, JobFailedError, LockHeldError, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { RunLease } from '../../execution/run-lease.js';
import { LocalRuns } from '../../fire/local-runs.js';
import { manualInstant } from '../../fire/manual-instant.js';
import { KILL_GRACE_MS } from '../../fire/run-control.js';
import { watchKillRequests } from '../../fire/kill-watch.js';
import { OutputWriter } from '../../fire/output-writer.js';
import { startFire } from '../../fire/run-fire.js';
import { openPool } from '../../store/connect.js';
import { DeadlinePool } from '../../store/deadline.js';
import { findRun } from '../../store/history-reads.js';
import { findPause, pausedReason, type Pause } from '../../store/pauses.js';
import type { Queryable } from '../../store/deadline.js';
import { action } from '../action.js';
import { pauseToJson, runToJson } from '../format.js';
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
  json: boolean;
}

// Shared with the daemon's write API (fire/manual-instant.ts); exported here for the unit tests.
export { manualInstant };

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
      })
      .option('json', {
        type: 'boolean',
        default: false,
        describe:
          "print the run's history row as one JSON object (the job's own output goes to stderr)",
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
    if (pause && !args.json) {
      process.stderr.write(
        `baton: note: ${job.name} is ${pausedReason(pause)}; running it because you asked\n`,
      );
    }
    // The run, once it has started: a signal stops it, a lost lock session aborts it.
    const runs = new LocalRuns();
    let interruptedBy: NodeJS.Signals | null = null;
    let started = false;
    const onSignal = (signal: NodeJS.Signals) => {
      interruptedBy ??= signal;
      if (runs.size > 0) {
        for (const run of runs)
          run.control.stop(`interrupted by ${signal}`, KILL_GRACE_MS, 'interrupted');
      } else {
        // Still waiting for the lock (`--wait`): cancel the wait on the server, so that the lock
        // is not taken after all once this process has given up.
        void lock.interruptQuery(target).catch(() => {});
      }
    };
    // Kill requests (`baton kill` from any host) on the run, looked for once it has started.
    const killWatch = new AbortController();
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    // `baton run job | head` (or `2>&1 | head`) closes our output early: keep running the job,
    // stop echoing.
    process.stdout.on('error', ignoreBrokenPipe);
    process.stderr.on('error', ignoreBrokenPipe);
    try {
      const context = {
        database: target.database,
        namespace: config.namespace,
        host,
        pid: process.pid,
        pool,
        lock,
      };
      const database = job.target.kind === 'module' ? jobDatabase(config, job, target) : null;
      // Like the daemon's: the run's watchdog stops it if this process stalls past the lease.
      const lease = new RunLease(DEFAULT_HEARTBEAT_MS + DEFAULT_HEARTBEAT_DEADLINE_MS);
      const fire = startFire(job, manualInstant(await lock.now()), {
        trigger: 'manual',
        context: () => context,
        runs,
        database: () => database,
        withholdEnv: connectionVariables(config),
        secrets: outputSecrets(config, job, target),
        waitSeconds: args.wait,
        // With --json stdout is the document's alone.
        tee: args.json ? 'stderr' : true,
        lease,
        output: new OutputWriter(),
      });
      void fire.contended.then(() => {
        if (runs.size === 0) return;
        started = true;
        if (interruptedBy) {
          for (const run of runs)
            run.control.stop(`interrupted by ${interruptedBy}`, 0, 'interrupted');
        }
        // Watched only once the run holds its lock: a GET_LOCK that waits (`--wait`) holds the
        // session, and its heartbeat with it. Like the daemon: a lost lock session means the run
        // no longer excludes others.
        lock.watch({
          intervalMs: DEFAULT_HEARTBEAT_MS,
          deadlineMs: DEFAULT_HEARTBEAT_DEADLINE_MS,
          onLost: (reason) => {
            runs.abortAll(`lost: the lock session ended (${reason}); the run was aborted`);
            lease.revoke();
          },
          onAlive: () => lease.renew(),
        });
        watchKillRequests({ pool: () => pool, runs }, killWatch.signal);
      });
      const outcome = await fire.outcome.catch((err: unknown) => {
        if (interruptedBy && !started) {
          throw new InterruptedError(
            `${job.name} not run: interrupted by ${interruptedBy} while waiting for the lock`,
          );
        }
        throw err;
      });
      if (args.json && (outcome.status === 'skipped' || outcome.status === 'ran')) {
        await printRun(pool, outcome.runId, pause);
      }
      if (outcome.status === 'skipped') {
        throw new LockHeldError(`${job.name} not run: ${outcome.reason} (run ${outcome.runId})`);
      }
      // Neither ran nor skipped: only a daemon's fire can be stopped or find no session.
      if (outcome.status !== 'ran') throw new Error(`${job.name} not run (${outcome.status})`);
      const { result } = outcome;
      if (result.status !== 'done') {
        throw new JobFailedError(
          `${job.name} failed: ${result.error} (run ${outcome.runId})`,
          result.exitCode,
        );
      }
      if (!args.json) process.stderr.write(`baton: ${job.name} done (run ${outcome.runId})\n`);
      return ExitCode.Ok;
    } finally {
      killWatch.abort();
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      process.stdout.off('error', ignoreBrokenPipe);
      process.stderr.off('error', ignoreBrokenPipe);
      await lock.close();
      await pool.end().catch(() => {});
    }
  }),
};

/**
 * `--json`: the run's row as `baton history --json` prints it, read back once the verdict is
 * written, with the pause the run went ahead despite (null when none). Printed before a failure
 * is reported, so that stdout has the document whatever the exit code.
 */
async function printRun(pool: Queryable, runId: number, pause: Pause | null): Promise<void> {
  const row = await findRun(pool, runId);
  const doc = { ...(row ? runToJson(row) : { id: runId }), paused: pauseToJson(pause) };
  process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
}
