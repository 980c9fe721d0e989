import type { CommandModule } from 'yargs';
import { Runner } from '../../daemon/runner.js';
import { ExitCode } from '../../exit-codes.js';
import { createLogger } from '../../log.js';
import { action } from '../action.js';
import {
  resolveConfig,
  resolveDatabase,
  resolveHost,
  withCommonOptions,
  type CommonArgs,
} from '../options.js';

interface StartArgs extends CommonArgs {
  grace: number;
  logLevel?: string;
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
      }) as never,
  handler: action(async (args: StartArgs) => {
    // Everything that can be wrong with the input is checked before anything is started.
    const config = resolveConfig(args);
    const target = resolveDatabase(args);
    const host = resolveHost(args);
    // Every line names the runner, so the logs of a fleet can be merged and still be read.
    const log = createLogger({ ...(args.logLevel ? { level: args.logLevel } : {}) }).child({
      host,
    });

    const runner = new Runner({ config, target, host, log, graceMs: args.grace * 1000 });
    try {
      await runner.start();
    } catch (err) {
      await runner.stop('start-up failed', true);
      throw err;
    }

    // First signal drains (up to --grace), a second one stops running jobs at once.
    await new Promise<void>((resolve) => {
      let stopping: Promise<void> | null = null;
      const onSignal = (signal: NodeJS.Signals) => {
        if (stopping) {
          log.warn({ signal }, 'second signal: stopping running jobs now');
          void runner.stop(signal, true);
          return;
        }
        log.info({ signal }, 'stopping');
        stopping = runner.stop(signal).finally(resolve);
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    });
    log.flush();
    return ExitCode.Ok;
  }),
};
