/**
 * A runner's host name (`--host`, BATON_HOST, library mode's `host`, else the machine's): one
 * limit wherever it comes from. Every column that holds a host, or a name made from one, is
 * VARCHAR(255); a longer name would fail every write that carries it, not at start but at the
 * first fire or notification.
 */
import { UsageError } from './errors.js';

export const HOST_MAX_CHARS = 255;

/** `host`, checked; `where` names its source for the message (`--host`, `BATON_HOST`, …). */
export function checkHostName(host: string, where: string): string {
  if (host.length === 0 || host.length > HOST_MAX_CHARS) {
    throw new UsageError(
      `${where} must be 1 to ${HOST_MAX_CHARS} characters (got ${host.length}): it names ` +
        'this runner in the history, the registry and the notification outbox',
    );
  }
  return host;
}

/**
 * A name made of the host and `suffix` that fits a host-wide column: the host is cut so that the
 * suffix (which carries what must stay unique, such as a pid and a random token) is kept whole.
 */
export function hostWith(host: string, suffix: string): string {
  return `${host.slice(0, Math.max(0, HOST_MAX_CHARS - suffix.length))}${suffix}`;
}
