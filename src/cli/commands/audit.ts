/**
 * `baton audit [--since 1h] [--job J] [--limit N] [--json]`: the operators' actions of a
 * namespace, newest first — a manual run, a re-run, a backfill, a kill, a pause, a resume: who
 * (the OS user, SUDO_USER under sudo, or the API token's name), from which host, why, and what
 * came of it (store/audit.ts; docs/history.md#audit).
 */
import type { CommandModule } from 'yargs';
import { UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { listActions } from '../../store/audit.js';
import { openConnection } from '../../store/connect.js';
import { formatInstant, oneLine } from '../../text.js';
import { action } from '../action.js';
import { actionToJson, withAuditTable } from '../audit-view.js';
import { namespaceLine, resolveNamespaceSource } from '../config-options.js';
import { table } from '../format.js';
import {
  parseSince,
  REPEATABLE,
  resolveDatabase,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';

interface AuditArgs extends CommonArgs {
  since?: string;
  job?: string[];
  limit: number;
  json: boolean;
  namespace?: string;
}

export const auditCommand: CommandModule<object, AuditArgs> = {
  command: 'audit',
  describe:
    "Operators' actions (run, rerun, backfill, kill, pause, resume, timing, retime), newest first",
  builder: (y) =>
    withCommonOptions(y)
      .option('since', { type: 'string', describe: 'only actions since: 1h, 30m, 7d or ISO-8601' })
      .option('job', { ...REPEATABLE, describe: 'only actions on this job (repeat for several)' })
      .option('limit', { type: 'number', default: 50, describe: 'at most this many actions' })
      .option('json', { type: 'boolean', default: false, describe: 'one JSON array of actions' })
      .option('namespace', {
        type: 'string',
        describe: "namespace to read (env BATON_NAMESPACE; default the schedules file's)",
      }) as never,
  handler: action(async (args: AuditArgs) => {
    if (!Number.isInteger(args.limit) || args.limit < 1 || args.limit > 100_000) {
      throw new UsageError('--limit must be a whole number from 1 to 100000');
    }
    const since = args.since != null ? parseSince(String(args.since)) : null;
    const resolved = resolveNamespaceSource(args);
    const { namespace } = resolved;
    const target = resolveDatabase(args);
    const actions = await withAuditTable(target, async () => {
      const conn = await openConnection(target, { create: false });
      try {
        return await listActions(conn, {
          namespace,
          since,
          ...(args.job != null ? { jobs: args.job.map(String) } : {}),
          limit: args.limit,
        });
      } finally {
        await conn.end().catch(() => {});
      }
    });
    if (args.json) {
      process.stdout.write(`${JSON.stringify(actions.map(actionToJson), null, 2)}\n`);
      return ExitCode.Ok;
    }
    process.stdout.write(`${namespaceLine(resolved)}\n`);
    if (actions.length === 0) {
      process.stderr.write(`no operator actions recorded in namespace "${namespace}"\n`);
      return ExitCode.Ok;
    }
    process.stdout.write(
      table(
        ['AT (UTC)', 'ACTION', 'JOB', 'RUN', 'OPERATOR', 'VIA', 'HOST', 'REASON', 'OUTCOME'],
        actions.map((a) => [
          formatInstant(a.at),
          a.action,
          a.job ?? '',
          a.runId ?? '',
          a.operator,
          a.via,
          a.host,
          oneLine(a.reason ?? '', 60),
          oneLine(a.outcome ?? '', 60),
        ]),
      ),
    );
    return ExitCode.Ok;
  }),
};
