/**
 * baton's error vocabulary: a few classes whose difference changes behaviour, each with a stable
 * `code` and the exit code the CLI maps it to (see `src/exit-codes.ts`: sysexits, 64 usage, 69
 * unavailable, 78 config, …). Causes are chained with `{ cause }`; messages are written for
 * operators and never contain a password.
 *
 * `baton status` is the one command that does not exit with these codes: a monitoring check, it
 * exits 0–3 (CheckExitCode) and reports any of these errors as UNKNOWN (3), with the same message.
 */
import { ExitCode } from './exit-codes.js';

export class BatonError extends Error {
  readonly code: string;
  readonly exitCode: number;

  constructor(code: string, message: string, exitCode: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.exitCode = exitCode;
  }
}

/** One problem in schedules.yaml, located for a human: `file:line: jobs.settle.schedule: ...`. */
export interface ConfigProblem {
  file: string;
  line?: number;
  column?: number;
  /** Dotted path inside the document, e.g. `jobs.settle.schedule`. Empty for the whole file. */
  path: string;
  message: string;
}

export function formatProblem(p: ConfigProblem): string {
  const where =
    p.line != null ? `${p.file}:${p.line}${p.column != null ? `:${p.column}` : ''}` : p.file;
  return p.path ? `${where}: ${p.path}: ${p.message}` : `${where}: ${p.message}`;
}

/** An invalid schedules.yaml. Carries every problem found, not just the first. Exit 78. */
export class ConfigError extends BatonError {
  readonly problems: readonly ConfigProblem[];

  constructor(problems: readonly ConfigProblem[]) {
    const n = problems.length;
    super(
      'CONFIG_INVALID',
      `invalid configuration (${n} problem${n === 1 ? '' : 's'}):\n` +
        problems.map((p) => `  ${formatProblem(p)}`).join('\n'),
      ExitCode.Config,
    );
    this.problems = problems;
  }
}

/** Bad command-line usage or an unknown job name. Exit 64. */
export class UsageError extends BatonError {
  constructor(message: string) {
    super('USAGE', message, ExitCode.Usage);
  }
}

/**
 * The database cannot be used for coordination: unreachable, access denied, or a schema this code
 * cannot trust. Exit 69. The message names the server without its password.
 */
export class DatabaseUnavailableError extends BatonError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('DATABASE_UNAVAILABLE', message, ExitCode.Unavailable, options);
  }
}

/** Another run of the job holds its lock (`baton run` after `--wait`). Exit 75. */
export class LockHeldError extends BatonError {
  constructor(message: string) {
    super('LOCK_HELD', message, ExitCode.TempFail);
  }
}

/** The user stopped a command (Ctrl-C, SIGTERM) before it could do its work. Exit 130. */
export class InterruptedError extends BatonError {
  constructor(message: string) {
    super('INTERRUPTED', message, ExitCode.Interrupted);
  }
}

/** A job's run failed; the CLI exits with the job's own exit code (1 when it has none). */
export class JobFailedError extends BatonError {
  constructor(message: string, jobExitCode: number | null) {
    super('JOB_FAILED', message, jobExitCode != null && jobExitCode > 0 ? jobExitCode : 1);
  }
}

/**
 * What a database error means to baton. Every mysql2 code baton treats specially is in
 * DB_ERROR_CATEGORIES below, once; what each caller asks is a set of categories:
 *
 * | category         | what                                     | retry | unreachable | schema | wait |
 * |------------------|------------------------------------------|-------|-------------|--------|------|
 * | `unreachable`    | refused, timed out, no route, too many   |   ✓   |      ✓      |        |  ✓   |
 * |                  | connections, shutting down, conn. lost   |       |             |        |      |
 * | `unknown-host`   | ENOTFOUND                                |   ✓   |      ✓      |        |      |
 * | `connection-cut` | reset, broken pipe, protocol timeout,    |   ✓   |             |        |  ✓   |
 * |                  | connection or query killed               |       |             |        |      |
 * | `lock-conflict`  | deadlock, lock wait timeout (rolled back)|   ✓   |             |        |  ✓   |
 * | `access-denied`  | wrong password, no grant on the database |       |      ✓      |        |      |
 * | `no-database`    | ER_BAD_DB_ERROR                          |       |      ✓      |   ✓    |      |
 * | `no-table`       | ER_NO_SUCH_TABLE                         |       |             |   ✓    |      |
 * | `deadline`       | STATEMENT_TIMEOUT, baton's own deadline  |       |             |        | (✓)  |
 * | `server`         | any other `ER_*`: the server refused it  |       |             |        |      |
 *
 * Retry (`isRetryableDbError`): the connection or server is gone, try the statement again later.
 * Unreachable (`isUnreachableDbError`): the server cannot be used at all, as opposed to one query
 * failing. Schema (`isMissingSchemaError`): a database nobody has started baton on yet, or an older
 * schema. Wait (`isTransientDbError`): worth waiting out at start-up — a wrong password, a missing
 * database or an unknown host name will not fix themselves; a deadline counts only as the error
 * itself, not as another's cause.
 */
export type DbErrorCategory =
  | 'unreachable'
  | 'unknown-host'
  | 'connection-cut'
  | 'lock-conflict'
  | 'access-denied'
  | 'no-database'
  | 'no-table'
  | 'deadline'
  | 'server';

