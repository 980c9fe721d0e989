import type { CommandModule } from 'yargs';
import { ExitCode } from '../../exit-codes.js';
import { migrateDatabase } from '../../store/migrate.js';
import { action } from '../action.js';
import { resolveDatabase, withCommonOptions, type CommonArgs } from '../options.js';

interface MigrateArgs extends CommonArgs {
  json: boolean;
}

export const migrateCommand: CommandModule<object, MigrateArgs> = {
  command: 'migrate',
  describe: 'Create the database if missing, apply pending schema migrations, and exit',
  builder: (y) =>
    withCommonOptions(y).option('json', {
      type: 'boolean',
      default: false,
      describe: 'print {database, applied, upToDate} as JSON',
    }) as never,
  handler: action(async (args: MigrateArgs) => {
    const target = resolveDatabase(args);
    const { applied } = await migrateDatabase(target);
    if (args.json) {
      // `display` is the URL without its password.
      const doc = { database: target.display, applied, upToDate: applied.length === 0 };
      process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
      return ExitCode.Ok;
    }
    process.stdout.write(
      applied.length > 0
        ? `applied ${applied.length} migration(s) to ${target.display}: ${applied.join(', ')}\n`
        : `${target.display} is up to date\n`,
    );
    return ExitCode.Ok;
  }),
};
