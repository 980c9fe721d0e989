import type { CommandModule } from 'yargs';
import { UsageError } from '../../errors.js';
import { action } from '../action.js';
import { withCommonOptions, type CommonArgs } from '../options.js';

// In construction (issue 4): being written now; replaced before this lands.
export const showCommand: CommandModule<object, CommonArgs> = {
  command: 'show <run-id>',
  describe: 'One run in full, with its output tail and error',
  builder: (y) => withCommonOptions(y) as never,
  handler: action(() => {
    throw new UsageError('show: not built yet');
  }),
};
