import type { CommandModule } from 'yargs';
import { UsageError } from '../../errors.js';
import { action } from '../action.js';
import { withCommonOptions, type CommonArgs } from '../options.js';

// In construction (issue 4): being written now; replaced before this lands.
export const statusCommand: CommandModule<object, CommonArgs> = {
  command: 'status',
  describe: 'The fleet: live runners and their clock offsets, running jobs, next fires, warnings',
  builder: (y) => withCommonOptions(y) as never,
  handler: action(() => {
    throw new UsageError('status: not built yet');
  }),
};
