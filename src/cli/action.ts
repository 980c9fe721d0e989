/**
 * The one place where errors become exit codes and messages. Expected failures (BatonError) print
 * their message alone; anything else is a bug in baton and prints a short report (the stack only
 * with BATON_DEBUG=1). Either way no password is printed: messages are built from redacted URLs.
 *
 * With `--json` the error is one JSON document on stderr instead, with the same exit code:
 * `{"error": {"exitCode": 64, "code": "USAGE", "message": "…"}}` (`problems` too for an invalid
 * schedules file), so a script reading stdout never has to parse prose.
 */
import { BatonError, ConfigError, isDatabaseError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';

/** What an error says, for people or for `--json`. `code` is BatonError's stable code. */
export interface ErrorReport {
  exitCode: number;
  code: string;
  message: string;
  problems?: ConfigError['problems'];
}

export function errorReport(err: unknown): ErrorReport {
  if (err instanceof BatonError) {
    const report: ErrorReport = { exitCode: err.exitCode, code: err.code, message: err.message };
    if (err instanceof ConfigError) report.problems = err.problems;
    return report;
  }
  const message = err instanceof Error ? err.message : String(err);
  if (isDatabaseError(err)) {
    // A driver error that escaped a command (the server went away mid-command, a missing grant).
    return { exitCode: ExitCode.Unavailable, code: 'DATABASE_ERROR', message };
  }
  return { exitCode: ExitCode.Software, code: 'INTERNAL', message };
}

/** Writes `report` to stderr, as text or as JSON; its exit code. */
export function writeError(report: ErrorReport, json: boolean): number {
  if (json) {
    process.stderr.write(`${JSON.stringify({ error: report })}\n`);
    return report.exitCode;
  }
  const prefix =
    report.code === 'DATABASE_ERROR'
      ? 'database error: '
      : report.code === 'INTERNAL'
        ? 'internal error: '
        : '';
  process.stderr.write(`baton: ${prefix}${report.message}\n`);
  return report.exitCode;
}

export function fail(err: unknown, json = false): number {
  const code = writeError(errorReport(err), json);
  if (
    code === ExitCode.Software &&
    process.env.BATON_DEBUG === '1' &&
    err instanceof Error &&
    err.stack
  ) {
    process.stderr.write(`${err.stack}\n`);
  }
  return code;
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
      process.exitCode = fail(err, (args as { json?: unknown }).json === true);
    }
  };
}
