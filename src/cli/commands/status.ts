/**
 * `baton status [--json]`: the fleet at one instant of the database's clock — live runners with
 * their clock offsets, the runs in progress, each job's next fire and last success — and its
 * findings, as a monitoring check: exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (the convention
 * of Nagios plugins, Icinga and Sensu; see CheckExitCode). The report itself is computed by
 * src/fleet/status.ts.
 */
import type { CommandModule } from 'yargs';
import { describeAfter } from '../../config/dependencies.js';
import { formatDuration } from '../../config/duration.js';
import type { Config } from '../../config/schema.js';
import { dbErrorCode, errorMessage, orEmpty } from '../../errors.js';
import { CheckExitCode } from '../../exit-codes.js';
import {
  buildStatus,
  CHECK_EXIT_CODES,
  currentRunners,
  DEFAULT_CLOCK_THRESHOLD_MS,
  reportedJobs,
  severityOf,
  statusToJson,
  type StatusReport,
  type Warning,
} from '../../fleet/status.js';
import { readPoolStatus, slotsInUse, type PoolStatus } from '../../fleet/pool-status.js';
import { openConnection } from '../../store/connect.js';
import {
  databaseNow,
  jobHistoryFacts,
  listRunningRuns,
  type JobHistoryFacts,
  type RunningRun,
} from '../../store/fleet-reads.js';
import { outboxState, type OutboxState } from '../../store/notification-reads.js';
import { listPauses, type Pause } from '../../store/pauses.js';
import { endOf, listBlackouts, type Blackout } from '../../store/blackouts.js';
import { blackoutState, describeCover } from '../../fleet/blackouts.js';
import { listRunners, type RunnerRecord } from '../../store/runners.js';
import { countSchedules } from '../../store/schedules.js';
import { formatInstant } from '../../text.js';
import { action, fail } from '../action.js';
import { table } from '../format.js';
import {
  configPath,
  durationOption,
  resolveDatabase,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import { GONE_AFTER_OPTION, goneAfterMs } from '../fleet-options.js';
import {
  namespaceHint,
  namespaceLine,
  optionalConfig,
  resolveNamespaceSource,
  type ResolvedNamespace,
} from '../config-options.js';
import { CliExit, invocationArgv, usageMessage } from '../usage.js';
import { watch, watchIntervalMs, WATCH_OPTION, type Frame } from '../watch.js';
import { readTimings, type TimingRecord } from '../../store/timings.js';

interface StatusArgs extends CommonArgs {
  json: boolean;
  namespace?: string;
  clockThreshold: string;
  goneAfter: string;
  warnPaused: boolean;
  watch?: string;
}

const EPILOGUE = `Exit status, as a monitoring check (Nagios, Icinga, Sensu):
  0 OK        nothing to act on; a paused job is only informational (unless --warn-paused)
  1 WARNING   runner-gone, clock-offset, schedule-drift, failing, slow, paused and blackout with
              --warn-paused
  2 CRITICAL  no-runner (no runner alive in the namespace), no-eligible-runner (runners are
              alive, but none may run a job: its runOn), no-success (a job past its expect)
  3 UNKNOWN   no verdict: the database cannot be read, a bad option or schedules file (the
              message says which; status never exits 64, 69 or 78 as other commands do)

Findings (kind): no-runner (no live runner in the namespace's registry: no job runs; the jobs
no runner loaded are then not reported as drift one by one),
no-eligible-runner (an enabled job every live runner registered as one it may not run: its runOn
asks for tags or hosts none of them has; its fires are recorded missed, docs/placement.md),
runner-gone (no heartbeat for --gone-after without a graceful stop),
clock-offset (a live runner's clock is off the database's by more than --clock-threshold),
schedule-drift (live runners loaded different definitions of a job, or only some loaded it; or
the schedules file's definition of a job is not the one the live runners loaded, they run a job
that is not in it, or no live runner loaded an enabled job of it),
no-success (the dead-man's switch: an enabled job of the schedules file with no success for its
\`expect:\`, by default two of its fires plus a grace of max(1m, 10% of its period)),
failing (a job's runs failed, timed out or were lost since its last success — all of them when
it never succeeded — until it succeeds again; not for a paused or disabled job),
slow (a job with a run going on past its warn, duration.warn: the row's warn_at, any runner's),
paused (a job paused with "baton pause"),
blackout (a blackout going on, "baton blackout": the fires of the jobs it covers are skipped as
paused until it ends; a job it covers is not judged no-success meanwhile).

The first line says the state, what it is about, and which namespace was read and why
(--namespace, BATON_NAMESPACE, the schedules file, or the default when there is none).
Times are the database's clock. Next fires come from the schedules file (--config, env
BATON_CONFIG); without one they are not shown. --json prints { namespace, namespaceSource:
{ kind: flag|env|file|default, file? }, now, state, exitCode, healthy (exit code 0),
runners: [{ host, pid, version, state, alive, clockOffsetMs, startedAt, lastSeenAt,
lastSeenAgoMs, stoppedAt, jobs, tags }], dynamicSchedules: [{ job, count }] (library mode's
schedules created at run time, live ones, per job), running: [{ runId, job, host, pid, trigger, scheduledAt,
startedAt, runningForMs, attempts, warnAt (null: no warn), slow }], jobs: [{ name, inConfig, enabled, schedule (null: none of
its own), timezone, after ({ jobs, on, withinMs } or null), nextFire, paused, pause, lastSuccessAt, failuresSinceSuccess, lastFailure, expectMs,
overdueAt, loadedBy, ineligibleOn: [{ host, why }] }], warnings: [{ kind, severity: critical|warning|info, message, job?,
hosts? }], blackouts: [{ id, state: active|upcoming, from, until, endsAt, jobs (null: every
job), reason, createdBy, createdAt, cancelledAt, cancelledBy }] (those going on and to come) }
(every finding is in warnings, whatever its severity); UNKNOWN prints { state,
exitCode, healthy, error }. clockOffsetMs is how far the runner's clock is ahead of the
database's (negative: behind).`;

export const statusCommand: CommandModule<object, StatusArgs> = {
  command: 'status',
  describe: 'The fleet: live runners and their clock offsets, running jobs, next fires, warnings',
  builder: (y) =>
    withCommonOptions(y)
      .option('json', { type: 'boolean', default: false, describe: 'print one JSON object' })
      .option('namespace', {
        type: 'string',
        describe: "namespace to read (env BATON_NAMESPACE; default the schedules file's)",
      })
      .option('clock-threshold', {
        type: 'string',
        default: `${DEFAULT_CLOCK_THRESHOLD_MS / 1000}s`,
        describe: "warn about a runner whose clock is off the database's by more than this",
      })
      .option('gone-after', GONE_AFTER_OPTION)
      .option('warn-paused', {
        type: 'boolean',
        default: false,
        describe: 'a paused job or a blackout going on is a warning (exit 1), not informational',
      })
      .option('watch', WATCH_OPTION)
      .epilogue(EPILOGUE)
      // A check's bad usage is UNKNOWN too: a monitor reads 64 differently on each system.
      .fail((message, err) => {
        if (err) throw err;
        const text = usageMessage(message, invocationArgv());
        process.stdout.write(`UNKNOWN: ${text} (see baton status --help)\n`);
        throw new CliExit(CheckExitCode.Unknown);
      }) as never,
  handler: action(async (args: StatusArgs) => {
    try {
      return await check(args);
    } catch (err) {
      return unknown(err, args.json);
    }
  }),
};

/**
 * No verdict: the usual `baton: …` message on stderr (fail() — no stack trace, no password),
 * and the UNKNOWN line a monitor shows on stdout (or the JSON object with state UNKNOWN).
 */
function unknown(err: unknown, json: boolean): number {
  fail(err);
  // One line: a monitor shows the first line of a check's output (a config error has several).
  const message = errorMessage(err)
    .split('\n')
    .map((line) => line.trim())
    .join(' ');
  if (json) {
    const out = {
      state: 'UNKNOWN',
      exitCode: CheckExitCode.Unknown,
      healthy: false,
      error: message,
    };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  } else {
    process.stdout.write(`UNKNOWN: ${message}\n`);
  }
  return CheckExitCode.Unknown;
}

async function check(args: StatusArgs): Promise<number> {
  const clockThresholdMs = durationOption('clock-threshold', args.clockThreshold);
  const goneAfter = goneAfterMs(args);
  const resolved = resolveNamespaceSource(args);
  const { namespace } = resolved;
  const file = configPath(args);
  let config = optionalConfig(args);
  if (!config) {
    process.stderr.write(`no schedules file at ${file}: next fires are not shown\n`);
  } else if (config.namespace !== namespace) {
    process.stderr.write(
      `${file} is for namespace "${config.namespace}", not "${namespace}": its next fires ` +
        'are not shown\n',
    );
    config = null;
  }

  const watchMs = watchIntervalMs(args.watch);
  const frame = async (): Promise<Frame> => {
    const facts = await readFleet(args, namespace, config);
    const report = buildStatus({
      ...facts,
      namespace,
      config,
      clockThresholdMs,
      goneAfterMs: goneAfter,
      warnPaused: args.warnPaused,
    });
    // Nothing at all in the fallback namespace: most likely run outside the schedules folder.
    const hint =
      report.runners.length === 0 && report.jobs.length === 0 ? namespaceHint(resolved) : null;
    let stdout: string;
    if (args.json) {
      const { namespace: read, ...rest } = statusToJson(report);
      const json = {
        namespace: read,
        namespaceSource: resolved.source,
        ...rest,
        dynamicSchedules: [...facts.schedules].map(([job, count]) => ({ job, count })),
      };
      stdout = `${JSON.stringify(json, null, 2)}\n`;
    } else {
      stdout = render(report, resolved, facts.databaseClock, facts.schedules);
    }
    const stderr = hint ? `baton: hint: ${hint}\n` : '';
    return { stdout, stderr, code: CHECK_EXIT_CODES[report.state] };
  };
  if (watchMs != null) return watch(watchMs, 'baton status', frame);
  const shown = await frame();
  process.stderr.write(shown.stderr);
  process.stdout.write(shown.stdout);
  return shown.code;
}

interface FleetFacts {
  now: Date;
  /** False when there is no database to ask: `now` is then this host's clock. */
  databaseClock: boolean;
  runners: RunnerRecord[];
  running: RunningRun[];
  pauses: Pause[];
  history: Map<string, JobHistoryFacts>;
  notifications?: OutboxState | undefined;
  pools?: PoolStatus[];
  timings?: Map<string, TimingRecord[]>;
  /** Library mode's schedules created at run time: how many each job has (live ones). */
  schedules: Map<string, number>;
  /** The blackouts going on and to come. */
  blackouts?: Blackout[];
}

/**
 * Everything the report needs, read on one connection. A database or table that does not exist
 * yet (nobody started baton there) reads as empty, as in `baton history`.
 */
async function readFleet(
  args: StatusArgs,
  namespace: string,
  config: Config | null,
): Promise<FleetFacts> {
  const empty: FleetFacts = {
    now: new Date(),
    databaseClock: false,
    runners: [],
    running: [],
    pauses: [],
    history: new Map(),
    schedules: new Map(),
  };
  let conn;
  try {
    conn = await openConnection(resolveDatabase(args), { create: false });
  } catch (err) {
    if (dbErrorCode((err as Error).cause) !== 'ER_BAD_DB_ERROR') throw err;
    process.stderr.write('the baton database does not exist yet: no runner has connected\n');
    return empty;
  }
  // A table from a later migration than the database has reads as empty.
  const noTable = (err: unknown) => dbErrorCode(err) === 'ER_NO_SUCH_TABLE';
  try {
    const now = await databaseNow(conn);
    const runners = await orEmpty(listRunners(conn, namespace), [], noTable);
    const running = await orEmpty(listRunningRuns(conn, namespace), [], noTable);
    const pauses = await orEmpty(listPauses(conn, namespace), [], noTable);
    // Every job the report can name, whichever runners --gone-after counts as alive.
    const jobs = reportedJobs(config, currentRunners(runners, now), pauses, running);
    const history = await orEmpty(jobHistoryFacts(conn, namespace, jobs), new Map(), noTable);
    const hourAgo = new Date(now.getTime() - 3_600_000);
    const notifications = await orEmpty(outboxState(conn, namespace, hourAgo), undefined, noTable);
    // The file's pools, per host for a pool of one slot per host: the runners', and those of runs
    // going on (a `baton run --host H` holds its slot on H's).
    const hosts = [
      ...new Set([
        ...currentRunners(runners, now).map((r) => r.host),
        ...running.map((r) => r.host),
      ]),
    ];
    const where = { database: resolveDatabase(args).database, namespace };
    const pools = config
      ? await orEmpty(
          readPoolStatus(conn, where, Object.values(config.pools), hosts),
          undefined,
          noTable,
        )
      : undefined;
    const timings = await orEmpty(readTimings(conn, namespace), undefined, noTable);
    const schedules = await orEmpty(countSchedules(conn, namespace), new Map(), noTable);
    const blackouts = await orEmpty(listBlackouts(conn, namespace), [], noTable);
    return {
      now,
      databaseClock: true,
      runners,
      running,
      pauses,
      history,
      notifications,
      pools,
      ...(timings ? { timings } : {}),
      schedules,
      blackouts,
    };
  } finally {
    await conn.end().catch(() => {});
  }
}

/** A few words per finding for the first line, the one a monitor shows: `"nightly" overdue`. */
function label(w: Warning): string {
  const job = `"${w.job ?? ''}"`;
  const host = w.hosts?.join(', ') ?? '';
  switch (w.kind) {
    case 'no-runner':
      return 'no runner alive';
    case 'no-eligible-runner':
      return `no eligible runner for ${job}`;
    case 'runner-gone':
      return `runner ${host} gone`;
    case 'detached':
      return `runner ${host} detached from the fleet`;
    case 'clock-offset':
      return `clock of ${host} off`;
    case 'notify-failing':
      return `notifications to ${host} failing`;
    case 'schedule-drift':
      return `drift of ${job}`;
    case 'no-success':
      return `${job} overdue`;
    case 'failing':
      return `${job} failing`;
    case 'slow':
      return `${job} slow`;
    case 'paused':
      return `${job} paused`;
    case 'blackout':
      return w.job ? `${job} blacked out` : 'blackout on';
    case 'held':
      return `${job} held on ${host}`;
    case 'switch-anomaly':
      return `${job} switch runs twice or skips a day`;
    case 'timing-switch':
      return `${job} switches timing`;
  }
}

/** `CRITICAL: no runner alive; namespace "prod" (from the schedules file …), database time …`. */
function firstLine(report: StatusReport, resolved: ResolvedNamespace, databaseClock: boolean) {
  const MAX_LABELS = 3;
  const labels = [...new Set(report.warnings.map(label))];
  const shown = labels.slice(0, MAX_LABELS).join(', ');
  const more = labels.length > MAX_LABELS ? ` and ${labels.length - MAX_LABELS} more` : '';
  const what = labels.length > 0 ? ` ${shown}${more};` : '';
  const clock = databaseClock ? 'database time' : "this host's time (no database)";
  return (
    `${report.state}:${what} ${namespaceLine(resolved)}, ${clock} ` +
    `${formatInstant(report.now)} UTC\n`
  );
}

function render(
  report: StatusReport,
  resolved: ResolvedNamespace,
  databaseClock: boolean,
  schedules: ReadonlyMap<string, number>,
): string {
  const { now } = report;
  const out: string[] = [firstLine(report, resolved, databaseClock)];

  const count = (state: string) => report.runners.filter((r) => r.state === state).length;
  out.push(
    `\nRUNNERS: ${count('alive')} alive, ${count('gone')} gone, ${count('stopped')} stopped\n`,
  );
  out.push(
    report.runners.length === 0
      ? 'no runner has registered in this namespace\n'
      : table(
          ['HOST', 'STATE', 'TAGS', 'PID', 'VERSION', 'CLOCK OFFSET', 'LAST SEEN', 'STARTED (UTC)'],
          report.runners.map((r) => [
            r.host,
            r.state,
            r.tags.join(', '),
            r.pid,
            r.version,
            r.clockOffsetMs == null ? 'not measured yet' : signed(r.clockOffsetMs),
            `${formatDuration(now.getTime() - r.lastSeenAt.getTime(), 'table')} ago`,
            formatInstant(r.startedAt),
          ]),
        ),
  );

  out.push(`\nRUNNING NOW: ${report.running.length}\n`);
  if (report.running.length > 0) {
    out.push(
      table(
        ['JOB', 'HOST', 'RUN ID', 'SINCE (UTC)', 'FOR', 'FIRE (UTC)', 'TRIGGER'],
        report.running.map((r) => [
          r.job,
          r.host,
          r.runId,
          formatInstant(r.startedAt),
          formatDuration(r.runningForMs, 'table') + (r.slow ? ' (slow)' : ''),
          formatInstant(r.scheduledAt),
          r.attempts > 1 ? `${r.trigger} (attempt ${r.attempts})` : r.trigger,
        ]),
      ),
    );
  }

  if (report.pools.length > 0) out.push(renderPools(report));

  out.push(`\nJOBS: ${report.jobs.length}\n`);
  if (report.jobs.length > 0) {
    out.push(
      table(
        [
          'JOB',
          'NEXT FIRE (UTC)',
          'LAST SUCCESS (UTC)',
          'OVERDUE AFTER (UTC)',
          'PAUSED',
          'LOADED BY',
        ],
        report.jobs.map((j) => [
          j.name,
          j.nextFire
            ? formatInstant(j.nextFire)
            : j.enabled === false
              ? 'disabled'
              : j.inConfig
                ? j.after && j.schedule == null
                  ? describeAfter(j.after)
                  : ''
                : 'not in the schedules file',
          j.lastSuccessAt ? formatInstant(j.lastSuccessAt) : 'never',
          formatInstant(j.overdueAt),
          j.pause ? `by ${j.pause.pausedBy}` : '',
          j.loadedBy.join(', '),
        ]),
      ),
    );
  }

  out.push(renderSchedules(schedules));
  out.push(renderBlackouts(report));

  if (report.warnings.length === 0) {
    out.push('\nno warnings\n');
  } else {
    // Worst first; within a severity, in the report's order.
    const order = ['critical', 'warning', 'info'] as const;
    const severity = (w: Warning) => severityOf(w.kind, { warnPaused: report.warnPaused });
    const counts = order
      .map((s) => [s, report.warnings.filter((w) => severity(w) === s).length] as const)
      .filter(([, n]) => n > 0)
      .map(([s, n]) => `${n} ${s}`);
    out.push(`\nWARNINGS: ${report.warnings.length} (${counts.join(', ')})\n`);
    for (const s of order) {
      for (const w of report.warnings.filter((x) => severity(x) === s)) {
        out.push(`${s.toUpperCase()} ${w.kind}: ${w.message}\n`);
      }
    }
  }
  return out.join('');
}

/** The blackouts going on and to come; nothing when there are none. */
function renderBlackouts(report: StatusReport): string {
  if (report.blackouts.length === 0) return '';
  const rows = report.blackouts.map((b) => [
    `#${b.id}`,
    blackoutState(b, report.now),
    formatInstant(b.startsAt),
    formatInstant(endOf(b)),
    describeCover(b),
    b.createdBy,
    b.reason,
  ]);
  return (
    `\nBLACKOUTS: ${report.blackouts.length} (baton blackout list)\n` +
    table(['ID', 'STATE', 'FROM (UTC)', 'UNTIL (UTC)', 'COVERS', 'BY', 'REASON'], rows)
  );
}

/** How many schedules created at run time each job has; nothing when there are none. */
function renderSchedules(counts: ReadonlyMap<string, number>): string {
  if (counts.size === 0) return '';
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  const rows = [...counts].map(([job, n]) => [job, n.toLocaleString('en-US')]);
  return (
    `\nSCHEDULES CREATED AT RUN TIME: ${total.toLocaleString('en-US')} ` +
    `(baton history <job> --key K)\n${table(['JOB', 'KEYS'], rows)}`
  );
}

/** Each pool: its slots, how many are taken (per host for a host pool), and by which runs. */
function renderPools(report: StatusReport): string {
  const { now } = report;
  const rows = report.pools.map((p) => {
    const size = p.scope === 'host' ? `${p.slots} per host` : `${p.slots}`;
    const inUse =
      p.scope === 'host'
        ? p.places.map((h) => `${h.host} ${h.used}`).join(', ') || 'no live runner'
        : `${slotsInUse(p)}`;
    const holders = [
      ...p.runs.map(
        (r) =>
          `${r.job} on ${r.host} (run ${r.id}, ` +
          `${formatDuration(now.getTime() - r.startedAt.getTime(), 'table')})`,
      ),
      ...p.claiming.map((c) => `${c.holder} (taking a slot)`),
    ];
    return [p.name, size, inUse, holders.join(', ')];
  });
  return `\nPOOLS: ${report.pools.length}\n${table(['POOL', 'SLOTS', 'IN USE', 'HELD BY'], rows)}`;
}

/** -2003 → "-2.0s (behind)", 12 → "+12ms (ahead)". */
function signed(ms: number): string {
  if (ms === 0) return '0ms';
  return `${ms > 0 ? '+' : '-'}${formatDuration(Math.abs(ms), 'table')} (${ms > 0 ? 'ahead' : 'behind'})`;
}
