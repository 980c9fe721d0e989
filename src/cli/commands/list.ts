import { pauseDocument } from '../../actions/documents.js';
import type { CommandModule } from 'yargs';
import { isMissingSchemaError, orEmpty } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { parseSchedule } from '../../schedule/cron.js';
import { scheduleByVersions } from '../../schedule/timing-switch.js';
import { timingPrint } from '../../config/fingerprint.js';
import { pendingSwitches, versionInForce } from '../../fleet/timing-status.js';
import { ownVersion, readTimings, type TimingRecord } from '../../store/timings.js';
import { describeSchedule } from '../../schedule/describe.js';
import { shortTiming } from '../../schedule/calendar.js';
import { plannedStart } from '../../schedule/jitter.js';
import { childrenOf, describeAfter, scheduleText } from '../../config/dependencies.js';
import { formatDuration } from '../../config/duration.js';
import { describePlacement } from '../../config/placement.js';
import type { JobAfter } from '../../config/schema.js';
import { openConnection } from '../../store/connect.js';
import type { DatabaseTarget } from '../../config/database-url.js';
import { withDeadline } from '../../store/deadline.js';
import { listPauses, type Pause } from '../../store/pauses.js';
import { formatInstant } from '../../text.js';
import { action } from '../action.js';
import { table } from '../format.js';
import { fitTable, type Cell, type Column } from '../fit.js';
import { painter, terminalWidth } from '../terminal.js';
import { formatLocal, instantForm, isUtc, relative, shortInstant, shortLocal } from '../times.js';
import { databaseNamed, resolveDatabase, withCommonOptions, type CommonArgs } from '../options.js';
import { parseFrom } from '../../instants.js';
import { resolveConfig } from '../config-options.js';

interface ListArgs extends CommonArgs {
  json: boolean;
  count: number;
  from?: string;
  output?: string;
}

/** One job as `list` shows it (and `--json` prints it). */
interface ListedJob {
  name: string;
  /** Null: no schedule of its own; it runs only after its parents (`after`). */
  schedule: string | null;
  timezone: string;
  /** The jobs it runs after (docs/dependencies.md); null: none. */
  after: JobAfter | null;
  /** The jobs that run after it. */
  children: string[];
  enabled: boolean;
  nextFires: string[];
  jitterMs: number;
  paused: boolean | null;
  pause: ReturnType<typeof pauseDocument>;
  /** Where it may run, in words (config/placement.ts `describePlacement`): "any runner", … */
  runsOn: string;
  /** Whether it says where (`runOn`, `prefer` or `every`): the compact view flags only those. */
  placed: boolean;
  /** Its timing versions as the fleet fires them (null: none recorded, or no database to ask). */
  timing: ListedTiming | null;
  /** The instants its calendars skip among the fires shown, and where `shift` moved each. */
  calendarSkips: { at: string; calendar: string; movedTo: string | null }[];
}

/**
 * A job's timing versions (store/timings.ts), as `list` shows them: its fires are the fleet's —
 * each instant by the version in force then — not the file's alone.
 */
interface ListedTiming {
  /** The version in force at `--from` (now). */
  inForce: number | null;
  /** The version that is this file's timing; null: not recorded (no runner has loaded it yet). */
  file: number | null;
  /** The switches still to come after `--from`. */
  switches: { version: number; at: string; schedule: string; timezone: string }[];
}

function listedTiming(
  job: { schedule: string | null; timezone: string },
  records: readonly TimingRecord[],
  from: Date,
): ListedTiming | null {
  if (records.length === 0 || job.schedule == null) return null;
  return {
    inForce: versionInForce(records, from)?.version ?? null,
    file: ownVersion(records, timingPrint(job)!),
    switches: pendingSwitches(records, from).map(({ to }) => ({
      version: to.version,
      at: to.effectiveAt.toISOString(),
      schedule: to.schedule,
      timezone: to.timezone,
    })),
  };
}

/**
 * The wide view's TIMING cell: the version in force, the switches to come, the file's version
 * where it is another; empty when the file's timing is the one in force and none is pending.
 */
