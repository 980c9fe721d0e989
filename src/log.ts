/**
 * The daemon's logger: pino, JSON lines to stdout (for journald and log shippers), or readable
 * lines through pino-pretty when stdout is a terminal. Child loggers per run are bound to fixed
 * keys (job, runId, host) only — never to keys taken from user input.
 */
import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

export interface LogOptions {
  level?: string;
  /** Force readable output (default: when stdout is a TTY). */
  pretty?: boolean;
}

export function createLogger(options: LogOptions = {}): Logger {
  const level = options.level ?? process.env.BATON_LOG_LEVEL ?? 'info';
  const pretty = options.pretty ?? process.stdout.isTTY === true;
  return pino({
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    // Defence in depth: nothing logs connection options, but if it ever did, no password leaks.
    redact: { paths: ['password', '*.password', '*.*.password'], censor: '***' },
    ...(pretty
      ? { transport: { target: 'pino-pretty', options: { translateTime: 'SYS:standard' } } }
      : {}),
  });
}
