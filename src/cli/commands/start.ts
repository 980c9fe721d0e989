import { tracingFromEnvironment } from '../../config/tracing.js';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { CommandModule } from 'yargs';
import { loadConfigIsolated } from '../../config/load-isolated.js';
import { watchRunRequests } from '../../actions/run-request-watch.js';
import { Runner, RUNNER_DEFAULTS } from '../../daemon/runner.js';
import { runnerTimings } from '../../daemon/runner-options.js';
import { resolveTimings, type PartialTimings } from '../../daemon/timings.js';
import { errorMessage, UsageError } from '../../errors.js';
import { ExitCode } from '../../exit-codes.js';
import { createLogger, type Logger } from '../../log.js';
import { checkHttpToken, parseListenAddress, type ListenAddress } from '../../http/address.js';
import type { RunnerMetrics } from '../../http/metrics.js';
import {
  readWriteTokens,
  WRITE_TOKENS_CREDENTIAL,
  type WriteToken,
} from '../../http/write-tokens.js';
import { version } from '../../version.js';
import { action } from '../action.js';
import {
  configPath,
  durationOption,
  resolveDatabase,
  resolveHost,
  resolveTags,
  withCommonOptions,
  REPEATABLE,
  type CommonArgs,
} from '../options.js';

/** Stop (first: drain, second: at once) and reload. */
const HANDLED_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

interface StartArgs extends CommonArgs {
  grace: number;
  logLevel?: string;
  heartbeat?: string;
  heartbeatDeadline?: string;
  reaperInterval?: string;
  registryInterval?: string;
  clockWarn?: string;
  tag?: string[];
  timings?: string;
  http?: string;
  httpToken?: string;
  httpWriteTokensFile?: string;
}

