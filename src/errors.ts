/**
 * baton's error vocabulary: a few classes whose difference changes behaviour, each with a stable
 * `code` and the exit code the CLI maps it to (see `src/exit-codes.ts`). Causes are chained with
 * `{ cause }`; messages are written for operators and never contain a password.
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
 * mysql2 error codes (`err.code`) that mean "the connection or server is gone, try again later".
 * Everything else from the driver is a bug or a permission problem and is not retried.
 */
const RETRYABLE_DB_CODES = new Set([
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ER_CON_COUNT_ERROR',
  'ER_SERVER_SHUTDOWN',
  'ER_LOCK_DEADLOCK',
  'ER_LOCK_WAIT_TIMEOUT',
  'ER_CONNECTION_KILLED',
  'ER_QUERY_INTERRUPTED',
]);

/** Codes that mean the server is not reachable at all (as opposed to a query failing). */
const UNREACHABLE_DB_CODES = new Set([
  'ECONNREFUSED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ER_ACCESS_DENIED_ERROR',
  'ER_DBACCESS_DENIED_ERROR',
  'ER_BAD_DB_ERROR',
  'ER_CON_COUNT_ERROR',
  'PROTOCOL_CONNECTION_LOST',
  'ER_SERVER_SHUTDOWN',
]);

export function dbErrorCode(err: unknown): string | undefined {
  if (err && typeof err === 'object' && 'code' in err && typeof err.code === 'string') {
    return err.code;
  }
  return undefined;
}

export function isRetryableDbError(err: unknown): boolean {
  const code = dbErrorCode(err);
  return code != null && RETRYABLE_DB_CODES.has(code);
}

export function isUnreachableDbError(err: unknown): boolean {
  const code = dbErrorCode(err);
  return code != null && UNREACHABLE_DB_CODES.has(code);
}

/** A deadlock or a lock wait that timed out: the statement (or transaction) was rolled back. */
export function isLockConflictError(err: unknown): boolean {
  const code = dbErrorCode(err);
  return code === 'ER_LOCK_DEADLOCK' || code === 'ER_LOCK_WAIT_TIMEOUT';
}

export function isDuplicateKeyError(err: unknown): boolean {
  return dbErrorCode(err) === 'ER_DUP_ENTRY';
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
