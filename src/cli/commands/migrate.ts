import type { CommandModule } from 'yargs';
import { ExitCode } from '../../exit-codes.js';
import { migrateDatabase } from '../../store/migrate.js';
import { action } from '../action.js';
import { resolveDatabase, withCommonOptions, type CommonArgs } from '../options.js';

export const migrateCommand: CommandModule<object, CommonArgs> = {
  command: 'migrate',
  describe: 'Create the database if missing, apply pending schema migrations, and exit',
  builder: (y) => withCommonOptions(y),
  handler: action(async (args: CommonArgs) => {
    const target = resolveDatabase(args);
    const { applied } = await migrateDatabase(target);
    process.stdout.write(
      applied.length > 0
        ? `applied ${applied.length} migration(s) to ${target.display}: ${applied.join(', ')}\n`
        : `${target.display} is up to date\n`,
    );
    return ExitCode.Ok;
  }),
};
