import type { CommandModule } from 'yargs';
import { UsageError } from '../../errors.js';
import { action } from '../action.js';
import { withCommonOptions, type CommonArgs } from '../options.js';

// In construction (issue 4): being written now; replaced before this lands.
export const pauseCommand: CommandModule<object, CommonArgs> = {
  command: 'pause <job>',
  describe: 'Pause a job on every runner from its next fire (skip rows say "paused")',
  builder: (y) => withCommonOptions(y) as never,
  handler: action(() => {
    throw new UsageError('pause: not built yet');
  }),
};

export const resumeCommand: CommandModule<object, CommonArgs> = {
  command: 'resume <job>',
  describe: 'Resume a paused job on every runner',
  builder: (y) => withCommonOptions(y) as never,
  handler: action(() => {
    throw new UsageError('resume: not built yet');
  }),
};
