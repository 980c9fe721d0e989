/**
 * `baton status` as a monitoring check: the kinds of finding, how much each weighs, and the state
 * and exit code a set of them makes (the Nagios/Icinga/Sensu convention: docs/runbook.md,
 * "Monitoring"). status.ts says what each finding means and when it is made.
 */
import { CheckExitCode, type CheckState } from '../exit-codes.js';

export const WARNING_KINDS = [
  'no-runner',
  'no-eligible-runner',
  'runner-gone',
  'detached',
  'clock-offset',
  'schedule-drift',
  'held',
  'switch-anomaly',
  'timing-switch',
  'no-success',
  'failing',
  'slow',
  'paused',
  'blackout',
  'notify-failing',
] as const;
export type WarningKind = (typeof WARNING_KINDS)[number];

export type Severity = 'critical' | 'warning' | 'info';

/**
 * How much a finding weighs: jobs not run at all are critical (no runner, or none that may run
 * the job; and a runner detached from the fleet: a split brain), a deliberate pause is not.
 */
export function severityOf(kind: WarningKind, { warnPaused = false } = {}): Severity {
  if (
    kind === 'no-runner' ||
    kind === 'no-eligible-runner' ||
    kind === 'no-success' ||
    kind === 'detached' ||
    kind === 'held'
  ) {
    return 'critical';
  }
  // A blackout is a pause of many jobs at once, and weighs as one.
  if (kind === 'paused' || kind === 'blackout') return warnPaused ? 'warning' : 'info';
  if (kind === 'timing-switch') return 'info';
  return 'warning';
}

/** The monitoring state of a set of findings: the worst severity among them. */
export function checkState(
  warnings: Warning[],
  options: { warnPaused?: boolean } = {},
): CheckState {
  const severities = new Set(warnings.map((w) => severityOf(w.kind, options)));
  if (severities.has('critical')) return 'CRITICAL';
  if (severities.has('warning')) return 'WARNING';
  return 'OK';
}

export const CHECK_EXIT_CODES: Record<CheckState, number> = {
  OK: CheckExitCode.Ok,
  WARNING: CheckExitCode.Warning,
  CRITICAL: CheckExitCode.Critical,
  UNKNOWN: CheckExitCode.Unknown,
};

export interface Warning {
  kind: WarningKind;
  message: string;
  job?: string;
  hosts?: string[];
}
