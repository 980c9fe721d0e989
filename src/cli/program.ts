/**
 * The `baton` command line as a function: a yargs root and one file per command under
 * ./commands, run on the words after `baton`. `main.ts` is the executable around it; the tests
 * of the in-process tier call it directly (test/helpers/cli-in-process.ts), so that reading a
 * runner's state through the CLI costs no process start.
 *
 * Handlers are thin: they resolve options, call typed functions, and set the exit code (see
 * ../exit-codes.ts and ./action.ts). A usage mistake ends the invocation with `CliExit`.
 */
import yargs, { type Argv, type CommandModule } from 'yargs';
import { version } from '../version.js';
import { CliExit, failUsage, noteOptions, setInvocation, yargsComplaint } from './usage.js';

/** The commands a name on the command line loads: its module, and what it registers. */
type CommandLoader = () => Promise<CommandModule<object, any>[]>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * The commands by the name they are invoked with, in the order --help lists them. Each module is
 * imported only when it is wanted: `baton status` loads the status command and what it imports,
 * not the other commands' modules (the SMTP client, the backfill's planner, the terminal views of
 * history), which for a short command were half its start — some 0.35 s of CPU of every
 * invocation (bench/README.md, "The command line's start") — and for `baton start`, a daemon
 * that lives for months, memory it would carry for nothing. Any other invocation (help, --version,
 * completion, a mistyped command, an option before the command) loads them all.
 */
const COMMANDS: Record<string, CommandLoader> = {
  start: async () => [(await import('./commands/start.js')).startCommand],
  run: async () => [(await import('./commands/run.js')).runCommand],
  backfill: async () => [(await import('./commands/backfill.js')).backfillCommand],
  status: async () => [(await import('./commands/status.js')).statusCommand],
  history: async () => [(await import('./commands/history.js')).historyCommand],
  explain: async () => [(await import('./commands/explain.js')).explainCommand],
  show: async () => [(await import('./commands/show.js')).showCommand],
  logs: async () => [(await import('./commands/logs.js')).logsCommand],
  list: async () => [(await import('./commands/list.js')).listCommand],
  pause: async () => [(await import('./commands/pause.js')).pauseCommand],
  resume: async () => [(await import('./commands/pause.js')).resumeCommand],
  blackout: async () => [(await import('./commands/blackout.js')).blackoutCommand],
  kill: async () => [(await import('./commands/kill.js')).killCommand],
  audit: async () => [(await import('./commands/audit.js')).auditCommand],
  validate: async () => [(await import('./commands/validate.js')).validateCommand],
  migrate: async () => [(await import('./commands/migrate.js')).migrateCommand],
  prune: async () => [(await import('./commands/prune.js')).pruneCommand],
  notifications: async () => [(await import('./commands/notifications.js')).notificationsCommand],
  notify: async () => [(await import('./commands/notifications.js')).notifyCommand],
  definitions: async () => [(await import('./commands/definitions.js')).definitionsCommand],
};

async function withCommands(cli: Argv, argv: readonly string[]): Promise<Argv> {
  const named = Object.hasOwn(COMMANDS, argv[0] ?? '') ? argv[0]! : null;
  const loaders = named ? [COMMANDS[named]!] : Object.values(COMMANDS);
  const commands = (await Promise.all(loaders.map((load) => load()))).flat();
  return commands.reduce((withCommand, command) => withCommand.command(command), cli);
}

export interface RunCliOptions {
  /**
   * Whether yargs may end the process itself, after printing --help or --version (the
   * executable: yes; a caller in a process that must live on: no).
   */
  exitProcess?: boolean;
}

/**
 * Runs `baton <argv…>`. Resolves with the exit code of a usage mistake (64, or a check's 3),
 * which the caller must exit with; otherwise with null, the command having set
 * `process.exitCode` (./action.ts). Not reentrant: an invocation's words and what yargs matched
 * are the usage module's while it runs, so callers run one at a time.
 */
export async function runCli(
  argv: readonly string[],
  { exitProcess = true }: RunCliOptions = {},
): Promise<number | null> {
  setInvocation(argv);
  // A Tab in the shell: the words typed so far follow --get-yargs-completions.
  const completionAt = argv.indexOf('--get-yargs-completions');
  const completing = completionAt >= 0 ? await import('./completion.js') : null;
  const cli = await withCommands(
    yargs([...argv])
      .scriptName('baton')
      .usage(
        '$0 <command> [options]\n\nDistributed cron: every server runs the same schedule, each fire runs once.',
      ),
    argv,
  );
  try {
    await cli
      // `baton completion >> ~/.bashrc` (or ~/.zshrc): commands, options, job names and run ids
      // complete on Tab (./completion.ts).
      .completion(
        'completion',
        'Print a shell completion script for bash or zsh',
        completing
          ? completing.completer(await completing.candidates(argv.slice(completionAt + 1)))
          : undefined,
      )
      .exitProcess(exitProcess)
      // An option with `nargs` takes its next word even when it looks like an option (options.ts:
      // FREE_TEXT, REPEATABLE): `--reason "--database-url=…"` is a reason.
      .parserConfiguration({ 'nargs-eats-options': true })
      .demandCommand(1, 'name a command (see --help)')
      // Unknown commands and options are refused (64), with the closest known name (usage.ts).
      .strict()
      .recommendCommands()
      .middleware(noteOptions, true)
      .version(version)
      .help()
      .alias('h', 'help')
      .wrap(Math.min(110, process.stdout.columns || 100))
      .fail(failUsage(argv))
      .parseAsync();
    return null;
  } catch (err) {
    if (err instanceof CliExit) return err.exitCode;
    const complaint = yargsComplaint(err, argv);
    if (complaint) return complaint.exitCode;
    throw err;
  }
}
