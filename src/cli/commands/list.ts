import type { CommandModule } from 'yargs';
import { ExitCode } from '../../exit-codes.js';
import { parseSchedule } from '../../schedule/cron.js';
import { describeSchedule } from '../../schedule/describe.js';
import { action } from '../action.js';
import { formatInstant, table } from '../format.js';
import { resolveConfig, withCommonOptions, type CommonArgs } from '../options.js';

interface ListArgs extends CommonArgs {
  json: boolean;
  count: number;
}

export const listCommand: CommandModule<object, ListArgs> = {
  command: 'list',
  describe: 'List every job: schedule, time zone, schedule in words, enabled, next fire times',
  builder: (y) =>
    withCommonOptions(y)
      .option('json', { type: 'boolean', default: false, describe: 'print JSON' })
      .option('count', {
        type: 'number',
        default: 3,
        describe: 'how many next fire times to show',
      }) as never,
  handler: action((args: ListArgs) => {
    const config = resolveConfig(args);
    const now = new Date();
    const jobs = config.jobs.map((job) => ({
      name: job.name,
      schedule: job.schedule,
      timezone: job.timezone,
      describe: describeSchedule(job.schedule),
      description: job.description ?? null,
      enabled: job.enabled,
      nextFires: parseSchedule(job.schedule, job.timezone)
        .nextN(Math.max(0, Math.floor(args.count)), now)
        .map((d) => d.toISOString()),
    }));
    if (args.json) {
      process.stdout.write(`${JSON.stringify({ namespace: config.namespace, jobs }, null, 2)}\n`);
      return ExitCode.Ok;
    }
    process.stdout.write(
      table(
        ['JOB', 'SCHEDULE', 'TIME ZONE', 'IN WORDS', 'ENABLED', 'NEXT FIRES (UTC)'],
        jobs.map((j) => [
          j.name,
          j.schedule,
          j.timezone,
          j.describe,
          j.enabled ? 'yes' : 'no',
          j.nextFires.map((f) => formatInstant(new Date(f))).join(', '),
        ]),
      ),
    );
    return ExitCode.Ok;
  }),
};
