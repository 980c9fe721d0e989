#!/usr/bin/env node
/**
 * The `baton` command line: a yargs root and one file per command under ./commands. Handlers are
 * thin: they resolve options, call typed functions, and return an exit code (see ../exit-codes.ts).
 */
import yargs, { type Argv } from 'yargs';
import { hideBin } from 'yargs/helpers';
import { ExitCode } from '../exit-codes.js';
import { version } from '../version.js';
import { failUsage, noteOptions } from './usage.js';

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
  const [
    start,
    run,
    status,
    history,
    explain,
    show,
    logs,
    list,
    pause,
    validate,
    migrate,
    prune,
    notifications,
    kill,
    audit,
    backfill,
  ] = await Promise.all([
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
    import('./commands/notifications.js'),
    import('./commands/kill.js'),
    import('./commands/audit.js'),
    import('./commands/backfill.js'),
  ]);
  return cli
    .command(start.startCommand)
    .command(run.runCommand)
    .command(backfill.backfillCommand)
    .command(status.statusCommand)
    .command(history.historyCommand)
    .command(explain.explainCommand)
    .command(show.showCommand)
    .command(logs.logsCommand)
    .command(list.listCommand)
    .command(pause.pauseCommand)
    .command(pause.resumeCommand)
    .command(kill.killCommand)
    .command(audit.auditCommand)
    .command(validate.validateCommand)
    .command(migrate.migrateCommand)
    .command(prune.pruneCommand)
    .command(notifications.notificationsCommand)
    .command(notifications.notifyCommand);
}

// `baton history | head` closes stdout early: that is the reader's choice, not an error (a
// command that must go on after it, like `baton run`, handles this itself).
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  // A command with a handler of its own (baton run) decides; everyone else is done.
  if (process.stdout.listenerCount('error') === 1) process.exit(process.exitCode ?? ExitCode.Ok);
});

// A Tab in the shell: the words typed so far follow --get-yargs-completions.
const completionAt = process.argv.indexOf('--get-yargs-completions');
const completionWords = process.argv.slice(completionAt + 1);
const completing = completionAt >= 0 ? await import('./completion.js') : null;

const cli = await withCommands(
  yargs(hideBin(process.argv))
    .scriptName('baton')
    .usage(
      '$0 <command> [options]\n\nDistributed cron: every server runs the same schedule, each fire runs once.',
    ),
);
await cli
  // `baton completion >> ~/.bashrc` (or ~/.zshrc): commands, options, job names and run ids
  // complete on Tab (./completion.ts).
  .completion(
    'completion',
    'Print a shell completion script for bash or zsh',
    completing ? completing.completer(await completing.candidates(completionWords)) : undefined,
  )
  .demandCommand(1, 'name a command (see --help)')
  // Unknown commands and options are refused (64), with the closest known name (usage.ts).
  .strict()
  .recommendCommands()
  .middleware(noteOptions, true)
  .version(version)
  .help()
  .alias('h', 'help')
  .wrap(Math.min(110, process.stdout.columns || 100))
  .fail(failUsage(hideBin(process.argv)))
  .parseAsync();
