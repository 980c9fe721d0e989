#!/usr/bin/env node
/**
 * The `baton` command line: a yargs root and one file per command under ./commands. Handlers are
 * thin: they resolve options, call typed functions, and return an exit code (see ../exit-codes.ts).
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { ExitCode } from '../exit-codes.js';
import { version } from '../version.js';
import { explainCommand } from './commands/explain.js';
import { historyCommand } from './commands/history.js';
import { listCommand } from './commands/list.js';
import { migrateCommand } from './commands/migrate.js';
import { pauseCommand, resumeCommand } from './commands/pause.js';
import { pruneCommand } from './commands/prune.js';
import { runCommand } from './commands/run.js';
import { showCommand } from './commands/show.js';
import { startCommand } from './commands/start.js';
import { statusCommand } from './commands/status.js';
import { validateCommand } from './commands/validate.js';

// `baton history | head` closes stdout early: that is the reader's choice, not an error (a
// command that must go on after it, like `baton run`, handles this itself).
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  // A command with a handler of its own (baton run) decides; everyone else is done.
  if (process.stdout.listenerCount('error') === 1) process.exit(process.exitCode ?? ExitCode.Ok);
});

await yargs(hideBin(process.argv))
  .scriptName('baton')
  .usage(
    '$0 <command> [options]\n\nDistributed cron: every server runs the same schedule, each fire runs once.',
  )
  .command(startCommand)
  .command(runCommand)
  .command(statusCommand)
  .command(historyCommand)
  .command(explainCommand)
  .command(showCommand)
  .command(listCommand)
  .command(pauseCommand)
  .command(resumeCommand)
  .command(validateCommand)
  .command(migrateCommand)
  .command(pruneCommand)
  // `baton completion >> ~/.bashrc` (or ~/.zshrc): commands and options complete on Tab.
  .completion('completion', 'Print a shell completion script for bash or zsh')
  .demandCommand(1, 'name a command (see --help)')
  .strict()
  .version(version)
  .help()
  .alias('h', 'help')
  .wrap(Math.min(110, process.stdout.columns || 100))
  .fail((message, err) => {
    if (err) throw err;
    process.stderr.write(`baton: ${message}\nRun "baton --help" for usage.\n`);
    process.exit(ExitCode.Usage);
  })
  .parseAsync();
