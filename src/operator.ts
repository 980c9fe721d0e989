/**
 * Who is acting: the name the audit (`baton_audit.operator`), `pause` and the run rows record for
 * an operator's action from the CLI. Under sudo it is the person who ran sudo (`SUDO_USER`), not
 * `root`: the audit is there to say whom to ask. Actions through the write API are recorded with
 * the API token's name instead (http/auth.ts).
 */
import os from 'node:os';

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
