/**
 * Who is acting: the name the audit (`baton_audit.operator`), `pause` and the run rows record for
 * an operator's action from the CLI. Under sudo it is the person who ran sudo (`SUDO_USER`), not
 * `root`: the audit is there to say whom to ask. Actions through the write API are recorded with
 * the API token's name instead (http/auth.ts).
 */
import os from 'node:os';
import { UsageError } from './errors.js';

/** Why an action was taken: `baton_audit.reason`, `baton_pauses.reason` and a kill's are VARCHAR(512). */
export const REASON_MAX = 512;

/**
 * An operator's `--reason`, trimmed (empty: none). Longer than REASON_MAX is refused before
 * anything is written, never cut: the audit keeps what was said, or nothing is done.
 */
export function checkedReason(value: unknown): string | null {
  const reason = value != null ? String(value).trim() || null : null;
  if (reason != null && reason.length > REASON_MAX) {
    throw new UsageError(
      `--reason is ${reason.length} characters long, more than ${REASON_MAX}: say it shorter`,
    );
  }
  return reason;
}

/** The operator's name, as the audit records it. */
export function operatorName(env: NodeJS.ProcessEnv = process.env): string {
  const sudoUser = env.SUDO_USER?.trim();
  if (sudoUser) return sudoUser.slice(0, 255);
  try {
    const name = os.userInfo().username;
    if (name) return name.slice(0, 255);
  } catch {
    // No passwd entry for this uid (a container's arbitrary user): fall back to the environment.
  }
  const fromEnv = (env.USER ?? env.LOGNAME ?? '').trim();
  return fromEnv ? fromEnv.slice(0, 255) : `uid ${process.getuid?.() ?? '?'}`;
}

/**
 * Who the audit names for an action, and how it came: the operator of this shell (`cli`), or —
 * for a command a runner starts on behalf of its write API (`baton backfill` through
 * `POST /api/jobs/{job}/backfill`) — the API token's name, passed down as `BATON_AUDIT_TOKEN`.
 * (A local user could set it too, as `SUDO_USER`: the audit says who asked, it does not
 * authenticate; the write API does.)
 */
export function actingOperator(env: NodeJS.ProcessEnv = process.env): {
  operator: string;
  via: 'cli' | 'api';
} {
  const token = env.BATON_AUDIT_TOKEN?.trim();
  if (token) return { operator: token.slice(0, 255), via: 'api' };
  return { operator: operatorName(env), via: 'cli' };
}

/**
 * The reason passed down with `BATON_AUDIT_TOKEN`: the write API's body's `reason`, free text
 * that goes by the environment because on a command line the parser could take it for an option
 * (`"--database-url=…"`) or strip its quotes. Null when none was given, and outside a command the
 * write API started (no token): a stray variable in an operator's shell is not their reason.
 */
export function passedReason(env: NodeJS.ProcessEnv = process.env): string | null {
  if (!env.BATON_AUDIT_TOKEN?.trim()) return null;
  return env.BATON_AUDIT_REASON?.trim() || null;
}
