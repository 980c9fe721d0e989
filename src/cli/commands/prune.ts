/**
 * `baton prune`: delete old history rows now — by `--older-than`, or by the schedules file's
 * `retention:` (which runners also apply on their own, hourly). Deletes in small batches by
 * primary key (`src/store/prune.ts`), so it can run beside a busy fleet; `--dry-run` counts what
 * would go and deletes nothing.
 */
import type { CommandModule } from 'yargs';
import { DURATION_HINT, parseDuration } from '../../config/duration.js';
import type { Config, Retention } from '../../config/schema.js';
import { DatabaseUnavailableError, isMissingSchemaError, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { openConnection } from '../../store/connect.js';
import { retentionTooShort } from '../../config/retention.js';
import { DEFAULT_BATCH_SIZE, pruneHistory, type PruneResult } from '../../store/prune.js';
import { action } from '../action.js';
import { configPath, resolveDatabase, withCommonOptions, type CommonArgs } from '../options.js';
import { optionalConfig, resolveNamespace } from '../config-options.js';

interface PruneArgs extends CommonArgs {
  olderThan?: string;
  skipsOlderThan?: string;
  dryRun: boolean;
  json: boolean;
  batchSize: number;
  namespace?: string;
  catchUpCheck: boolean;
}

/** Ids per DELETE are sent as one IN list: beyond this a batch is no longer "small". */
const MAX_BATCH_SIZE = 10_000;

export const pruneCommand: CommandModule<object, PruneArgs> = {
  command: 'prune',
  describe: "Delete history rows older than --older-than (or the schedules file's retention:)",
  builder: (y) =>
    withCommonOptions(y)
      .option('older-than', {
        type: 'string',
        describe: 'delete finished runs and skips scheduled longer ago than this, e.g. 30d',
      })
      .option('skips-older-than', {
        type: 'string',
        describe: 'delete skip rows scheduled longer ago than this (default: --older-than)',
      })
      .option('dry-run', {
        type: 'boolean',
        default: false,
        describe: 'count what would be deleted, delete nothing',
      })
      .option('json', { type: 'boolean', default: false, describe: 'print the counts as JSON' })
      .option('batch-size', {
        type: 'number',
        default: DEFAULT_BATCH_SIZE,
        describe: 'rows per DELETE statement',
      })
      .option('namespace', {
        type: 'string',
        describe: "namespace to prune (env BATON_NAMESPACE; default the schedules file's)",
      })
      .option('catch-up-check', {
        type: 'boolean',
        default: true,
        describe:
          "refuse a bound shorter than a job's catchUp window (read from the namespace's " +
          'schedules file); --no-catch-up-check prunes without that file',
      }) as never,
  handler: action(async (args: PruneArgs) => {
    const { batchSize } = args;
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH_SIZE) {
      throw new UsageError(`--batch-size must be a whole number from 1 to ${MAX_BATCH_SIZE}`);
    }
    const namespace = resolveNamespace(args);
    const retention = chooseRetention(args, optionalConfig(args), namespace);
    const target = resolveDatabase(args);

    let result: PruneResult;
    let conn;
    try {
      conn = await openConnection(target, { create: false });
      result = await pruneHistory(conn, { namespace, retention, batchSize, dryRun: args.dryRun });
    } catch (err) {
      if (!isMissingSchemaError(err)) throw err;
      throw new DatabaseUnavailableError(
        `the database at ${target.display} has no baton history (no baton_runs table): ` +
          'check --database-url',
        { cause: err },
      );
    } finally {
      await conn?.end().catch(() => {});
    }
    if (args.json) {
      process.stdout.write(`${JSON.stringify(pruneToJson(result), null, 2)}\n`);
    } else {
      process.stdout.write(`${describePrune(result)}\n`);
    }
    return ExitCode.Ok;
  }),
};

/**
 * The flags when given (`--older-than` for everything, `--skips-older-than` for skips), else the
 * schedules file's `retention:` — a choice, never a mix of both. The file counts only for its own
 * namespace; its `catchUp:` windows then bound what may go.
 */
