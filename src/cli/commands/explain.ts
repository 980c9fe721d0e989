import type { CommandModule } from 'yargs';
import { UsageError } from '../../errors.js';
import { action } from '../action.js';
import { withCommonOptions, type CommonArgs } from '../options.js';

// In construction (issue 4): being written now; replaced before this lands.
export const explainCommand: CommandModule<object, CommonArgs> = {
  command: 'explain <job> [fire]',
  describe:
    'Why did a fire run where it did, or not at all: every attempt and the runners that left none',
  builder: (y) => withCommonOptions(y) as never,
  handler: action(() => {
    throw new UsageError('explain: not built yet');
  }),
};
