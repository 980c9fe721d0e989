import { chainedRunDocument } from '../../actions/documents.js';
import type { CommandModule } from 'yargs';
import { jobOfSubject } from '../../schedule-keys.js';
import { isMissingSchemaError, orEmpty, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { openConnection } from '../../store/connect.js';
import { listPauses, pausedReason, type Pause } from '../../store/pauses.js';
import { REASON_KINDS, RUN_STATUSES, type ReasonKind, type RunStatus } from '../../run-status.js';
import type { Queryable } from '../../store/deadline.js';
import { listRuns, type HistoryFilter } from '../../store/history-reads.js';
import { parentRunsOf, type ParentRuns } from '../../store/dependent-fire-reads.js';
import type { Run } from '../../store/runs.js';
import type { AuditRecord } from '../../store/audit.js';
import { action } from '../action.js';
import { actionsByRun, actionToJson } from '../audit-view.js';
import { clip } from '../fit.js';
import { chainedRows, groupFires, renderAttempts, renderFires } from '../history-view.js';
import { readTallies, type SkipTally } from '../../store/skip-tallies.js';
import { renderTallies, tallyToJson } from '../tally-view.js';
import { painter, terminalWidth } from '../terminal.js';
import { watch, watchIntervalMs, WATCH_OPTION, type Frame } from '../watch.js';
import {
  KEY_OPTION,
  parseSince,
  REPEATABLE,
  subjectOf,
  resolveDatabase,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import {
  namespaceHint,
  namespaceLine,
  optionalConfig,
  resolveNamespaceSource,
} from '../config-options.js';

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
  attempts: boolean;
  output?: string;
  watch?: string;
  namespace?: string;
  tallies: boolean;
  key?: string;
}

/** Moved to cli/options.ts (`baton audit` takes `--since` too); exported here as before. */
export { parseSince };

export const historyCommand: CommandModule<object, HistoryArgs> = {
  command: 'history [job..]',
  describe: 'Show the run history, newest first: one line per fire (--attempts: every row)',
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
      .option('limit', {
        type: 'number',
        default: 50,
        describe: 'at most this many fires (rows with --attempts)',
      })
      .option('attempts', {
        type: 'boolean',
        default: false,
        describe: "every row: each runner's attempt or skip, with every column (= -o wide)",
      })
      .option('output', {
        alias: 'o',
        type: 'string',
        choices: ['wide'],
        describe: 'wide: every row with every column (= --attempts)',
      })
      .option('tallies', {
        type: 'boolean',
        default: false,
        describe:
          'the skip tallies of jobs with `skips: tally` instead: a line per job, hour and runner ' +
          '(--json: one object per row of baton_skip_tallies)',
      })
      .option('key', {
        ...KEY_OPTION,
        describe: `${KEY_OPTION.describe}: the runs of <job>:<key> (give the job)`,
      })
      .option('watch', WATCH_OPTION)
      .option('json', { type: 'boolean', default: false, describe: 'one JSON array of rows' })
      .option('namespace', {
        type: 'string',
        describe: "namespace to read (env BATON_NAMESPACE; default the schedules file's)",
      }) as never,
  handler: action(async (args: HistoryArgs) => {
    if (!Number.isInteger(args.limit) || args.limit < 1)
      throw new UsageError('--limit must be a positive integer');
    const since = args.since != null ? parseSince(args.since) : undefined;
    const watchMs = watchIntervalMs(args.watch);
    // A schedule created at run time: its runs carry `<job>:<key>`.
    if (args.key != null) {
      if (!args.job?.length) throw new UsageError('--key needs a job: baton history <job> --key K');
      args.job = args.job.map((job) => subjectOf(String(job), args.key));
    }
    // `--host` filters here; it does not default to this machine, nor name one.
    const { host: hosts, ...common } = args;
    const resolved = resolveNamespaceSource(common);
    const { namespace } = resolved;
    const target = resolveDatabase(common);
    const wide = args.attempts || args.output === 'wide';
    // The job's own clock is shown for the jobs of the schedules file of this namespace.
    const config = args.json || wide ? null : optionalConfig(common);
    const zones = new Map(
      config?.namespace === namespace ? config.jobs.map((j) => [j.name, j.timezone]) : [],
    );

    const frame = async (): Promise<Frame> => {
      let runs: Run[] = [];
      let pauses: Pause[] = [];
      let actions = new Map<number, AuditRecord[]>();
      let tallies: SkipTally[] = [];
      let upstream = new Map<number, ParentRuns>();
      let conn;
      try {
        conn = await openConnection(target, { create: false });
        const filter = {
          namespace,
          limit: args.limit,
          ...(args.job != null ? { job: args.job } : {}),
          ...(hosts != null ? { host: hosts } : {}),
          ...(args.status != null ? { status: args.status } : {}),
          ...(args.reasonKind != null ? { reasonKind: args.reasonKind } : {}),
          ...(since ? { since } : {}),
        };
        // A filter not given may come as [] (a repeatable option): then it is no filter.
        const given = (xs?: string[]) => (xs?.length ? xs : undefined);
        const tallyFilter = {
          ...(given(args.job) ? { jobs: args.job } : {}),
          ...(given(hosts) ? { hosts } : {}),
          ...(given(args.reasonKind) ? { kinds: args.reasonKind } : {}),
          from: since ?? null,
        };
        if (args.tallies) {
          tallies = await readTallies(conn, namespace, { ...tallyFilter, limit: args.limit });
          return tallyFrame(tallies, args.json, `${namespaceLine(resolved)}\n`);
        }
        runs =
          args.json || wide
            ? await listRuns(conn, filter)
            : groupFires(await listFireRows(conn, filter))
                .slice(0, args.limit)
                .flatMap((f) => f.rows);
        // The tallies of the hours the fires shown span (the fire view only; never with a
        // status filter that leaves skips out).
        const oldest = runs.at(-1)?.scheduledAt;
        if (!args.json && !wide && oldest && (!args.status || args.status.includes('skipped'))) {
          const newest = runs[0]!.scheduledAt;
          tallies = await readTallies(conn, namespace, {
            ...tallyFilter,
            from: oldest,
            to: newest,
          }).catch(() => []); // a database from before migration 0015
        }
        // A database from before the pauses table (migration 0003) has none.
        pauses = await listPauses(conn, namespace).catch(() => []);
        actions = await actionsByRun(
          conn,
          namespace,
          runs.filter((r) => r.winner).map((r) => r.id),
        );
        // The parent runs behind a child's rows (`after:`); a database from before migration
        // 0018 has none.
        upstream = await orEmpty(parentRunsOf(conn, chainedRows(runs)), upstream);
      } catch (err) {
        if (!isMissingSchemaError(err)) throw err;
        // A database nobody has started baton on yet simply has no history.
      } finally {
        await conn?.end().catch(() => {});
      }

      // Paused jobs among the shown ones (or the one asked for) get a note; skip rows say the rest.
      const shown = new Set(runs.map((r) => r.job));
      for (const job of args.job ?? []) shown.add(job);
      // A schedule created at run time (`<job>:<key>`) is paused by its job's pause too.
      for (const name of [...shown]) shown.add(jobOfSubject(name));
      const notes = pauses
        .filter((p) => shown.has(p.job))
        .map((p) => `baton: note: ${p.job} is ${pausedReason(p)}\n`)
        .join('');
      const done = (stdout: string, stderr = '') => ({
        stdout,
        stderr: notes + stderr,
        code: ExitCode.Ok,
      });
      // Nothing in the fallback namespace: most likely run outside the schedules file's folder.
      const hint = runs.length === 0 ? namespaceHint(resolved) : null;
      const hinted = hint ? `baton: hint: ${hint}\n` : '';
      if (args.json) {
        const rows = runs.map((r) => ({
          ...chainedRunDocument(r, upstream.get(r.id)),
          actions: (actions.get(r.id) ?? []).map(actionToJson),
        }));
        return done(`${JSON.stringify(rows, null, 2)}\n`, hinted);
      }
      // The first line says which namespace was read and why; --json stays an array of rows.
      const header = `${namespaceLine(resolved)}\n`;
      if (runs.length === 0) {
        return done(
          header,
          `no runs recorded in namespace "${namespace}" matching the filter\n${hinted}`,
        );
      }
      const paint = painter();
      if (wide) return done(header + renderAttempts(runs, paint, actions, upstream));
      const fires = groupFires(runs);
      const width = terminalWidth();
      const fitted = `${clip(namespaceLine(resolved), width)}\n`;
      const counted = tallies.length
        ? `\nskip tallies (skips: tally; which fires each counted is not kept):\n${renderTallies(tallies)}`
        : '';
      return done(
        fitted +
          renderFires(fires, { now: new Date(), width, paint, zones, actions, upstream }) +
          counted,
      );
    };

    // The title names the view, never the options: a --database-url may carry a password.
    const title = `baton history${args.job?.length ? ` ${args.job.join(' ')}` : ''}`;
    if (watchMs != null) return watch(watchMs, title, frame);
    const f = await frame();
    process.stderr.write(f.stderr);
    process.stdout.write(f.stdout);
    return f.code;
  }),
};

/** `--tallies`: the lines, or the JSON array. */
function tallyFrame(tallies: SkipTally[], json: boolean, header: string): Frame {
  const stdout = json
    ? `${JSON.stringify(tallies.map(tallyToJson), null, 2)}\n`
    : header + renderTallies(tallies);
  const stderr = !json && tallies.length === 0 ? 'no skip tallies matching the filter\n' : '';
  return { stdout, stderr, code: ExitCode.Ok };
}

/** The most rows the fire view reads to fill `--limit` fires. */
const MAX_FIRE_ROWS = 20_000;

/**
 * The rows of the newest `limit` fires matching the filter — every row of each, so that a fire
 * is not shown without its winner because the rows ran out mid-fire. Reads four rows a fire,
 * then four times more while the last fire may be cut (rows at the oldest instant read are
 * dropped unless the history has no more).
 */
async function listFireRows(conn: Queryable, filter: HistoryFilter): Promise<Run[]> {
  const fires = filter.limit;
  for (let rows = fires * 4; ; rows *= 4) {
    const runs = await listRuns(conn, { ...filter, limit: Math.min(rows, MAX_FIRE_ROWS) });
    if (runs.length < Math.min(rows, MAX_FIRE_ROWS)) return runs;
    const oldest = runs.at(-1)!.scheduledAt.getTime();
    const complete = runs.filter((r) => r.scheduledAt.getTime() > oldest);
    if (groupFires(complete).length >= fires || rows >= MAX_FIRE_ROWS) {
      return complete.length > 0 ? complete : runs;
    }
  }
}
