/**
 * `baton blackout --from T --until T (--job J … | --all) --reason R`: a fleet-wide pause that
 * starts and ends by itself. Every runner skips the scheduled fires whose instant is in
 * [from, until) — skip rows of kind `paused` naming the blackout — and runs them again after it,
 * with nothing to undo; the notifier tells its start and its end. `baton run` still runs a job in
 * a blackout (with a note): like a pause, it stops the schedule, not an operator.
 * `baton blackout list` shows those going on and to come; `baton blackout cancel <id>` ends one
 * early.
 *
 * A mistyped job name would black out a job nobody runs while the real one goes on, so a name
 * the namespace does not know is refused (64, with the closest name) unless `--force`: the
 * schedules file's jobs when it is the namespace's, else those its history, pauses and schedules
 * created at run time name. Every refusal — a bad instant, a range backwards, in the past or
 * longer than 90 days, no job or both `--job` and `--all`, no reason — writes nothing.
 *
 * The action and its audit row are actions/blackout.ts's; here, which names are accepted and what
 * is said.
 */
import type { CommandModule } from 'yargs';
import {
  blackoutOutcomeDocument,
  cancelBlackout,
  cancelOutcomeDocument,
  createBlackout,
  type BlackoutOutcome,
} from '../../actions/blackout.js';
import { formatDuration } from '../../config/duration.js';
import type { Config } from '../../config/schema.js';
import { jobNameSchema } from '../../config/schema.js';
import { parseDuration } from '../../durations.js';
import { errorMessage, orEmpty, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { blackoutState, blackoutToJson, describeCover } from '../../fleet/blackouts.js';
import { parseFireTime } from '../../instants.js';
import { checkedReason, operatorName } from '../../operator.js';
import { parseSchedule } from '../../schedule/cron.js';
import { endOf, listBlackouts, type Blackout } from '../../store/blackouts.js';
import { databaseNow } from '../../store/fire-reads.js';
import { historyJobs } from '../../store/history-reads.js';
import { listPauses } from '../../store/pauses.js';
import { countSchedules } from '../../store/schedules.js';
import { formatInstant } from '../../text.js';
import { action } from '../action.js';
import { optionalConfig, resolveNamespace } from '../config-options.js';
import { table } from '../format.js';
import {
  FREE_TEXT,
  REPEATABLE,
  didYouMean,
  resolveDatabase,
  resolveHost,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import { withTable, type Connection } from '../table-connection.js';

interface BlackoutArgs extends CommonArgs {
  from?: string;
  until?: string;
  job?: string[];
  all: boolean;
  reason?: string;
  namespace?: string;
  force: boolean;
  json: boolean;
}

interface ListArgs extends CommonArgs {
  namespace?: string;
  all: boolean;
  json: boolean;
}

interface CancelArgs extends CommonArgs {
  id: string;
  reason?: string;
  namespace?: string;
  json: boolean;
}

const namespaceOption = {
  type: 'string',
  describe: "namespace of the jobs (env BATON_NAMESPACE; default the schedules file's)",
} as const;
const jsonOption = { type: 'boolean', default: false, describe: 'print one JSON object' } as const;

/** How long ago a blackout may have ended and still be listed with `list --all`. */
const LISTED_AFTER_END_MS = 30 * 86_400_000;
/** Fires counted per job for the preview of what a new blackout skips. */
const PREVIEW_MAX_FIRES = 10_000;

/**
 * An instant as typed, before the database's clock is known: `now`, `+90m` (after --from, or
 * after now for --from), or an instant (`2027-01-02T06:00:00+01:00`, `2027-01-02 05:00:00` read
 * as UTC as history prints it, `2027-01-02` for 00:00 UTC) — what `backfill --from` and
 * `run --fire` take.
 */
type TypedInstant = { kind: 'now' } | { kind: 'after'; ms: number } | { kind: 'at'; at: Date };

export function readInstant(option: '--from' | '--until', value: string | undefined): TypedInstant {
  if (value == null || value.trim() === '') {
    throw new UsageError(`${option} is required: an ISO-8601 instant such as 2027-01-02T06:00:00Z`);
  }
  const text = value.trim();
  if (text.toLowerCase() === 'now') return { kind: 'now' };
  if (text.startsWith('+')) {
    const ms = parseDuration(text.slice(1));
    if (ms == null || ms <= 0) {
      throw new UsageError(`${option} "${value}": a duration after + such as +90m, +6h or +2d`);
    }
    return { kind: 'after', ms };
  }
  try {
    return { kind: 'at', at: parseFireTime(text) };
  } catch (err) {
    throw new UsageError(
      `${option}: ${errorMessage(err)}; or now, or +90m (${option === '--from' ? 'from now' : 'after --from'})`,
    );
  }
}

function resolveInstant(typed: TypedInstant, base: Date): Date {
  if (typed.kind === 'now') return base;
  if (typed.kind === 'after') return new Date(base.getTime() + typed.ms);
  return typed.at;
}

/** `--job` and `--all`, exactly one of them: the jobs (null: all), each name checked. */
function readJobs(args: BlackoutArgs): string[] | null {
  const named = (args.job ?? []).map(String);
  if (args.all && named.length > 0) {
    throw new UsageError('give either --job (one or more) or --all, not both');
  }
  if (args.all) return null;
  if (named.length === 0) {
    throw new UsageError('name the jobs it covers: --job J (repeatable), or --all for every job');
  }
  for (const name of named) {
    const check = jobNameSchema.safeParse(name);
    if (!check.success) throw new UsageError(`--job "${name}": ${check.error.issues[0]?.message}`);
  }
  return named;
}

/** The jobs a name is checked against: the schedules file's when it is the namespace's. */
async function knownJobs(
  config: Config | null,
  namespace: string,
  conn: Connection,
): Promise<{ names: Set<string>; where: string }> {
  if (config && config.namespace === namespace) {
    return { names: new Set(config.jobs.map((j) => j.name)), where: config.file };
  }
  const scheduled = await orEmpty(countSchedules(conn, namespace), new Map<string, number>());
  const pauses = await orEmpty(listPauses(conn, namespace), []);
  const names = new Set([
    ...(await historyJobs(conn, namespace)),
    ...pauses.map((p) => p.job),
    ...scheduled.keys(),
  ]);
  return { names, where: `the history of namespace "${namespace}" (no schedules file of it here)` };
}

/**
 * The fires the schedules file gives the covered jobs inside the blackout: what it will skip
 * (not counting schedules created at run time, nor timing versions to come).
 */
export function expectedSkips(
  config: Pick<Config, 'jobs'>,
  b: Pick<Blackout, 'jobs' | 'startsAt' | 'endsAt'>,
): { job: string; fires: number; first: Date | null; more: boolean }[] {
  const out = [];
  for (const def of config.jobs) {
    if (!def.enabled || def.schedule == null) continue;
    if (b.jobs != null && !b.jobs.includes(def.name)) continue;
    let schedule;
    try {
      schedule = parseSchedule(def.schedule, def.timezone);
    } catch {
      continue;
    }
    let fires = 0;
    let first: Date | null = null;
    let at = schedule.nextAfter(new Date(b.startsAt.getTime() - 1));
    while (at && at < b.endsAt && fires < PREVIEW_MAX_FIRES) {
      first ??= at;
      fires++;
      at = schedule.nextAfter(at);
    }
    out.push({ job: def.name, fires, first, more: at != null && at < b.endsAt });
  }
  return out;
}

function describeOutcome(o: BlackoutOutcome, config: Config | null): string {
  const b = o.blackout;
  const span = formatDuration(b.endsAt.getTime() - b.startsAt.getTime(), 'brief');
  const lines = [
    `blackout #${b.id} recorded in namespace "${o.namespace}": ${describeCover(b)}, from ` +
      `${b.startsAt.toISOString()} until ${b.endsAt.toISOString()} (${span}; ` +
      `${blackoutState(b, o.now) === 'active' ? 'on now' : `starts in ${formatDuration(b.startsAt.getTime() - o.now.getTime(), 'brief')}`}), ` +
      `by ${b.createdBy}: ${b.reason}`,
    'every runner skips the scheduled fires inside it (skip rows of kind paused) and runs them ' +
      "again after it, by itself; an operator's `baton run` still runs. " +
      `\`baton blackout cancel ${b.id}\` ends it early`,
  ];
  if (config && config.namespace === o.namespace) {
    const skips = expectedSkips(config, b).filter((s) => s.fires > 0);
    lines.push(
      skips.length === 0
        ? `no fire of ${config.file} falls inside it`
        : `fires of ${config.file} inside it: ` +
            skips
              .map(
                (s) =>
                  `${s.job} ${s.more ? 'over ' : ''}${s.fires} (first ${formatInstant(s.first!)} UTC)`,
              )
              .join(', '),
    );
  }
  return `${lines.join('\n')}\n`;
}

export const blackoutListCommand: CommandModule<object, ListArgs> = {
  command: 'list',
  describe: 'The blackouts going on and to come (with --all, those ended in the last 30 days)',
  builder: (y) =>
    withCommonOptions(y)
      .option('namespace', namespaceOption)
      .option('all', {
        type: 'boolean',
        default: false,
        describe: 'also those ended or cancelled in the last 30 days',
      })
      .option('json', jsonOption) as never,
  handler: action(async (args: ListArgs) => {
    const namespace = resolveNamespace(args);
    const { now, blackouts } = await withTable(
      resolveDatabase(args),
      'baton_blackouts',
      async (conn) => {
        const now = await databaseNow(conn);
        const since = args.all ? new Date(now.getTime() - LISTED_AFTER_END_MS) : undefined;
        return {
          now,
          blackouts: await listBlackouts(conn, namespace, since ? { endedSince: since } : {}),
        };
      },
    );
    if (args.json) {
      const doc = {
        namespace,
        now: now.toISOString(),
        blackouts: blackouts.map((b) => blackoutToJson(b, now)),
      };
      process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
      return ExitCode.Ok;
    }
    if (blackouts.length === 0) {
      process.stdout.write(
        `no blackout ${args.all ? 'in the last 30 days or to come' : 'going on or to come'} in namespace "${namespace}"\n`,
      );
      return ExitCode.Ok;
    }
    process.stdout.write(
      `blackouts of namespace "${namespace}", database time ${formatInstant(now)} UTC\n` +
        table(
          ['ID', 'STATE', 'FROM (UTC)', 'UNTIL (UTC)', 'COVERS', 'BY', 'REASON'],
          blackouts.map((b) => [
            `#${b.id}`,
            blackoutState(b, now),
            formatInstant(b.startsAt),
            formatInstant(endOf(b)) + (b.cancelledAt ? ` (cancelled by ${b.cancelledBy})` : ''),
            describeCover(b),
            b.createdBy,
            b.reason,
          ]),
        ),
    );
    return ExitCode.Ok;
  }),
};

export const blackoutCancelCommand: CommandModule<object, CancelArgs> = {
  command: 'cancel <id>',
  describe: 'End a blackout now (or drop one to come): fires from now on run again',
  builder: (y) =>
    withCommonOptions(y)
      .positional('id', { type: 'string', demandOption: true, describe: 'the blackout id' })
      .option('reason', { ...FREE_TEXT, describe: 'why, for the audit' })
      .option('namespace', namespaceOption)
      .option('json', jsonOption) as never,
  handler: action(async (args: CancelArgs) => {
    const raw = String(args.id).trim().replace(/^#/, '');
    if (!/^[1-9]\d{0,15}$/.test(raw)) {
      throw new UsageError(`blackout id "${String(args.id)}": expected a positive whole number`);
    }
    const reason = checkedReason(args.reason);
    const namespace = resolveNamespace(args);
    const host = resolveHost(args);
    const outcome = await withTable(resolveDatabase(args), 'baton_blackouts', (conn) =>
      cancelBlackout(conn, namespace, Number(raw), {
        operator: operatorName(),
        host,
        via: 'cli',
        reason,
      }),
    );
    if (args.json) {
      process.stdout.write(`${JSON.stringify(cancelOutcomeDocument(outcome), null, 2)}\n`);
      return ExitCode.Ok;
    }
    const b = outcome.blackout;
    process.stdout.write(
      outcome.cancelled
        ? `cancelled blackout #${b.id} (${describeCover(b)}, ${b.reason}): ` +
            (b.cancelledAt! <= b.startsAt
              ? 'it had not begun; it covers nothing\n'
              : `it ended at ${endOf(b).toISOString()}; every runner runs the fires from then on\n`)
        : `blackout #${b.id} is ${blackoutState(b, outcome.now)} already (${endOf(b).toISOString()}): nothing to do\n`,
    );
    return ExitCode.Ok;
  }),
};

export const blackoutCommand: CommandModule<object, BlackoutArgs> = {
  command: 'blackout',
  describe: 'Skip the fires of some jobs (or all) on every runner between two instants',
  builder: (y) =>
    withCommonOptions(y)
      .option('from', {
        ...FREE_TEXT,
        describe: 'its start (inclusive): an ISO-8601 instant with Z or an offset, or now, or +30m',
      })
      .option('until', {
        ...FREE_TEXT,
        describe:
          'its end (exclusive): an ISO-8601 instant, or +6h (after --from); at most 90 days on',
      })
      .option('job', { ...REPEATABLE, describe: 'a job it covers (repeat for more); or --all' })
      .option('all', {
        type: 'boolean',
        default: false,
        describe: 'cover every job of the namespace',
      })
      .option('reason', {
        ...FREE_TEXT,
        describe: 'why (required): for the skip rows, status, the audit',
      })
      .option('namespace', namespaceOption)
      .option('force', {
        type: 'boolean',
        default: false,
        describe: 'accept a job name the schedules file (or the history) does not have',
      })
      .option('json', jsonOption)
      .command(blackoutListCommand)
      .command(blackoutCancelCommand)
      .epilogue(
        'A fire is inside when its scheduled instant is in [--from, --until): every runner skips it ' +
          'with a row of kind paused naming the blackout, whatever its own clock says. Scheduled, ' +
          "catch-up and after: fires are skipped; an operator's baton run is not. Instants without " +
          'an offset are UTC, as history prints them. Exit 64 (nothing written) for a bad or past ' +
          'range, one longer than 90 days, no --job nor --all or both, an unknown job without --force, ' +
          'or no --reason.',
      ) as never,
  handler: action(async (args: BlackoutArgs) => {
    // Everything that can be checked without the database is, before it is asked anything.
    const from = readInstant('--from', args.from);
    const until = readInstant('--until', args.until);
    const jobs = readJobs(args);
    const reason = checkedReason(args.reason);
    if (reason == null) {
      throw new UsageError('--reason is required: say why, for the skip rows and the audit');
    }
    const namespace = resolveNamespace(args);
    const host = resolveHost(args);
    const config = optionalConfig(args);
    const outcome = await withTable(resolveDatabase(args), 'baton_blackouts', async (conn) => {
      let forced = false;
      if (jobs) {
        const known = await knownJobs(config, namespace, conn);
        const unknown = jobs.filter((j) => !known.names.has(j));
        if (unknown.length > 0 && !args.force) {
          const first = unknown[0]!;
          throw new UsageError(
            `--job "${first}" is not a job of ${known.where}${didYouMean(first, known.names)}; ` +
              'no blackout was recorded (--force accepts it anyway, e.g. a job not yet in the file)',
          );
        }
        forced = unknown.length > 0;
      }
      const now = await databaseNow(conn);
      const start = resolveInstant(from, now);
      const end = resolveInstant(until, start);
      return createBlackout(
        conn,
        namespace,
        { from: start, until: end, jobs, reason },
        { operator: operatorName(), host, via: 'cli', reason },
        { forced },
      );
    });
    if (args.json) {
      const doc = blackoutOutcomeDocument(outcome);
      const skips =
        config && config.namespace === namespace
          ? expectedSkips(config, outcome.blackout).map((s) => ({
              job: s.job,
              fires: s.fires,
              more: s.more,
              first: s.first?.toISOString() ?? null,
            }))
          : null;
      process.stdout.write(`${JSON.stringify({ ...doc, expectedSkips: skips }, null, 2)}\n`);
      return ExitCode.Ok;
    }
    if (outcome.forced) {
      process.stderr.write(
        'baton: warning: a job it names is not a known job; recorded anyway (--force)\n',
      );
    }
    process.stdout.write(describeOutcome(outcome, config));
    return ExitCode.Ok;
  }),
};
