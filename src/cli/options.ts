/**
 * Options every command shares, and their precedence: flag > environment (BATON_*) > default.
 * Defaults are resolved here rather than given to yargs, so that `--help` never prints a value
 * taken from the environment (a database URL there may carry a password). Also the options and
 * parsers more than one command takes: durations, `--gone-after`, fire times and `--from`.
 *
 * What needs the schedules file parsed is in config-options.ts: this module is loaded by the
 * daemon too, which parses its file in a worker thread (config/load-isolated.ts) and never loads
 * the parser itself.
 */
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import ms from 'ms';
import path from 'node:path';
import type { Argv } from 'yargs';
import {
  DEFAULT_DATABASE_URL,
  parseDatabaseUrl,
  type DatabaseTarget,
} from '../config/database-url.js';
import { DURATION_HINT, parseDuration } from '../config/duration.js';
import type { Config } from '../config/schema.js';
import { parseRunnerTags } from '../config/placement.js';
import { errorMessage, UsageError } from '../errors.js';
import { checkHostName } from '../host-name.js';
import { keyProblem, subjectName } from '../schedule-keys.js';
import { closest } from '../text.js';

export const DEFAULT_CONFIG = './schedules.yaml';

export interface CommonArgs {
  config?: string;
  databaseUrl?: string;
  databaseUrlFile?: string;
  host?: string;
}

export function withCommonOptions<T>(y: Argv<T>): Argv<T & CommonArgs> {
  return y
    .option('config', {
      type: 'string',
      describe: `schedules file (env BATON_CONFIG; default ${DEFAULT_CONFIG})`,
    })
    .option('database-url', {
      type: 'string',
      describe: `mysql://user:password@host:port/database (env BATON_DATABASE_URL; default ${DEFAULT_DATABASE_URL})`,
    })
    .option('database-url-file', {
      type: 'string',
      describe:
        'a file holding the database URL, e.g. a systemd credential (env BATON_DATABASE_URL_FILE; ' +
        'default $CREDENTIALS_DIRECTORY/database-url when systemd passes credentials)',
    })
    .option('host', {
      type: 'string',
      describe: "this runner's name in history (env BATON_HOST; default the OS host name)",
    }) as Argv<T & CommonArgs>;
}

/**
 * An option that may be given more than once (`--status failed --status timeout`): its values
 * come as an array, one per use, and a row matches any of them. `nargs: 1` keeps the word after
 * it a positional (`--status failed tick`: the job tick). Any other option given twice is refused
 * (cli/usage.ts), not silently turned into an array a command does not expect.
 */
export const REPEATABLE = { type: 'string', array: true, nargs: 1 } as const;

/**
 * A free-text option (`--reason`): it takes the next word whatever it looks like, as getopt does,
 * so `--reason "--database-url=…"` is a reason, never an option that steers the command to
 * another database (program.ts turns on yargs' `nargs-eats-options` for options with `nargs`).
 */
export const FREE_TEXT = { type: 'string', nargs: 1 } as const;

/**
 * `--key K`: a schedule of the job created at run time (library mode's `scheduler.schedules`,
 * docs/library-mode.md), whose runs are the subject `<job>:<key>`'s. It takes the next word
 * whatever it looks like (`--key --all` is the key "--all", refused as a key), never an option.
 */
export const KEY_OPTION = {
  type: 'string',
  nargs: 1,
  describe: "a schedule created at run time: the job's key (library mode, scheduler.schedules)",
} as const;

/** The name the runs of `job` (of its schedule `key`, when given) carry; `--key` checked. */
export function subjectOf(job: string, key: string | undefined): string {
  if (key == null) return job;
  const problem = keyProblem(job, String(key));
  if (problem) throw new UsageError(`--key ${problem}`);
  return subjectName(job, String(key));
}

export function configPath(args: CommonArgs): string {
  return args.config ?? process.env.BATON_CONFIG ?? DEFAULT_CONFIG;
}

/**
 * The database URL, first found: `--database-url`, `--database-url-file`, BATON_DATABASE_URL,
 * BATON_DATABASE_URL_FILE, the systemd credential `database-url` (`LoadCredential=` puts it in
 * $CREDENTIALS_DIRECTORY, so the password need not be in the environment), the default.
 */