function timingCell(t: ListedTiming | null): string {
  if (!t || (t.switches.length === 0 && t.file != null && t.file === t.inForce)) return '';
  return [
    t.inForce != null ? `v${t.inForce}` : 'none in force',
    ...t.switches.map((s) => `v${s.version} from ${formatInstant(new Date(s.at))}`),
    t.file == null ? 'file not recorded' : t.file !== t.inForce ? `file v${t.file}` : '',
  ]
    .filter((p) => p !== '')
    .join(', ');
}

/** What the compact view says of a job's timing versions, where they tell something. */
function timingFlag(t: ListedTiming | null, form: ReturnType<typeof instantForm>): string {
  if (!t) return '';
  const next = t.switches[0];
  if (next) return `v${next.version} from ${shortInstant(new Date(next.at), form)}`;
  if (t.file == null) return 'file timing not recorded';
  if (t.inForce != null && t.file < t.inForce) return `file behind v${t.inForce}`;
  return '';
}

export const listCommand: CommandModule<object, ListArgs> = {
  command: 'list',
  describe: 'List every job: schedule, next fire, flags (-o wide: in words, more fires)',
  builder: (y) =>
    withCommonOptions(y)
      .option('json', { type: 'boolean', default: false, describe: 'print JSON' })
      .option('count', {
        type: 'number',
        default: 3,
        describe: 'how many next fire times to show (with -o wide or --json; else the next one)',
      })
      .option('output', {
        alias: 'o',
        type: 'string',
        choices: ['wide'],
        describe:
          'wide: every detail (time zone, schedule in words, several fires with local times)',
      })
      .option('from', {
        type: 'string',
        describe:
          'show the fires at or after this instant instead of now: 2027-03-13 (00:00 UTC) or ' +
          '2027-03-13T02:00:00-05:00 (an offset or Z is required); see docs/schedules.md',
      }) as never,
  handler: action(async (args: ListArgs) => {
    // Before the config: a bad --from is the same usage error whatever the schedules file says.
    const from = args.from != null ? parseFrom(args.from) : new Date();
    const config = resolveConfig(args, { connectionVariables: 'ignore' });
    // Fires are whole seconds, so "strictly after from - 1 ms" is "at or after from": an operator
    // checking a transition with --from at a fire's own instant sees that fire.
    const after = new Date(from.getTime() - 1);
    // The pauses and timing versions need the database; `list` works without one (the column
    // is then left out, and the fires are the file's).
    const fleet = await readFleet(args, config.namespace);
    const pauses = fleet?.pauses ?? null;
    const jobs = config.jobs.map((job) => {
      const records = fleet?.timings.get(job.name) ?? [];
      // A job that runs only after its parents has no fires of its own: its parents' are its.
      // The fleet fires each instant by the timing version in force then (a change takes
      // effect at one instant for every runner: docs/schedules.md, "Changing a job's time").
      const schedule =
        job.schedule != null
          ? scheduleByVersions(parseSchedule(job.schedule, job.timezone), records)
          : null;
      const fires = schedule?.nextN(Math.max(0, Math.floor(args.count)), after) ?? [];
      // What its calendars skip among the fires shown (docs/schedules.md, "Calendars").
      const skipped =
        schedule?.calendarSkips && fires.length > 0
          ? schedule.calendarSkips(after, fires.at(-1)!, MAX_LISTED_SKIPS)
          : [];
      const words = [
        job.schedule != null ? describeSchedule(job.schedule) : null,
        job.after ? describeAfter(job.after) : null,
      ].filter((w) => w != null);
      return {
        name: job.name,
        schedule: job.schedule,
        timezone: job.timezone,
        after: job.after ?? null,
        children: childrenOf(config.jobs, job.name).map((c) => c.name),
        describe: words.join(', and '),
        description: job.description ?? null,
        enabled: job.enabled,
        nextFires: fires.map((d) => d.toISOString()),
        nextFiresLocal: fires.map((d) => formatLocal(d, job.timezone)),
        jitterMs: job.jitterMs,
        // When each fire starts: its instant plus its jitter delay, the same on every runner
        // (the instant itself without jitter). `scheduled_at` stays the instant.
        nextStarts: fires.map((d) =>
          plannedStart(config.namespace, job.name, d, job.jitterMs).toISOString(),
        ),
        // null: unknown (no database to ask).
        paused: pauses ? pauses.has(job.name) : null,
        pause: pauseDocument(pauses?.get(job.name)),
        runOn: job.runOn ?? null,
        prefer: job.prefer ?? null,
        every: job.every ?? false,
        runsOn: describePlacement(job, (ms) => formatDuration(ms, 'compact')),
        placed: job.runOn != null || job.prefer != null || job.every === true,
        timing: listedTiming(job, records, from),
        calendarSkips: skipped.map((k) => ({
          at: k.at.toISOString(),
          calendar: k.calendar,
          movedTo: k.movedTo?.toISOString() ?? null,
        })),
      };
    });
    if (args.json) {
      process.stdout.write(`${JSON.stringify({ namespace: config.namespace, jobs }, null, 2)}\n`);
      return ExitCode.Ok;
    }
    const versioned = jobs.some((j) => timingCell(j.timing) !== '');
    if (args.output !== 'wide') {
      process.stdout.write(renderCompact(jobs, from, pauses != null));
      process.stdout.write(calendarNotes(jobs));
      return ExitCode.Ok;
    }
    process.stdout.write(
      table(
        [
          'JOB',
          'SCHEDULE',
          'AFTER',
          'TIME ZONE',
          'IN WORDS',
          'ENABLED',
          'RUNS ON',
          ...(pauses ? ['PAUSED'] : []),
          ...(versioned ? ['TIMING'] : []),
          'NEXT FIRES (UTC, then local)',
        ],
        jobs.map((j) => [
          j.name,
          j.schedule != null ? shortTiming(j.schedule) : '',
          j.after ? describeAfter(j.after).replace(/^after /, '') : '',
          j.timezone,
          j.describe,
          j.enabled ? 'yes' : 'no',
          j.runsOn,
          ...(pauses ? [j.pause ? `yes, by ${j.pause.pausedBy}` : 'no'] : []),
          ...(versioned ? [timingCell(j.timing)] : []),
          j.nextFires
            .map((f, i) => {
              const utc = formatInstant(new Date(f));
              // The local wall clock with its offset is what tells the two 01:30s of a repeated
              // hour apart; for a UTC job it would only repeat the UTC time.
              const at = isUtc(j.timezone)
                ? utc
                : `${utc} (${j.nextFiresLocal[i]!.replace('T', ' ')})`;
              if (j.jitterMs === 0) return at;
              const delayMs = Date.parse(j.nextStarts[i]!) - Date.parse(f);
              return `${at} starts +${formatDuration(delayMs, 'table')}`;
            })
            .join(', '),
        ]),
      ),
    );
    process.stdout.write(calendarNotes(jobs));
    return ExitCode.Ok;
  }),
};

