/**
 * The one place where errors become exit codes and messages. Expected failures (BatonError) print
 * their message alone; anything else is a bug in baton and prints a short report (the stack only
 * with BATON_DEBUG=1). Either way no password is printed: messages are built from redacted URLs.
 */
import { BatonError, isDatabaseError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';

export function fail(err: unknown): number {
  if (err instanceof BatonError) {
    process.stderr.write(`baton: ${err.message}\n`);
    return err.exitCode;
  }
  const message = err instanceof Error ? err.message : String(err);
  if (isDatabaseError(err)) {
    // A driver error that escaped a command (the server went away mid-command, a missing grant).
    process.stderr.write(`baton: database error: ${message}\n`);
    return ExitCode.Unavailable;
  }
  process.stderr.write(`baton: internal error: ${message}\n`);
  if (process.env.BATON_DEBUG === '1' && err instanceof Error && err.stack) {
    process.stderr.write(`${err.stack}\n`);
  }
  return ExitCode.Software;
}

/**
 * Wraps a command body that returns its exit code. Sets `process.exitCode` rather than calling
 * `process.exit`, so pending output (and pino) can flush.
 */
export function action<A>(body: (args: A) => Promise<number> | number): (args: A) => Promise<void> {
  return async (args: A) => {
    try {
      process.exitCode = await body(args);
    } catch (err) {
      process.exitCode = fail(err);
    }
  };
}
