/**
 * Who is acting: the name the audit (`baton_audit.operator`), `pause` and the run rows record for
 * an operator's action from the CLI. Under sudo it is the person who ran sudo (`SUDO_USER`), not
 * `root`: the audit is there to say whom to ask. Actions through the write API are recorded with
 * the API token's name instead (http/auth.ts).
 */
import os from 'node:os';
import { UsageError } from './errors.js';
import { characterCount } from './text.js';

/** Why an action was taken: `baton_audit.reason`, `baton_pauses.reason` and a kill's are VARCHAR(512). */
export const REASON_MAX = 512;

/**
 * An operator's `--reason`, trimmed (empty: none). Longer than REASON_MAX is refused before
 * anything is written, never cut: the audit keeps what was said, or nothing is done.
 */
export function checkedReason(value: unknown): string | null {
  const reason = value != null ? String(value).trim() || null : null;
  const length = reason == null ? 0 : characterCount(reason);
  if (length > REASON_MAX) {
    throw new UsageError(
      `--reason is ${length} characters long, more than ${REASON_MAX}: say it shorter`,
    );
  }
  if (reason != null && hasControlCharacter(reason)) {
    throw new UsageError(
      '--reason contains a control character (a newline, an escape…): say it on one line',
    );
  }
  return reason;
}

/**
 * Whether a reason holds a control character (tab aside), a Unicode line break or a bidi
 * control: refused wherever a reason comes in, as `status`, `audit` and the dashboard print
 * reasons to other operators' terminals and pages, where a newline breaks a table, an escape
 * sequence rewrites the screen and U+202E shows the text reversed.
 */
export function hasControlCharacter(text: string): boolean {
  // C0 and C1 controls but tab; the line and paragraph separators; the bidi embeddings,
  // overrides and isolates.
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/.test(
    text,
  );
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