export function resolveDatabase(args: CommonArgs): DatabaseTarget {
  const env = process.env;
  if (args.databaseUrl != null) return parseDatabaseUrl(args.databaseUrl);
  if (args.databaseUrlFile != null) return urlFromFile(args.databaseUrlFile, '--database-url-file');
  if (env.BATON_DATABASE_URL != null) return parseDatabaseUrl(env.BATON_DATABASE_URL);
  if (env.BATON_DATABASE_URL_FILE != null)
    return urlFromFile(env.BATON_DATABASE_URL_FILE, 'BATON_DATABASE_URL_FILE');
  const credential =
    env.CREDENTIALS_DIRECTORY != null
      ? path.join(env.CREDENTIALS_DIRECTORY, DATABASE_URL_CREDENTIAL)
      : null;
  if (credential != null && existsSync(credential))
    return urlFromFile(credential, `the systemd credential ${DATABASE_URL_CREDENTIAL}`);
  return parseDatabaseUrl(DEFAULT_DATABASE_URL);
}

/** The name of the credential `LoadCredential=database-url:/etc/baton/database-url` gives. */
export const DATABASE_URL_CREDENTIAL = 'database-url';

/** The URL in `file` (one line; surrounding white space ignored), its contents never echoed. */
function urlFromFile(file: string, what: string): DatabaseTarget {
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT' ? 'file not found' : code === 'EACCES' ? 'permission denied' : code;
    throw new UsageError(`${what} ${file}: cannot read: ${why ?? 'unreadable'}`);
  }
  if (text === '') throw new UsageError(`${what} ${file} is empty`);
  return parseDatabaseUrl(text, `the URL in ${what} ${file}`);
}

/** Whether the database was named at all (by an option, the environment or a credential). */
export function databaseNamed(args: CommonArgs): boolean {
  const env = process.env;
  return (
    args.databaseUrl != null ||
    args.databaseUrlFile != null ||
    env.BATON_DATABASE_URL != null ||
    env.BATON_DATABASE_URL_FILE != null ||
    (env.CREDENTIALS_DIRECTORY != null &&
      existsSync(path.join(env.CREDENTIALS_DIRECTORY, DATABASE_URL_CREDENTIAL)))
  );
}

export function resolveHost(args: CommonArgs): string {
  if (args.host != null) return checkHostName(args.host, '--host');
  const env = process.env.BATON_HOST;
  if (env != null) return checkHostName(env, 'BATON_HOST');
  return checkHostName(os.hostname(), "the machine's host name (give --host)");
}

/**
 * The runner's tags: `--tag` (each use one tag), else BATON_TAGS (comma-separated), else none.
 * A word that is not a tag is refused (exit 64) naming where it came from.
 */
export function resolveTags(flags: readonly string[] | undefined): string[] {
  try {
    return flags != null && flags.length > 0
      ? parseRunnerTags(flags, '--tag')
      : parseRunnerTags((process.env.BATON_TAGS ?? '').split(','), 'BATON_TAGS', true);
  } catch (err) {
    throw new UsageError(errorMessage(err));
  }
}

export function findJob(config: Config, name: string) {
  const job = config.jobs.find((j) => j.name === name);
  if (!job) {
    const names = config.jobs.map((j) => j.name);
    throw new UsageError(
      `unknown job "${name}" in ${config.file}${didYouMean(name, names)} ` +
        `(jobs: ${names.join(', ') || '(none)'})`,
    );
  }
  return job;
}

/** `; did you mean "settle"?` when one of `names` is close to a mistyped `name`, else ''. */
export function didYouMean(name: string, names: Iterable<string>): string {
  const meant = closest(name, names);
  return meant != null ? `; did you mean "${meant}"?` : '';
}

/** A positive duration option (`15s`, `500ms`), or a usage error naming the option. */
export function durationOption(name: string, value: string): number {
  const ms = parseDuration(value);
  if (ms == null || ms <= 0) throw new UsageError(`--${name} "${value}": ${DURATION_HINT}`);
  return ms;
}

/**
 * `--since`: a duration back from now (`2h`, `30m`, `7d`) or an ISO-8601 time (`history`,
 * `audit`).
 */
export function parseSince(value: string, now = new Date()): Date {
  const relative = ms(value as ms.StringValue);
  if (typeof relative === 'number' && Number.isFinite(relative) && relative >= 0) {
    return new Date(now.getTime() - relative);
  }
  if (/^\d{4}-\d{2}-\d{2}/.test(value)) {
    const absolute = new Date(value);
    if (!Number.isNaN(absolute.getTime())) return absolute;
  }
  throw new UsageError(
    `--since "${value}": expected a duration such as 2h or 30m, or an ISO-8601 time`,
  );
}

/** A run id (`show`, `kill`): BIGINT UNSIGNED; anything else can only be a typo (64). */
export function parseRunId(value: unknown): number {
  const raw = String(value).trim();
  if (!/^[1-9]\d{0,19}$/.test(raw)) {
    throw new UsageError(`run id "${String(value)}": expected a positive whole number`);
  }
  const id = Number(raw);
  if (!Number.isSafeInteger(id)) throw new UsageError(`run id "${raw}": no such run`);
  return id;
}
