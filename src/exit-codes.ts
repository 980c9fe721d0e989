/**
 * The exit codes of every baton command, in one place. They follow sysexits.h so that systemd,
 * cron wrappers and monitoring can tell "fix the config" from "the database is down" from "busy".
 * Documented in docs/cli.md ("Exit codes"); changing one is a breaking change. `baton status` uses
 * CheckExitCode below instead.
 */
export const ExitCode = {
  /** Success: the command did what was asked (for `run`: the job succeeded). */
  Ok: 0,
  /** Generic failure, and a failed job that has no exit code of its own (killed by a signal). */
  Failure: 1,
  /** EX_USAGE: bad command line, unknown job name. */
  Usage: 64,
  /** EX_UNAVAILABLE: the database cannot be reached or cannot be trusted for coordination. */
  Unavailable: 69,
  /** EX_SOFTWARE: a bug in baton (an unexpected error); the message asks for a report. */
  Software: 70,
  /** EX_TEMPFAIL: `baton run` found the job running elsewhere (after `--wait`); try again later. */
  TempFail: 75,
  /** EX_CONFIG: schedules.yaml is invalid; nothing was started. */
  Config: 78,
  /** 128 + SIGINT, the shell's convention: `baton run` was interrupted while waiting for the lock. */
  Interrupted: 130,
} as const;

/**
 * `baton status` alone: the convention monitoring systems read from a check (Nagios plugins,
 * Icinga, Sensu, Zabbix's and Datadog's check wrappers). Any failure to reach a verdict — the
 * database cannot be read, a bad option, an invalid schedules file — is UNKNOWN, not the
 * sysexits code above: a check that exits 64 or 69 is read differently by each system.
 * Documented in docs/runbook.md ("Monitoring") and `baton status --help`.
 */
export const CheckExitCode = {
  /** Nothing to act on (a deliberate pause is only informational). */
  Ok: 0,
  /** Something to look at soon: recent failures, drift, a gone runner, a clock offset, … */
  Warning: 1,
  /** Jobs are not being run: no live runner, or a job past its `expect` window. */
  Critical: 2,
  /** No verdict: the state could not be read (database unreachable, bad usage, bad config). */
  Unknown: 3,
} as const;

export type CheckState = 'OK' | 'WARNING' | 'CRITICAL' | 'UNKNOWN';
