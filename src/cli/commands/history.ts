import ms from 'ms';
import type { CommandModule } from 'yargs';
import { isMissingSchemaError, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { openConnection } from '../../store/connect.js';
import { listPauses, pausedReason, type Pause } from '../../store/pauses.js';
import { REASON_KINDS, RUN_STATUSES, type ReasonKind, type RunStatus } from '../../run-status.js';
import { formatInstant, oneLine } from '../../text.js';
import { listRuns } from '../../store/history-reads.js';
import type { Run } from '../../store/runs.js';
import { action } from '../action.js';
import { durationCell, runToJson, table, winnerCell } from '../format.js';
import { REPEATABLE, resolveDatabase, withCommonOptions, type CommonArgs } from '../options.js';
import { namespaceHint, namespaceLine, resolveNamespaceSource } from '../config-options.js';

/** `--host` is a filter here, and may be repeated like the others. */
interface HistoryArgs extends Omit<CommonArgs, 'host'> {
  /** The filters that may be repeated: a row matches any of one filter's values. */
  job?: string[];
  host?: string[];
  status?: RunStatus[];
  reasonKind?: ReasonKind[];
  since?: string;
  limit: number;
  json: boolean;
  namespace?: string;
}

export function parseSince(value: string, now = new Date()): Date {
  const relative = ms(value as ms.StringValue);
  if (typeof relative === 'number' && Number.isFinite(relative) && relative >= 0) {
    return new Date(now.getTime() - relative);
  }
  if (/^\d{4}-\d{2}-\d{2}/.test(value)) {
    const absolute = new Date(value);
    if (!Number.isNaN(absolute.getTime())) return absolute;
  }
  throw new UsageError(
    `--since "${value}": expected a duration such as 2h or 30m, or an ISO-8601 time`,
  );
}

export const historyCommand: CommandModule<object, HistoryArgs> = {
  command: 'history [job..]',
  describe: 'Show the run history, newest first: every attempt of every runner',
  builder: (y) =>
    withCommonOptions(y)
      .positional('job', { type: 'string', array: true, describe: 'only these jobs' })
      // Here --host filters; it does not default to this machine.
      .option('host', {
        ...REPEATABLE,
        describe: 'only rows written by this runner host (repeat for several)',
      })
      .option('status', {
        ...REPEATABLE,
        choices: RUN_STATUSES,
        describe: 'only rows with this status (repeat for several)',
      })
      .option('reason-kind', {
        ...REPEATABLE,
        choices: REASON_KINDS,
        describe:
          'only rows with this reason_kind: why a runner did not run a fire (docs/history.md; ' +
          'repeat for several)',
      })
      .option('since', { type: 'string', describe: 'only fires since: 2h, 30m, 7d or ISO-8601' })
      .option('limit', { type: 'number', default: 50, describe: 'at most this many rows' })
      .option('json', { type: 'boolean', default: false, describe: 'one JSON array of rows' })
      .option('namespace', {
        type: 'string',
        describe: "namespace to read (env BATON_NAMESPACE; default the schedules file's)",
      }) as never,
  handler: action(async (args: HistoryArgs) => {
    if (!Number.isInteger(args.limit) || args.limit < 1)
      throw new UsageError('--limit must be a positive integer');
    const since = args.since != null ? parseSince(args.since) : undefined;
    // `--host` filters here; it does not default to this machine, nor name one.
    const { host: hosts, ...common } = args;
    const resolved = resolveNamespaceSource(common);
    const { namespace } = resolved;
    const target = resolveDatabase(common);

    let runs: Run[] = [];
    let pauses: Pause[] = [];
    let conn;
    try {
      conn = await openConnection(target, { create: false });
      runs = await listRuns(conn, {
        namespace,
        limit: args.limit,
        ...(args.job != null ? { job: args.job } : {}),
        ...(hosts != null ? { host: hosts } : {}),
        ...(args.status != null ? { status: args.status } : {}),
        ...(args.reasonKind != null ? { reasonKind: args.reasonKind } : {}),
        ...(since ? { since } : {}),
      });
      // A database from before the pauses table (migration 0003) has none.
      pauses = await listPauses(conn, namespace).catch(() => []);
    } catch (err) {
      if (!isMissingSchemaError(err)) throw err;
      // A database nobody has started baton on yet simply has no history.
    } finally {
      await conn?.end().catch(() => {});
    }

    // Paused jobs among the shown ones (or the one asked for) get a note; skip rows say the rest.
    const shown = new Set(runs.map((r) => r.job));
    for (const job of args.job ?? []) shown.add(job);
    for (const p of pauses.filter((p) => shown.has(p.job))) {
      process.stderr.write(`baton: note: ${p.job} is ${pausedReason(p)}\n`);
    }
    // Nothing in the fallback namespace: most likely run outside the schedules file's folder.
    const hint = runs.length === 0 ? namespaceHint(resolved) : null;
    if (args.json) {
      process.stdout.write(`${JSON.stringify(runs.map(runToJson), null, 2)}\n`);
      if (hint) process.stderr.write(`baton: hint: ${hint}\n`);
      return ExitCode.Ok;
    }
    // The first line says which namespace was read and why; --json stays an array of rows.
    process.stdout.write(`${namespaceLine(resolved)}\n`);
    if (runs.length === 0) {
      process.stderr.write(`no runs recorded in namespace "${namespace}" matching the filter\n`);
      if (hint) process.stderr.write(`baton: hint: ${hint}\n`);
      return ExitCode.Ok;
    }
    process.stdout.write(
      table(
        [
          'ID',
          'JOB',
          'SCHEDULED (UTC)',
          'HOST',
          'WINNER',
          'TRIGGER',
          'STATUS',
          'DURATION',
          'EXIT',
          'REASON / ERROR',
        ],
        runs.map((r) => [
          r.id,
          r.job,
          formatInstant(r.scheduledAt),
          r.host,
          winnerCell(r),
          r.trigger,
          // Retried runs say how many attempts it took: "done ×3".
          r.attempts > 1 ? `${r.status} ×${r.attempts}` : r.status,
          durationCell(r),
          r.exitCode ?? '',
          oneLine(r.reason ?? r.error ?? ''),
        ]),
      ),
    );
    return ExitCode.Ok;
  }),
};
