/**
 * `baton show <run-id>`: one row of the history in full — its fire, who wrote it, how it ended,
 * the error, and the tail of the job's output (`baton logs` prints all of it). Run ids are unique across namespaces, so no
 * namespace is needed to find one; the row's own is shown.
 */
import { chainedRunDocument } from '../../actions/documents.js';
import type { CommandModule } from 'yargs';
import { isMissingSchemaError, orEmpty, UsageError } from '../../errors.js';
import type { AuditRecord } from '../../store/audit.js';
import { ExitCode } from '../../exit-codes.js';
import { openConnection } from '../../store/connect.js';
import { findRun } from '../../store/history-reads.js';
import {
  parentRunsOf,
  parentRunsWords,
  type ParentRuns,
} from '../../store/dependent-fire-reads.js';
import type { Run } from '../../store/runs.js';
import { formatInstant } from '../../text.js';
import { formatDuration } from '../../config/duration.js';
import { action } from '../action.js';
import { durationCell } from '../format.js';
import { actionLine, actionsByRun, actionToJson } from '../audit-view.js';
import { chainedRows } from '../history-view.js';
import { parseRunId, resolveDatabase, withCommonOptions, type CommonArgs } from '../options.js';

interface ShowArgs extends CommonArgs {
  runId: string;
  json: boolean;
}

/** `baton show --json`: the history row's JSON shape plus what only a single run shows. */
export function runDetailToJson(run: Run, upstream: ParentRuns | null = null) {
  return {
    ...chainedRunDocument(run, upstream),
    namespace: run.namespace,
    lockConnectionId: run.lockConnectionId,
    outputTail: run.outputTail,
  };
}

export const showCommand: CommandModule<object, ShowArgs> = {
  command: 'show <run-id>',
  describe: 'One run in full, with its output tail and error',
  builder: (y) =>
    withCommonOptions(y)
      .positional('run-id', {
        type: 'string',
        demandOption: true,
        describe: 'the run id (the ID column of `baton history`, BATON_RUN_ID in the job)',
      })
      .option('json', { type: 'boolean', default: false, describe: 'print JSON' }) as never,
  handler: action(async (args: ShowArgs) => {
    const id = parseRunId(args.runId);
    const target = resolveDatabase(args);

    let run: Run | null = null;
    let actions: AuditRecord[] = [];
    let upstream: ParentRuns | null = null;
    let conn;
    try {
      conn = await openConnection(target, { create: false });
      run = await findRun(conn, id);
      // Who acted on it (a kill, a manual run), oldest first like the rest of the page.
      if (run) actions = ((await actionsByRun(conn, run.namespace, [id])).get(id) ?? []).reverse();
      // A child's run, or its `upstream` skip: the parent runs behind it (migration 0018).
      if (run && chainedRows([run]).length > 0) {
        upstream = (await orEmpty(parentRunsOf(conn, [id]), new Map())).get(id) ?? null;
      }
    } catch (err) {
      // A database nobody has started baton on yet has no runs at all.
      if (!isMissingSchemaError(err)) throw err;
    } finally {
      await conn?.end().catch(() => {});
    }
    if (!run) {
      throw new UsageError(
        `no run with id ${id} in the history at ${target.display} (see \`baton history\`)`,
      );
    }

    if (args.json) {
      const doc = { ...runDetailToJson(run, upstream), actions: actions.map(actionToJson) };
      process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
      return ExitCode.Ok;
    }
    const fields: [string, string][] = [
      ['id', String(run.id)],
      ['job', run.job],
      ['namespace', run.namespace],
      ['fire', `${formatInstant(run.scheduledAt)} UTC`],
      ['trigger', run.trigger],
      ['upstream', upstream ? upstreamWords(run, upstream) : ''],
      ['generation', run.rerun > 0 ? `${run.rerun} (re-run ${run.rerun} of this fire)` : ''],
      [
        'timing',
        run.timingVersion != null ? `version ${run.timingVersion} (baton definitions)` : '',
      ],
      ['params', run.params ? JSON.stringify(run.params) : ''],
      ['winner', run.winner ? 'yes (this row ran the fire)' : winnerWords(run)],
      ['status', run.status],
      ['host', run.pid != null ? `${run.host} (pid ${run.pid})` : run.host],
      ['lock session', run.lockConnectionId != null ? String(run.lockConnectionId) : ''],
      ['started', `${formatInstant(run.startedAt)} UTC`],
      ['finished', run.finishedAt ? `${formatInstant(run.finishedAt)} UTC` : '(not yet)'],
      ['duration', durationCell(run)],
      ['warn', warnWords(run)],
      ['too short', run.tooShort ? 'yes: shorter than its min (duration.min), told too-short' : ''],
      ['exit code', run.exitCode != null ? String(run.exitCode) : ''],
      ['attempts', String(run.attempts)],
      ['reason', run.reason ?? ''],
      ['error', run.error ?? ''],
    ];
    const width = Math.max(...fields.map(([k]) => k.length)) + 2;
    let text = fields
      .filter(([, v]) => v !== '')
      .map(([k, v]) => `${`${k}:`.padEnd(width)}${v}`)
      .join('\n');
    text += '\n';
    if (actions.length > 0) {
      text += `\noperators' actions on this run (baton audit):\n`;
      text += actions.map((a) => `  ${actionLine(a)}\n`).join('');
    }
    if (run.outputTail == null || run.outputTail === '') {
      if (run.status === 'running') {
        text += `\n(running: \`baton logs ${run.id} --follow\` prints its output as it comes)\n`;
      } else if (run.winner) text += '\n(no output recorded)\n';
    } else {
      text += `\noutput tail (stdout and stderr, the last bytes of the last attempt):\n`;
      text += run.outputTail.endsWith('\n') ? run.outputTail : `${run.outputTail}\n`;
    }
    if (run.winner) text += `\nthe whole output, every attempt: baton logs ${run.id}\n`;
    process.stdout.write(text);
    return ExitCode.Ok;
  }),
};

/** `settle#123 (the parent run that let it start)`, or that stopped it (an `upstream` skip). */
function upstreamWords(run: Run, upstream: ParentRuns): string {
  const n = Object.keys(upstream).length;
  const what = n === 1 ? 'the parent run' : 'the parent runs';
  const did = run.winner ? `that let it start` : n === 1 ? 'that stopped it' : 'it was judged on';
  return `${parentRunsWords(upstream)} (${what} ${did})`;
}

function winnerWords(run: Run): string {
  if (run.status === 'missed') return 'no (a missed mark: nobody attempted this fire)';
  return 'no (this runner did not run the fire)';
}

/**
 * The run's warn (`duration.warn`) and whether it passed it: `at 12:00:05 UTC (5s after its
 * start); slow: told at 12:00:05 UTC`. Empty without a warn.
 */
function warnWords(run: Run): string {
  if (run.warnAt == null) return '';
  const after = formatDuration(run.warnAt.getTime() - run.startedAt.getTime(), 'brief');
  const at = `at ${formatInstant(run.warnAt)} UTC (${after} after its start)`;
  return run.slowAt != null ? `${at}; slow: told at ${formatInstant(run.slowAt)} UTC` : at;
}
