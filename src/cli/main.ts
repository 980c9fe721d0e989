#!/usr/bin/env node
/**
 * The `baton` command line: a yargs root and one file per command under ./commands. Handlers are
 * thin: they resolve options, call typed functions, and return an exit code (see ../exit-codes.ts).
 */
import yargs, { type Argv } from 'yargs';
import { hideBin } from 'yargs/helpers';
import { ExitCode } from '../exit-codes.js';
import { version } from '../version.js';

/**
 * The commands, in the order --help lists them. `baton start` is a daemon that lives for months:
 * it loads its own command only, not the others' modules (tables, cron wording, history views),
 * which an idle runner would carry for nothing — a runner's memory is mostly code. Any other
 * invocation (help, completion, a mistyped command) loads them all.
 */
async function withCommands(cli: Argv): Promise<Argv> {
  if (process.argv[2] === 'start') {
    return cli.command((await import('./commands/start.js')).startCommand);
  }
  const [start, run, status, history, explain, show, logs, list, pause, validate, migrate, prune] =
    await Promise.all([
      import('./commands/start.js'),
      import('./commands/run.js'),
      import('./commands/status.js'),
      import('./commands/history.js'),
      import('./commands/explain.js'),
      import('./commands/show.js'),
      import('./commands/logs.js'),
      import('./commands/list.js'),
      import('./commands/pause.js'),
      import('./commands/validate.js'),
      import('./commands/migrate.js'),
      import('./commands/prune.js'),
    ]);
  return cli
    .command(start.startCommand)
    .command(run.runCommand)
    .command(status.statusCommand)
    .command(history.historyCommand)
    .command(explain.explainCommand)
    .command(show.showCommand)
    .command(logs.logsCommand)
    .command(list.listCommand)
    .command(pause.pauseCommand)
    .command(pause.resumeCommand)
    .command(validate.validateCommand)
    .command(migrate.migrateCommand)
    .command(prune.pruneCommand);
}

// `baton history | head` closes stdout early: that is the reader's choice, not an error (a
// command that must go on after it, like `baton run`, handles this itself).
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  // A command with a handler of its own (baton run) decides; everyone else is done.
  if (process.stdout.listenerCount('error') === 1) process.exit(process.exitCode ?? ExitCode.Ok);
});

const cli = await withCommands(
  yargs(hideBin(process.argv))
    .scriptName('baton')
    .usage(
      '$0 <command> [options]\n\nDistributed cron: every server runs the same schedule, each fire runs once.',
    ),
);
await cli
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