const DB_ERROR_CATEGORIES: ReadonlyMap<string, DbErrorCategory> = new Map([
  ['ECONNREFUSED', 'unreachable'],
  ['ETIMEDOUT', 'unreachable'],
  ['EHOSTUNREACH', 'unreachable'],
  ['ENETUNREACH', 'unreachable'],
  ['EAI_AGAIN', 'unreachable'],
  ['ER_CON_COUNT_ERROR', 'unreachable'],
  ['ER_SERVER_SHUTDOWN', 'unreachable'],
  ['PROTOCOL_CONNECTION_LOST', 'unreachable'],
  ['ENOTFOUND', 'unknown-host'],
  ['ECONNRESET', 'connection-cut'],
  ['EPIPE', 'connection-cut'],
  ['PROTOCOL_SEQUENCE_TIMEOUT', 'connection-cut'],
  ['ER_CONNECTION_KILLED', 'connection-cut'],
  ['ER_QUERY_INTERRUPTED', 'connection-cut'],
  ['ER_LOCK_DEADLOCK', 'lock-conflict'],
  ['ER_LOCK_WAIT_TIMEOUT', 'lock-conflict'],
  ['ER_ACCESS_DENIED_ERROR', 'access-denied'],
  ['ER_DBACCESS_DENIED_ERROR', 'access-denied'],
  ['ER_BAD_DB_ERROR', 'no-database'],
  ['ER_NO_SUCH_TABLE', 'no-table'],
  ['STATEMENT_TIMEOUT', 'deadline'],
]);

const RETRYABLE: ReadonlySet<DbErrorCategory> = new Set([
  'unreachable',
  'unknown-host',
  'connection-cut',
  'lock-conflict',
]);
const UNREACHABLE: ReadonlySet<DbErrorCategory> = new Set([
  'unreachable',
  'unknown-host',
  'access-denied',
  'no-database',
]);
const MISSING_SCHEMA: ReadonlySet<DbErrorCategory> = new Set(['no-database', 'no-table']);
const TRANSIENT: ReadonlySet<DbErrorCategory> = new Set([
  'unreachable',
  'connection-cut',
  'lock-conflict',
]);

export function dbErrorCode(err: unknown): string | undefined {
  if (err && typeof err === 'object' && 'code' in err && typeof err.code === 'string') {
    return err.code;
  }
  return undefined;
}

/** The category of `err`'s own code (not its cause's); undefined for anything else. */
export function dbErrorCategory(err: unknown): DbErrorCategory | undefined {
  const code = dbErrorCode(err);
  if (code == null) return undefined;
  return DB_ERROR_CATEGORIES.get(code) ?? (code.startsWith('ER_') ? 'server' : undefined);
}

const inCategories = (err: unknown, set: ReadonlySet<DbErrorCategory>): boolean => {
  const category = dbErrorCategory(err);
  return category != null && set.has(category);
};

/** The connection or server is gone: the statement may be tried again later. */
export function isRetryableDbError(err: unknown): boolean {
  return inCategories(err, RETRYABLE);
}

/** The server cannot be used at all (down, unknown, access denied, no database). */
export function isUnreachableDbError(err: unknown): boolean {
  return inCategories(err, UNREACHABLE);
}

/**
 * An error of the driver or the server, classified above: what the CLI reports as a database error
 * (exit 69) rather than as a bug in baton. Not baton's own statement deadline, which has always
 * been reported as an internal error when it escapes a command.
 */
export function isDatabaseError(err: unknown): boolean {
  const category = dbErrorCategory(err);
  return category != null && category !== 'deadline';
}

/**
 * True for the errors of a database nobody has started baton on yet (or an older schema): no
 * database, or no table. Looks at the error and its `cause`: openConnection wraps the driver's
 * error (its own `code` is DATABASE_UNAVAILABLE).
 */
export function isMissingSchemaError(err: unknown): boolean {
  return [err, (err as Error | undefined)?.cause].some((e) => inCategories(e, MISSING_SCHEMA));
}

/**
 * Errors worth waiting out at start-up: the server is down or unreachable, not misconfigured. A
 * statement deadline counts; otherwise the first of the error and its `cause` that is retryable
 * or unreachable decides, and it is transient unless it is a wrong password, a missing database
 * or an unknown host name, which will not fix themselves.
 */
export function isTransientDbError(err: unknown): boolean {
  if (err instanceof Error && dbErrorCategory(err) === 'deadline') return true;
  const cause = err instanceof Error ? err.cause : undefined;
  for (const e of [err, cause]) {
    if (inCategories(e, RETRYABLE) || inCategories(e, UNREACHABLE)) {
      return inCategories(e, TRANSIENT);
    }
  }
  return false;
}

/** A deadlock or a lock wait that timed out: the statement (or transaction) was rolled back. */
export function isLockConflictError(err: unknown): boolean {
  return dbErrorCategory(err) === 'lock-conflict';
}

export function isDuplicateKeyError(err: unknown): boolean {
  return dbErrorCode(err) === 'ER_DUP_ENTRY';
}

/** `err` as an Error (a rejection may be anything), for a place that must hold one. */
export function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/**
 * A read that may meet a schema not there yet (a database nobody started baton on, or one from
 * before a migration): `empty` when `missing(err)`, the error otherwise.
 */
export async function orEmpty<T>(
  read: Promise<T>,
  empty: T,
  missing: (err: unknown) => boolean = isMissingSchemaError,
): Promise<T> {
  try {
    return await read;
  } catch (err) {
    if (missing(err)) return empty;
    throw err;
  }
}