/** The calendar skips among the fires shown: at most this many per job. */
const MAX_LISTED_SKIPS = 20;

/** One line per instant a job's calendars skip among its fires shown, after the table. */
function calendarNotes(jobs: ListedJob[]): string {
  const lines = jobs.flatMap((j) =>
    j.calendarSkips.map(
      (k) =>
        `${j.name}: ${formatInstant(new Date(k.at))} skipped (calendar ${k.calendar})` +
        (k.movedTo ? `, moved to ${formatInstant(new Date(k.movedTo))}` : ''),
    ),
  );
  return lines.length > 0 ? `\n${lines.join('\n')}\n` : '';
}

/**
 * The view that fits the terminal (80 columns off one), as `crontab -l` and `kubectl get` do:
 * name, schedule, the next fire (UTC, the job's own clock when it has a zone, and how soon),
 * flags. `-o wide` has the rest.
 */
function renderCompact(jobs: ListedJob[], from: Date, pausesKnown: boolean): string {
  const next = (j: ListedJob) => (j.nextFires[0] != null ? new Date(j.nextFires[0]) : null);
  const form = instantForm(
    jobs.flatMap((j) => next(j) ?? []),
    from,
  );
  const zoned = jobs.some((j) => !isUtc(j.timezone));
  const columns: Column[] = [
    { head: 'JOB', flex: { min: 10, keep: 1 } },
    // A schedule is never cut: `*/2 * * * …` would read as another schedule.
    { head: 'SCHEDULE' },
    ...(zoned ? [{ head: 'TIME ZONE', flex: { min: 9 }, optional: 2 }] : []),
    { head: 'NEXT (UTC)' },
    ...(zoned ? [{ head: 'LOCAL', optional: 1 }] : []),
    { head: 'IN' },
    { head: 'FLAGS', flex: { min: 9, keep: 2 } },
  ];
  const paint = painter();
  const rows = jobs.map((j): Cell[] => {
    const at = next(j);
    const utc = isUtc(j.timezone);
    const flags = [
      j.enabled ? '' : 'disabled',
      // Who paused it, and why, are in -o wide and `baton explain`.
      j.pause ? 'paused' : '',
      j.jitterMs > 0 ? `jitter ${formatDuration(j.jitterMs, 'compact')}` : '',
      // A job with a schedule and parents: its schedule's cell is the expression.
      j.after && j.schedule != null ? describeAfter(j.after) : '',
      j.placed ? `on ${j.runsOn}` : '',
      timingFlag(j.timing, form),
    ].filter((f) => f !== '');
    return [
      { text: j.name, ...(j.enabled && !j.pause ? {} : { style: 'dim' as const }) },
      { text: scheduleText(j) },
      ...(zoned ? [{ text: utc ? '' : j.timezone }] : []),
      // A job that runs only after its parents has no fires of its own: not "never".
      { text: at ? shortInstant(at, form) : j.schedule == null ? '' : 'never' },
      ...(zoned ? [{ text: at && !utc ? shortLocal(at, j.timezone) : '' }] : []),
      { text: at ? relative(at, from).replace(/^in /, '') : '', style: 'dim' },
      { text: flags.join(', '), style: 'yellow' },
    ];
  });
  // Without the database the pauses are unknown: said once, under the table.
  const unknown = pausesKnown ? '' : '(pauses not shown: no database to ask)\n';
  return fitTable(columns, rows, terminalWidth(), paint) + unknown;
}

