/**
 * The exit codes of every baton command, in one place. They follow sysexits.h so that systemd,
 * cron wrappers and monitoring can tell "fix the config" from "the database is down" from "busy".
 * Documented in README.md ("Exit codes"); changing one is a breaking change.
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

export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];
