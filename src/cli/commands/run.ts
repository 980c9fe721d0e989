import { pauseDocument, runDocument } from '../../actions/documents.js';
import { existsSync } from 'node:fs';
import type { CommandModule } from 'yargs';
import { JobFailedError, LockHeldError, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { manualInstant } from '../../fire/manual-instant.js';
import { checkedReason, operatorName } from '../../operator.js';
import { winnersOfFire } from '../../store/fire-reads.js';
import { findRun } from '../../store/history-reads.js';
import { pausedReason, type Pause } from '../../store/pauses.js';
import { blackoutReason } from '../../store/blackouts.js';
import type { Queryable } from '../../store/deadline.js';
import { action } from '../action.js';
import { ForegroundSession } from '../foreground-fire.js';
import { runInFleet } from '../fleet-run.js';
import {
  FREE_TEXT,
  configPath,
  findJob,
  REPEATABLE,
  resolveDatabase,
  resolveHost,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import { parseFireTime } from '../../instants.js';
import { resolveConfig } from '../config-options.js';
import { describeRun, planRerun } from '../../actions/rerun-plan.js';
import { runJob } from '../../actions/run.js';
import { awaitChain, type ChainStep } from '../../actions/dependents.js';
import { ownSchedule } from '../../actions/past-fires.js';
import { invocationArgv } from '../usage.js';
import { describeRunOn } from '../../config/placement.js';
import { HOST_MAX_CHARS } from '../../host-name.js';
import {
  argsAfterDashes,
  checkParamsSize,
  parseEnvPairs,
  parseParams,
} from '../../fire/run-params.js';

interface RunArgs extends CommonArgs {
  job: string;
  wait: number;
  json: boolean;
  fire?: string;
  again: boolean;
  reason?: string;
  env?: string[];
  namespace?: string;
  withDependents: boolean;
  onHost?: string;
}

// Shared with the daemon's write API (fire/manual-instant.ts); exported here for the unit tests.
export { manualInstant };

export const runCommand: CommandModule<object, RunArgs> = {
  command: 'run <job>',
  describe:
    'Run one job now, or a past fire again with its own instant (--fire), in the foreground, ' +
    "through the same lock as scheduled fires (exit: the job's code; 75 when it is running " +
    'elsewhere or the fire already ran). Extra arguments for a command job go after --',
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
      })
      .option('fire', {
        type: 'string',
        describe:
          'run this past fire of the schedule (ISO-8601; without an offset: UTC) with its own ' +
          'instant; refused when it already ran successfully, unless --again',
      })
      .option('again', {
        type: 'boolean',
        default: false,
        describe: 'with --fire: run the fire even if it already succeeded (a new generation)',
      })
      .option('with-dependents', {
        type: 'boolean',
        default: false,
        describe:
          "then run the job's children (after:) for the same instant, as its schedule would; " +
          'waits for them (docs/dependencies.md)',
      })
      .option('on-host', {
        ...FREE_TEXT,
        describe:
          'ask this live runner (its host id, as baton status lists it) to run the job; refused ' +
          'when it may not (runOn). A job with runOn is always asked of a runner that may run ' +
          'it, never run here (docs/cli.md, "Running a placed job by hand")',
      })
      .option('reason', { ...FREE_TEXT, describe: 'why, for the audit (baton audit)' })
      .option('namespace', {
        type: 'string',
        describe:
          'for a job of library-mode replicas (no schedules file here): their namespace ' +
          '(env BATON_NAMESPACE; default the file\'s, else "default")',
      })
      .option('env', {
        ...REPEATABLE,
        describe: 'K=V: a parameter for this run, in its environment (and ctx.params); repeatable',
      }) as never,
  handler: action(async (args: RunArgs) => {
    if (!Number.isFinite(args.wait) || args.wait < 0) {
      throw new UsageError('--wait must be a number of seconds >= 0');
    }
    if (args.again && args.fire == null) throw new UsageError('--again needs --fire <instant>');
    const reason = checkedReason(args.reason);
    const onHost = args.onHost == null ? null : checkedOnHost(args.onHost);
    // Checked here for a library replica's job too (cli/fleet-run.ts): nothing is written yet.
    checkParamsSize(parseEnvPairs(args.env ?? []), argsAfterDashes(invocationArgv()));
    // A job of no schedules file here may be a library-mode replica's (cli/fleet-run.ts).
    const file = existsSync(configPath(args)) ? resolveConfig(args) : null;
    const inFile = file?.jobs.find((j) => j.name === args.job) ?? null;
    // This host is not a runner and has no tags: a placed job is never run here, where its mount
    // or licence may be missing; a runner that may run it is asked instead.
    const placed = inFile?.runOn ? describeRunOn(inFile.runOn) : null;
    if (onHost != null || placed != null || (!inFile && args.fire == null)) {
      if (!inFile && onHost == null && args.withDependents) {
        throw new UsageError(
          `--with-dependents runs the children a schedules file gives ${args.job}; ` +
            'no schedules file here has it',
        );
      }
      const code = await runInFleet({
        job: args.job,
        namespace: args.namespace ?? process.env.BATON_NAMESPACE ?? file?.namespace ?? 'default',
        target: resolveDatabase(args),
        host: resolveHost(args),
        json: args.json,
        ...(reason != null ? { reason } : {}),
        onHost,
        placed,
        env: parseEnvPairs(args.env ?? []),
        args: argsAfterDashes(invocationArgv()),
        wait: args.wait,
        fire: args.fire != null,
        withDependents: args.withDependents,
      });
      if (code != null) return code;
    }
    const config = file ?? resolveConfig(args);
    const job = findJob(config, args.job);
    const params = parseParams(job, args.env ?? [], argsAfterDashes(invocationArgv()));
    const given = args.fire != null ? parseFireTime(args.fire) : null;
    // A past fire of a job that runs after others is theirs: refused before the database opens.
    if (given != null) ownSchedule(job);
    const target = resolveDatabase(args);
    const host = resolveHost(args);

    const session = await ForegroundSession.open(config, target, host, 'stop');
    const { pool } = session;
    try {
      const run = await runJob(
        session,
        {
          job,
          params,
          fire: given,
          again: args.again,
          waitSeconds: args.wait,
          // With --json stdout is the document's alone.
          tee: args.json ? 'stderr' : true,
          withDependents: args.withDependents,
        },
        { operator: operatorName(), via: 'cli', host, reason },
        {
          // A pause stops scheduled fires; an operator's explicit run goes ahead, with a reminder.
          paused: (pause) => {
            if (!args.json) {
              process.stderr.write(
                `baton: note: ${job.name} is ${pausedReason(pause)}; running it because you asked\n`,
              );
            }
          },
          // So does a blackout: it skips the schedule's fires, not this one.
          blackedOut: (blackout) => {
            if (!args.json) {
              process.stderr.write(
                `baton: note: ${job.name}'s scheduled fires are ${blackoutReason(blackout)}; ` +
                  'running it because you asked\n',
              );
            }
          },
        },
      );
      const outcome = await run.outcome;
      // The children, run by this session once the verdict was written: over before the exit.
      const chain =
        outcome?.status === 'ran' && outcome.recorded && run.dependents.length > 0
          ? await awaitChain(session, job.name, run.at, outcome.dependents ?? run.dependents)
          : null;
      // (A manual run's skip always has its row: only scheduled fires are tallied.)
      if (
        args.json &&
        (outcome?.status === 'skipped' || outcome?.status === 'ran') &&
        outcome.runId
      ) {
        await printRun(pool, outcome.runId, run.pause, chain);
      }
      if (chain && !args.json)
        for (const step of chain) process.stderr.write(`baton: ${chainLine(step)}\n`);
      if (outcome?.status === 'skipped') {
        // The claim found the fire done meanwhile (a re-run elsewhere just ended): say by whom.
        const done =
          given && outcome.kind === 'already-ran'
            ? planRerun(await winnersOfFire(pool, config.namespace, job.name, run.at), false)
            : null;
        const why =
          done?.kind === 'refuse'
            ? `the fire already ran: ${describeRun(done.done)}`
            : outcome.reason;
        throw new LockHeldError(`${job.name} not run: ${why} (run ${outcome.runId})`);
      }
      // Neither ran nor skipped: only a daemon's fire can be stopped or find no session.
      if (outcome?.status !== 'ran') {
        throw new Error(`${job.name} not run (${outcome?.status ?? 'no outcome'})`);
      }
      const { result } = outcome;
      if (result.status !== 'done') {
        throw new JobFailedError(
          `${job.name} failed: ${result.error} (run ${outcome.runId})`,
          result.exitCode,
        );
      }
      const failed = chain?.find((s) => !CHAIN_OK.has(s.status));
      if (failed) {
        throw new JobFailedError(
          `${job.name} done (run ${outcome.runId}), but its dependent ${chainLine(failed)}`,
          null,
        );
      }
      if (!args.json) process.stderr.write(`baton: ${job.name} done (run ${outcome.runId})\n`);
      return ExitCode.Ok;
    } finally {
      await session.close();
    }
  }),
};