function chooseRetention(args: PruneArgs, file: Config | null, namespace: string): Retention {
  const config = file?.namespace === namespace ? file : null;
  const jobs = config?.jobs ?? [];
  if (args.olderThan == null && args.skipsOlderThan == null) {
    if (config?.retention) return config.retention;
    const why = !file
      ? 'there is none'
      : !config
        ? `it is for namespace "${file.namespace}"`
        : 'it has no `retention:`';
    throw new UsageError(
      'say how old history must be to be deleted: --older-than 30d, or `retention:` in the ' +
        `schedules file (${configPath(args)}: ${why})`,
    );
  }
  if (!config && args.catchUpCheck) {
    // Without the file, a bound inside some job's catchUp window would go unnoticed: that job's
    // runner, back from an outage, would find the pruned fire unrun and run it again.
    throw new UsageError(
      `cannot check the catchUp windows of namespace "${namespace}" without its schedules file ` +
        `(${configPath(args)}: ${!file ? 'there is none' : `it is for namespace "${file.namespace}"`}): ` +
        'pass --config, or --no-catch-up-check to prune anyway',
    );
  }
  const runsMs = args.olderThan != null ? flagDuration('--older-than', args.olderThan, jobs) : null;
  const skipsMs =
    args.skipsOlderThan != null
      ? flagDuration('--skips-older-than', args.skipsOlderThan, jobs)
      : runsMs;
  return { runsMs, skipsMs };
}

function flagDuration(flag: string, value: string, jobs: Config['jobs']): number {
  const ms = parseDuration(String(value));
  if (ms == null || ms <= 0) {
    throw new UsageError(`${flag} ${JSON.stringify(value)}: expected a duration: ${DURATION_HINT}`);
  }
  const tooShort = retentionTooShort(ms, jobs);
  if (tooShort) throw new UsageError(`${flag} ${value}: ${tooShort}`);
  return ms;
}

/** The stable JSON shape of `baton prune --json`. */
export function pruneToJson(r: PruneResult) {
  return {
    namespace: r.namespace,
    dryRun: r.dryRun,
    runs: r.runs,
    skips: r.skips,
    skipTallies: r.skipTallies,
    outputChunks: r.outputChunks,
    notifications: r.notifications,
    actions: r.actions,
    runRequests: r.runRequests,
    dependentFires: r.dependentFires,
    removedSchedules: r.removedSchedules,
    batches: r.batches,
    runsBefore: r.runsBefore?.toISOString() ?? null,
    skipsBefore: r.skipsBefore?.toISOString() ?? null,
  };
}

const count = (n: number, noun: string, plural = `${noun}s`) =>
  `${n.toLocaleString('en-US')} ${n === 1 ? noun : plural}`;

/**
 * `deleted 1,204 runs and 30,118 skips scheduled before 2026-10-31T10:00:00.000Z in namespace
 * "prod" (62 batches)`; `would delete …` for a dry run; each bound named when they differ.
 */
export function describePrune(r: PruneResult): string {
  const before = (d: Date) => `scheduled before ${d.toISOString()}`;
  const parts: string[] = [];
  if (r.runsBefore && r.skipsBefore && r.runsBefore.getTime() === r.skipsBefore.getTime()) {
    parts.push(`${count(r.runs, 'run')} and ${count(r.skips, 'skip')} ${before(r.runsBefore)}`);
  } else {
    if (r.runsBefore) parts.push(`${count(r.runs, 'run')} ${before(r.runsBefore)}`);
    if (r.skipsBefore) parts.push(`${count(r.skips, 'skip')} ${before(r.skipsBefore)}`);
  }
  const kept = !r.runsBefore ? '; runs are kept' : !r.skipsBefore ? '; skips are kept' : '';
  const output = r.outputChunks > 0 ? `, with ${count(r.outputChunks, 'chunk')} of output` : '';
  if (r.skipTallies > 0) parts.push(count(r.skipTallies, 'skip tally', 'skip tallies'));
  if (r.dependentFires > 0) parts.push(count(r.dependentFires, 'chain row'));
  if (r.removedSchedules > 0) parts.push(count(r.removedSchedules, 'removed schedule'));
  return (
    `${r.dryRun ? 'would delete' : 'deleted'} ${parts.join(' and ')}${output} in namespace ` +
    `"${r.namespace}" (${count(r.batches, 'batch', 'batches')})${kept}`
  );
}
