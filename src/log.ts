/**
 * The daemon's logger: pino, JSON lines to stdout (for journald and log shippers), or readable
 * lines through pino-pretty when stdout is a terminal. Child loggers per run are bound to fixed
 * keys (job, runId, host) only — never to keys taken from user input.
 *
 * Under systemd, stdout is a stream to journald, which gives every line the unit's default
 * priority (6, info) unless the line starts with a syslog level prefix (`<4>`, sd-daemon(3)). So
 * when stdout is the journal's stream, each line carries its level as that prefix, and
 * `journalctl -u baton -p warning` shows the warnings. journald takes the prefix off
 * (`SyslogLevelPrefix=` is on by default); the rest of the line is the same JSON.
 */
import { fstatSync } from 'node:fs';
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
  const journal = !pretty && stdoutIsJournal(process.env.JOURNAL_STREAM);
  return pino({
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    // Defence in depth: nothing logs connection options, but if it ever did, no password leaks.
    redact: { paths: ['password', '*.password', '*.*.password'], censor: '***' },
    ...(journal ? { hooks: { streamWrite: withSyslogPrefix } } : {}),
    ...(pretty
      ? { transport: { target: 'pino-pretty', options: { translateTime: 'SYS:standard' } } }
      : {}),
  });
}

/**
 * Whether fd 1 is the stream systemd connected to journald. systemd sets JOURNAL_STREAM to that
 * stream's `device:inode`; a process whose stdout was redirected elsewhere (a job started by
 * the unit, `baton … > file`) inherits the variable but not the stream, so both must match.
 */
export function stdoutIsJournal(journalStream: string | undefined): boolean {
  const m = /^(\d+):(\d+)$/.exec(journalStream ?? '');
  if (!m) return false;
  try {
    const stat = fstatSync(1, { bigint: true });
    return stat.dev === BigInt(m[1]!) && stat.ino === BigInt(m[2]!);
  } catch {
    return false;
  }
}

/** pino's numeric level → syslog's (fatal 2 crit, error 3, warn 4, info 6, debug/trace 7). */
function syslogLevel(pinoLevel: number): number {
  if (pinoLevel >= 60) return 2;
  if (pinoLevel >= 50) return 3;
  if (pinoLevel >= 40) return 4;
  if (pinoLevel >= 30) return 6;
  return 7;
}

/** One serialised line (pino writes `{"level":N,` first) with its `<N>` prefix. */
export function withSyslogPrefix(line: string): string {
  const m = /^\{"level":(\d+)/.exec(line);
  return m ? `<${syslogLevel(Number(m[1]))}>${line}` : line;
}
