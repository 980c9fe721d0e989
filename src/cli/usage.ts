/**
 * Usage mistakes, told the way a person can fix them (exit 64): an option that takes one value
 * given twice, a mistyped command or option (with the closest known name), and — with `--json` —
 * as a JSON error on stderr like every other failure (see action.ts).
 *
 * yargs reports unknown options (`.strict()`) and commands (`.recommendCommands()`) in its own
 * words; the option names a command knows are noted by `noteOptions`, a middleware that runs
 * before yargs' validation, so that the failure handler can suggest one of them.
 */
import type { Arguments, Argv } from 'yargs';
import { UsageError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import { closest } from '../text.js';
import { writeError } from './action.js';

/** yargs' view of a command's options (not in its published types). */
interface DeclaredOptions {
  key: Record<string, unknown>;
  array: string[];
}

/**
 * A usage mistake's end of the invocation, with its exit code: `main.ts` exits with it, and a
 * test calling `runCli` gets it back (program.ts).
 */
export class CliExit extends Error {
  constructor(readonly exitCode: number) {
    super(`exit ${exitCode}`);
    this.name = 'CliExit';
  }
}

/** The words after `baton` of the invocation being parsed (program.ts sets them). */
let invocation: readonly string[] = [];
/** The command yargs matched and its option names, once `noteOptions` has run. */
let matched: { command: string; options: readonly string[] } | null = null;

/** Starts an invocation: its words, and nothing noted yet. */
export function setInvocation(argv: readonly string[]): void {
  invocation = argv;
  matched = null;
}

/** The words after `baton` of the invocation being parsed. */
export function invocationArgv(): readonly string[] {
  return invocation;
}

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/**
 * Middleware (before validation): notes the command's options, and refuses an option that takes
 * one value given more than once — yargs would pass the command an array it does not expect.
 */
export function noteOptions(argv: Arguments, y?: Argv): void {
  if (y == null) return;
  const options = (y as unknown as { getOptions(): DeclaredOptions }).getOptions();
  // Run at the root too when no command matched; every command has the common options (--config).
  if (!('config' in options.key)) return;
  matched = {
    command: String(argv._[0] ?? ''),
    options: [...new Set(Object.keys(options.key).map(kebab))],
  };
  const repeatable = new Set(options.array.map(kebab));
  for (const name of matched.options) {
    const value = argv[name];
    if (Array.isArray(value) && !repeatable.has(name)) {
      // Thrown here, yargs would not hand it to .fail(): a middleware's error escapes parse().
      exitUsage(
        `--${name} was given ${value.length} times; it takes one value ` +
          '(only the options whose --help says "repeat" may be repeated)',
        invocation,
      );
    }
  }
}

/** Whether the command line asks for JSON: errors are then JSON too. */
export function wantsJson(argv: readonly string[]): boolean {
  return argv.some((a) => a === '--json' || a === '--json=true');
}

/** yargs' failure message, in baton's words, with a did-you-mean where yargs gives none. */
export function usageMessage(message: string, argv: readonly string[]): string {
  const mistyped = /^Did you mean (.+)\?$/.exec(message);
  const first = argv.find((a) => !a.startsWith('-')) ?? '';
  if (mistyped) return `unknown command "${first}"; did you mean "${mistyped[1]}"?`;
  const choice = /^Invalid values:\s+Argument: (\S+), Given: (.+), Choices: (.+)$/s.exec(message);
  if (choice) {
    const [, name, given, choices] = choice;
    return `--${name} ${given}: expected one of ${choices!.replace(/"/g, '')}`;
  }
  const missing = /^Not enough arguments following: (\S+)$/.exec(message);
  if (missing) return `--${missing[1]} needs a value`;
  const unknown = /^Unknown arguments?: (.+)$/.exec(message);
  if (!unknown) return message;
  // No command matched: yargs lists the command word among the unknown arguments.
  if (matched == null) return `unknown command "${first}"`;
  const options = matched.options;
  return unknown[1]!
    .split(', ')
    .map((name) => {
      const asOption = argv.some((a) => a === `--${name}` || a.startsWith(`--${name}=`));
      // `-x`: yargs names a short option by its letter alone.
      const asShort =
        name.length === 1 && argv.some((a) => /^-[^-]/.test(a) && a.slice(1).includes(name));
      if (asShort) return `unknown option -${name}`;
      if (!asOption) return `unexpected argument "${name}"`;
      const meant = closest(name, options);
      return `unknown option --${name}` + (meant != null ? `; did you mean --${meant}?` : '');
    })
    .join('\n');
}

/** Reports a usage error (exit 64) as text with a pointer to --help, or as JSON; ends. */
function exitUsage(text: string, argv: readonly string[]): never {
  const json = wantsJson(argv);
  const help = `Run "baton ${matched != null ? `${matched.command} ` : ''}--help" for usage.`;
  const report = { exitCode: ExitCode.Usage, code: 'USAGE', message: text };
  throw new CliExit(writeError(json ? report : { ...report, message: `${text}\n${help}` }, json));
}

/**
 * A complaint of yargs' that reached the caller without going through `.fail`: a parse error (an
 * option with `nargs` and nothing after it) is thrown from an async command's validation. The
 * exit to end with (64, reported as the others), or null for any other error.
 */
export function yargsComplaint(err: unknown, argv: readonly string[]): CliExit | null {
  if (!(err instanceof Error) || err.name !== 'YError') return null;
  try {
    return exitUsage(usageMessage(err.message, argv), argv);
  } catch (exit) {
    return exit as CliExit;
  }
}

/**
 * The `.fail` handler of the root: yargs' own complaints are exit 64 with a pointer to the
 * command's --help; any other error is not a usage error and goes on to the caller.
 */
export function failUsage(argv: readonly string[]) {
  return (message: string | undefined, err: Error | undefined): never => {
    if (err != null && !(err instanceof UsageError)) throw err;
    return exitUsage(err?.message ?? usageMessage(message ?? 'bad usage', argv), argv);
  };
}
