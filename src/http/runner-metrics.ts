/**
 * A runner's metrics (metrics.ts) read from the runner itself: what `baton start --http` serves
 * at /metrics, and what library mode hands the application as `scheduler.metrics` to mount on its
 * own endpoint. `runner` is asked at scrape time (the registry exists before the runner does).
 */
import type { Runner } from '../daemon/runner.js';
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import { RunnerMetrics, type RunnerIdentity } from './metrics.js';

export function runnerMetrics(
  identity: RunnerIdentity,
  runner: () => Runner,
  log: Logger,
): RunnerMetrics {
  return new RunnerMetrics(identity, {
    gauges: () => runner().gauges(),
    jobs: () => runner().loadedJobs(),
    namespace: () => runner().loadedConfig.namespace,
    notifyTargets: () => Object.keys(runner().loadedConfig.notifyTargets),
    pools: () => Object.values(runner().loadedConfig.pools),
    poolPlace: () => runner().poolPlace,
    readPool: () => runner().readPool,
    now: () => runner().databaseNow(),
    timings: () => runner().timings.metrics,
    onReadError: (err) =>
      log.warn(
        { err: errorMessage(err) },
        'metrics: could not read the history; serving the last values',
      ),
  });
}