/** How long `list` gives the database for the pauses before it shows the list without them. */
const PAUSES_CONNECT_MS = 1_500;
const PAUSES_DEADLINE_MS = 3_000;

/** What `list` reads from the database: the pauses by job, and the timing versions by job. */
interface FleetFacts {
  pauses: Map<string, Pause>;
  timings: Map<string, TimingRecord[]>;
}

/**
 * The namespace's pauses and timing versions, or null when the database cannot tell
 * (unreachable, not created, not migrated): `list` reads the schedules file and must work without
 * a database. Silent, unless the operator named a database (flag, env or credential) and it
 * failed: then one note on stderr.
 */
async function readFleet(args: CommonArgs, namespace: string): Promise<FleetFacts | null> {
  const named = databaseNamed(args);
  let target: DatabaseTarget;
  try {
    target = resolveDatabase(args);
  } catch (err) {
    if (named) process.stderr.write(`baton: note: pauses not shown: ${(err as Error).message}\n`);
    return null;
  }
  const quick = {
    ...target,
    connection: { ...target.connection, connectTimeout: PAUSES_CONNECT_MS },
  };
  let conn: Awaited<ReturnType<typeof openConnection>> | undefined;
  try {
    return await withDeadline(
      (async (): Promise<FleetFacts> => {
        conn = await openConnection(quick, { create: false });
        const pauses = await listPauses(conn, namespace);
        // A database from before the timing versions (migration 0026): the file's fires.
        const timings = await orEmpty(readTimings(conn, namespace), new Map());
        return { pauses: new Map(pauses.map((p) => [p.job, p])), timings };
      })(),
      PAUSES_DEADLINE_MS,
      'reading the pauses and timing versions',
      () => conn?.destroy(),
    );
  } catch (err) {
    const notMigrated = isMissingSchemaError(err);
    if (named && !notMigrated) {
      process.stderr.write(`baton: note: pauses not shown: ${(err as Error).message}\n`);
    }
    // A database nobody has started baton on has no pauses; an unreachable one: unknown.
    return notMigrated ? { pauses: new Map(), timings: new Map() } : null;
  } finally {
    await conn?.end().catch(() => {});
  }
}