export const startCommand: CommandModule<object, StartArgs> = {
  command: 'start',
  describe: 'Run the daemon: fire every enabled job on schedule, once across all runners',
  builder: (y) =>
    withCommonOptions(y)
      .option('grace', {
        type: 'number',
        default: 30,
        describe: 'seconds a stop (SIGTERM/SIGINT) waits for running jobs before stopping them',
      })
      .option('log-level', {
        type: 'string',
        describe: 'trace|debug|info|warn|error (env BATON_LOG_LEVEL; default info)',
      })
      .option('heartbeat', {
        type: 'string',
        defaultDescription: `${RUNNER_DEFAULTS.heartbeatMs}ms`,
        describe: 'how often the lock session is checked',
      })
      .option('heartbeat-deadline', {
        type: 'string',
        defaultDescription: `${RUNNER_DEFAULTS.heartbeatDeadlineMs}ms`,
        describe: 'a check unanswered this long means the lock session is lost (runs are aborted)',
      })
      .option('reaper-interval', {
        type: 'string',
        defaultDescription: `${RUNNER_DEFAULTS.reaperMs}ms`,
        describe: 'how often running rows of vanished runners are looked for and marked lost',
      })
      .option('registry-interval', {
        type: 'string',
        defaultDescription: `${RUNNER_DEFAULTS.registryMs}ms`,
        describe:
          'how often this runner refreshes its row in the runner registry; "baton status" ' +
          'calls a runner gone after three missed refreshes (its --gone-after, default 15s)',
      })
      .option('tag', {
        ...REPEATABLE,
        describe:
          "this runner's tags, for jobs' runOn: --tag sftp --tag region=eu (env BATON_TAGS, " +
          'comma-separated)',
      })
      .option('clock-warn', {
        type: 'string',
        defaultDescription: `${RUNNER_DEFAULTS.clockWarnMs}ms`,
        describe: "warn when this host's clock is off from the database's by more than this",
      })
      // For the tests only (test/README.md), not in --help: any of the runner's timings
      // (daemon/timings.ts) as JSON, e.g. '{"notifier":{"evaluateMs":500}}'.
      .option('timings', { type: 'string', hidden: true })
      .option('http', {
        type: 'string',
        describe:
          'serve /metrics, /healthz and a read-only dashboard at host:port, e.g. ' +
          '127.0.0.1:9464 (env BATON_HTTP; default off)',
      })
      .option('http-token', {
        type: 'string',
        describe:
          'require this token on every HTTP request (Bearer, or Basic with it as password); ' +
          'needed beyond loopback. Prefer env BATON_HTTP_TOKEN: flags show in ps',
      })
      .option('http-write-tokens-file', {
        type: 'string',
        describe:
          'turn on the write API (run, pause, resume over HTTP): a file of name:token lines, the ' +
          'name recorded in the audit (env BATON_HTTP_WRITE_TOKENS_FILE; default ' +
          '$CREDENTIALS_DIRECTORY/http-write-tokens when systemd passes it; default off)',
      }) as never,
  handler: action(async (args: StartArgs) => {
    // A signal that comes before the runner exists (the file is parsed first) is kept and
    // handled once it does: its default action would end the process.
    const early: NodeJS.Signals[] = [];
    const keep = (signal: NodeJS.Signals) => void early.push(signal);
    for (const signal of HANDLED_SIGNALS) process.on(signal, keep);
    // Everything that can be wrong with the input is checked before anything is started. The
    // file is parsed in a worker thread whose memory goes with it (see load-isolated.ts).
    const config = await loadConfigIsolated(configPath(args));
    const target = resolveDatabase(args);
    const host = resolveHost(args);
    const tags = resolveTags(args.tag);
    // A flag not given leaves its timing to --timings, then to the default (timings.ts).
    const flag = (name: string, value: string | undefined) =>
      value == null ? undefined : durationOption(name, value);
    const heartbeatMs = flag('heartbeat', args.heartbeat);
    const heartbeatDeadlineMs = flag('heartbeat-deadline', args.heartbeatDeadline);
    const reaperMs = flag('reaper-interval', args.reaperInterval);
    const registryMs = flag('registry-interval', args.registryInterval);
    const clockWarnMs = flag('clock-warn', args.clockWarn);
    const timings = timingsOption(args.timings);
    // Refused here, with the flags, before anything is started.
    runnerTimings({ timings, heartbeatMs, heartbeatDeadlineMs, reaperMs, registryMs, clockWarnMs });
    if (args.grace < 0 || !Number.isFinite(args.grace)) {
      throw new UsageError('--grace must be a number of seconds >= 0');
    }
    const http = resolveHttp(args);
    // Every line names the runner, so the logs of a fleet can be merged and still be read.
    const log = createLogger({ ...(args.logLevel ? { level: args.logLevel } : {}) }).child({
      host,
    });

    // The endpoint's modules (prom-client, the dashboard) are loaded only for `--http`: a runner
    // without it does not carry them (an idle runner's memory is mostly code).
    const endpointModules = http
      ? await Promise.all([import('../../http/runner-metrics.js'), import('../../http/server.js')])
      : null;
    // The gauges read the runner at scrape time, after it exists.
    const metrics: RunnerMetrics | undefined = endpointModules
      ? endpointModules[0].runnerMetrics(
          { host, namespace: config.namespace, version },
          () => runner,
          log,
        )
      : undefined;
    const runner: Runner = new Runner({
      config,
      target,
      host,
      tags,
      log,
      graceMs: args.grace * 1000,
      timings,
      heartbeatMs,
      heartbeatDeadlineMs,
      reaperMs,
      registryMs,
      clockWarnMs,
      // OpenTelemetry's own variables (docs/tracing.md); the SDK is loaded only when they ask.
      tracing: tracingFromEnvironment(process.env),
    });
    metrics?.observe(runner.events);
    // Signals are handled from the first moment (those that came earlier are replayed below): a
    // runner still waiting for the database must stop cleanly too. First SIGTERM/SIGINT drains
    // (up to --grace), a second stops at once.
    let stopping: Promise<void> | null = null;
    // The watch of `baton run` requests (actions/run-request-watch.ts) stops with the first signal.
    const requests = new AbortController();
    const stopped = new Promise<void>((resolve) => {
      const onSignal = (signal: NodeJS.Signals) => {
        if (stopping) {
          log.warn({ signal }, 'second signal: stopping running jobs now');
          void runner.stop(signal, true);
          return;
        }
        log.info({ signal }, 'stopping');
        requests.abort();
        stopping = runner.stop(signal).finally(resolve);
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    });
    // One reload after another, in the order the signals came.
    let reloading = Promise.resolve();
    process.on('SIGHUP', () => {
      reloading = reloading.then(() => reload(runner, configPath(args), log));
    });
    for (const signal of HANDLED_SIGNALS) process.off(signal, keep);
    for (const signal of early) process.emit(signal, signal);

    // Up before the database is: /healthz says why the runner is not ready while it waits.
    const endpoint =
      http && endpointModules && metrics
        ? await endpointModules[1].startHttpEndpoint({
            ...http,
            metrics,
            log,
            subject: {
              health: () => runner.health(),
              write: {
                host,
                namespace: () => runner.loadedConfig.namespace,
                jobs: () => runner.loadedConfig.jobs.map((j) => j.name),
                whyNotHere: (job: string) => runner.whyNotHere(job),
                pool: () => runner.writePool,
                fires: () => runner.operatorFires(),
                log,
              },
              dashboardSource: () => ({
                pool: runner.readPool,
                namespace: runner.loadedConfig.namespace,
                config: runner.loadedConfig,
                host,
                now: runner.databaseNow(),
                nextFire: (job: string) => runner.nextFire(job),
                database: runner.poolPlace.database,
              }),
            },
          })
        : null;
    try {
      if (await runner.start()) {
        // Every runner takes the `baton run` requests addressed to it, and those of the jobs it may
        // run addressed to no one (a placed job asked for by hand: docs/cli.md).
        watchRunRequests(
          {
            fires: () => runner.operatorFires(),
            namespace: config.namespace,
            host,
            jobs: () => runner.jobsRunnableHere(),
            whyNot: (job) => runner.whyNotHere(job),
            log,
          },
          requests.signal,
        );
      }
    } catch (err) {
      requests.abort();
      await runner.stop('start-up failed', true);
      await endpoint?.close();
      throw err;
    }
    await stopped;
    await endpoint?.close();
    log.flush();
    return ExitCode.Ok;
  }),
};

/**
 * `--http`, its read token (flags, else BATON_HTTP / BATON_HTTP_TOKEN) and its write tokens (the
 * file of `--http-write-tokens-file`, BATON_HTTP_WRITE_TOKENS_FILE or the systemd credential
 * `http-write-tokens`), checked before start.
 */
function resolveHttp(
  args: StartArgs,
): { address: ListenAddress; token?: string; writeTokens?: WriteToken[] } | null {
  const value = args.http ?? process.env.BATON_HTTP;
  if (!value) {
    if (args.httpWriteTokensFile != null) {
      throw new UsageError('--http-write-tokens-file needs --http (or BATON_HTTP)');
    }
    return null;
  }
  const address = parseListenAddress(value);
  const token = args.httpToken ?? (process.env.BATON_HTTP_TOKEN || undefined);
  checkHttpToken(address, token);
  const writeTokens = resolveWriteTokens(args, token);
  return {
    address,
    ...(token != null ? { token } : {}),
    ...(writeTokens ? { writeTokens } : {}),
  };
}

function resolveWriteTokens(args: StartArgs, readToken?: string): WriteToken[] | null {
  const env = process.env;
  if (args.httpWriteTokensFile != null) {
    return readWriteTokens(args.httpWriteTokensFile, '--http-write-tokens-file', readToken);
  }
  if (env.BATON_HTTP_WRITE_TOKENS_FILE) {
    const file = env.BATON_HTTP_WRITE_TOKENS_FILE;
    return readWriteTokens(file, 'BATON_HTTP_WRITE_TOKENS_FILE', readToken);
  }
  const credential =
    env.CREDENTIALS_DIRECTORY != null
      ? path.join(env.CREDENTIALS_DIRECTORY, WRITE_TOKENS_CREDENTIAL)
      : null;
  if (credential != null && existsSync(credential)) {
    return readWriteTokens(
      credential,
      `the systemd credential ${WRITE_TOKENS_CREDENTIAL}`,
      readToken,
    );
  }
  return null;
}

/** SIGHUP: a valid file replaces the schedule; an invalid one is refused and the old one stays. */
async function reload(runner: Runner, file: string, log: Logger): Promise<void> {
  try {
    const changes = runner.reload(await loadConfigIsolated(file));
    log.info({ file, ...changes }, 'schedule reloaded');
  } catch (err) {
    // The same message `baton start` and `baton validate` print for this file.
    log.error({ file, error: errorMessage(err) }, 'reload refused: the old schedule stays');
  }
}

/** `--timings <json>`: an object of timing groups (daemon/timings.ts), checked by resolveTimings. */
function timingsOption(value: string | undefined): PartialTimings | undefined {
  if (value == null) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (err) {
    throw new UsageError(`--timings: not JSON (${errorMessage(err)})`);
  }
  resolveTimings(parsed);
  return parsed as PartialTimings;
}
