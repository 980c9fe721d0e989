/**
 * `baton status [--json]`: the fleet at one instant of the database's clock — live runners with
 * their clock offsets, the runs in progress, each job's next fire and last success — and the
 * warnings a monitor pages on (exit 1). The report itself is computed by src/fleet/status.ts.
 */
import type { CommandModule } from 'yargs';
import { formatDuration } from '../../config/duration.js';
import type { Config } from '../../config/schema.js';
import { dbErrorCode, orEmpty } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import {
  buildStatus,
  currentRunners,
  DEFAULT_CLOCK_THRESHOLD_MS,
  reportedJobs,
  statusToJson,
  type StatusReport,
} from '../../fleet/status.js';
import { openConnection } from '../../store/connect.js';
import {
  databaseNow,
  jobHistoryFacts,
  listRunningRuns,
  type JobHistoryFacts,
  type RunningRun,
} from '../../store/fleet-reads.js';
import { listPauses, type Pause } from '../../store/pauses.js';
import { listRunners, type RunnerRecord } from '../../store/runners.js';
import { formatInstant } from '../../text.js';
import { action } from '../action.js';
import { table } from '../format.js';
import {
  configPath,
  durationOption,
  resolveDatabase,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';
import { GONE_AFTER_OPTION, goneAfterMs } from '../fleet-options.js';
import { optionalConfig, resolveNamespace } from '../config-options.js';
import { watch, watchIntervalMs, WATCH_OPTION, type Frame } from '../watch.js';

interface StatusArgs extends CommonArgs {
  json: boolean;
  namespace?: string;
  clockThreshold: string;
  goneAfter: string;
  watch?: string;
}

const EPILOGUE = `Exit status: 0 when there is no warning, 1 with warnings (for monitoring), 69 when the
database cannot be reached.

Warnings (kind): runner-gone (no heartbeat for --gone-after without a graceful stop),
clock-offset (a live runner's clock is off the database's by more than --clock-threshold),
schedule-drift (live runners loaded different definitions of a job, or only some loaded it; or
the schedules file's definition of a job is not the one the live runners loaded, they run a job
that is not in it, or no live runner loaded an enabled job of it),
no-success (the dead-man's switch: an enabled job of the schedules file with no success for its
\`expect:\`, by default two of its fires plus a grace of max(1m, 10% of its period)),
paused (a job paused with "baton pause").

Times are the database's clock. Next fires come from the schedules file (--config, env
BATON_CONFIG); without one they are not shown. --json prints { namespace, now, healthy,
runners: [{ host, pid, version, state, alive, clockOffsetMs, startedAt, lastSeenAt,
lastSeenAgoMs, stoppedAt, jobs }], running: [{ runId, job, host, pid, trigger, scheduledAt,
startedAt, runningForMs, attempts }], jobs: [{ name, inConfig, enabled, schedule, timezone,
nextFire, paused, pause, lastSuccessAt, expectMs, overdueAt, loadedBy }], warnings: [{ kind,
message, job?, hosts? }] }. clockOffsetMs is how far the runner's clock is ahead of the
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
      .option('watch', WATCH_OPTION)
      .epilogue(EPILOGUE) as never,
  handler: action(async (args: StatusArgs) => {
    const clockThresholdMs = durationOption('clock-threshold', args.clockThreshold);
    const goneAfter = goneAfterMs(args);
    const watchMs = watchIntervalMs(args.watch);
    const namespace = resolveNamespace(args);
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

    const frame = async (): Promise<Frame> => {
      const facts = await readFleet(args, namespace, config);
      const report = buildStatus({
        ...facts,
        namespace,
        config,
        clockThresholdMs,
        goneAfterMs: goneAfter,
      });
      const stdout = args.json
        ? `${JSON.stringify(statusToJson(report), null, 2)}\n`
        : render(report, facts.databaseClock);
      const code = report.warnings.length === 0 ? ExitCode.Ok : ExitCode.Failure;
      return { stdout, stderr: '', code };
    };
    if (watchMs != null) return watch(watchMs, 'baton status', frame);
    const f = await frame();
    process.stdout.write(f.stdout);
    return f.code;
  }),
};

interface FleetFacts {
  now: Date;
  /** False when there is no database to ask: `now` is then this host's clock. */
  databaseClock: boolean;
  runners: RunnerRecord[];
  running: RunningRun[];
  pauses: Pause[];
  history: Map<string, JobHistoryFacts>;
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
    return { now, databaseClock: true, runners, running, pauses, history };
  } finally {
    await conn.end().catch(() => {});
  }
}

function render(report: StatusReport, databaseClock: boolean): string {
  const { now } = report;
  const out: string[] = [];
  const clock = databaseClock ? 'database time' : "this host's time (no database)";
  out.push(`namespace "${report.namespace}", ${clock} ${formatInstant(now)} UTC\n`);

  const count = (state: string) => report.runners.filter((r) => r.state === state).length;
  out.push(
    `\nRUNNERS: ${count('alive')} alive, ${count('gone')} gone, ${count('stopped')} stopped\n`,
  );
  out.push(
    report.runners.length === 0
      ? 'no runner has registered in this namespace\n'
      : table(
          ['HOST', 'STATE', 'PID', 'VERSION', 'CLOCK OFFSET', 'LAST SEEN', 'STARTED (UTC)'],
          report.runners.map((r) => [
            r.host,
            r.state,
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
          formatDuration(r.runningForMs, 'table'),
          formatInstant(r.scheduledAt),
          r.attempts > 1 ? `${r.trigger} (attempt ${r.attempts})` : r.trigger,
        ]),
      ),
    );
  }

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
                ? ''
                : 'not in the schedules file',
          j.lastSuccessAt ? formatInstant(j.lastSuccessAt) : 'never',
          formatInstant(j.overdueAt),
          j.pause ? `by ${j.pause.pausedBy}` : '',
          j.loadedBy.join(', '),
        ]),
      ),
    );
  }

  if (report.warnings.length === 0) {
    out.push('\nno warnings\n');
  } else {
    out.push(`\nWARNINGS: ${report.warnings.length}\n`);
    for (const w of report.warnings) out.push(`${w.kind}: ${w.message}\n`);
  }
  return out.join('');
}

/** -2003 → "-2.0s (behind)", 12 → "+12ms (ahead)". */
function signed(ms: number): string {
  if (ms === 0) return '0ms';
  return `${ms > 0 ? '+' : '-'}${formatDuration(Math.abs(ms), 'table')} (${ms > 0 ? 'ahead' : 'behind'})`;
}