/**
 * `--on-host`'s value: a runner's host id, compared with the registry's names only (never parsed
 * as anything else). Empty, or longer than any host id can be, names no runner.
 */
function checkedOnHost(value: string): string {
  if (value.length === 0 || value.length > HOST_MAX_CHARS) {
    throw new UsageError(
      `--on-host needs the host id of a live runner, 1 to ${HOST_MAX_CHARS} characters ` +
        `(got ${value.length}; baton status lists the runners)`,
    );
  }
  return value;
}

/**
 * `--json`: the run's row as `baton history --json` prints it, read back once the verdict is
 * written, with the pause the run went ahead despite (null when none). Printed before a failure
 * is reported, so that stdout has the document whatever the exit code.
 */
async function printRun(
  pool: Queryable,
  runId: number,
  pause: Pause | null,
  chain: ChainStep[] | null,
): Promise<void> {
  const row = await findRun(pool, runId);
  const doc = {
    ...(row ? runDocument(row) : { id: runId }),
    paused: pauseDocument(pause),
    ...(chain ? { dependents: chain } : {}),
  };
  process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
}

/** A child's step that is no failure of the chain: it ran well, or did not have to run. */
const CHAIN_OK: ReadonlySet<string> = new Set(['done', 'skipped', 'waiting']);

/** "report done (run 45)", "export skipped: report failed (run 44)". */
function chainLine(step: ChainStep): string {
  const gen = step.rerun > 0 ? `, generation ${step.rerun}` : '';
  if (step.status === 'skipped' || step.status === 'waiting') {
    return `${step.job} ${step.status}${step.reason ? `: ${step.reason}` : ''}`;
  }
  return `${step.job} ${step.status} (run ${step.runId}${gen})`;
}
