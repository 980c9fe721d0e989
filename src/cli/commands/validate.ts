import type { CommandModule } from 'yargs';
import type { Config } from '../../config/schema.js';
import { ExitCode } from '../../exit-codes.js';
import { action } from '../action.js';
import { resolveConfig, withCommonOptions, type CommonArgs } from '../options.js';

export function describeTarget(job: Config['jobs'][number]): string {
  const t = job.target;
  if (t.kind === 'module') return `module ${t.path}`;
  if (t.kind === 'shell') return `sh -c ${JSON.stringify(t.script)}`;
  return t.argv.map((a) => (/^[\w./:=@%+-]+$/.test(a) ? a : JSON.stringify(a))).join(' ');
}

export const validateCommand: CommandModule<object, CommonArgs> = {
  command: 'validate',
  describe: 'Check the schedules file and print its jobs (exit 0, or 78 when invalid)',
  builder: (y) => withCommonOptions(y),
  handler: action((args: CommonArgs) => {
    const config = resolveConfig(args);
    process.stdout.write(
      `${config.file}: valid, namespace "${config.namespace}", ${config.jobs.length} job(s)\n`,
    );
    for (const job of config.jobs) {
      const state = job.enabled ? '' : ' (disabled)';
      process.stdout.write(
        `  ${job.name}${state}: "${job.schedule}" ${job.timezone} → ${describeTarget(job)}\n`,
      );
    }
    return ExitCode.Ok;
  }),
};
