/**
 * `mysql://user:password@host:port/database` → connection options, and the same URL with its
 * password masked for every message a human may read. The raw URL never leaves this module in
 * a log, an error or the history.
 */
import type { ConnectionOptions } from 'mysql2';
import { UsageError } from '../errors.js';

export const DEFAULT_DATABASE_URL = 'mysql://root@127.0.0.1:3306/baton';

export interface DatabaseTarget {
  /** Options for mysql2, without `database` (see `database`). */
  connection: ConnectionOptions;
  database: string;
  /** The URL with the password replaced by `***`: safe to log. */
  display: string;
}

/** Database names are limited so they can be quoted as identifiers without surprises. */
const DATABASE_NAME = /^[A-Za-z0-9_$-]{1,64}$/;

/** `what` names the URL in messages: the option by default, or e.g. `the URL of connection shop`. */
export function parseDatabaseUrl(url: string, what = '--database-url'): DatabaseTarget {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // Do not echo the input: it may well contain a password.
    throw new UsageError(
      `${what} is not a valid URL (expected mysql://user:password@host:port/database)`,
    );
  }
  if (parsed.hash) {
    // `#` starts a URL fragment: a password containing it would be cut in two, and its second
    // half would be printed as if it were not a secret. Say so without echoing anything.
    throw new UsageError(
      `${what} contains '#': percent-encode special characters of the password (# is %23)`,
    );
  }
  for (const key of parsed.searchParams.keys()) {
    if (key !== 'socket') {
      throw new UsageError(
        `${what}: unknown parameter "${key}" (only ?socket=/path is understood; ` +
          'put the password before the @)',
      );
    }
  }
  const display = redactUrl(parsed);
  if (parsed.protocol !== 'mysql:' && parsed.protocol !== 'mariadb:') {
    throw new UsageError(`${what} must start with mysql:// (got ${display})`);
  }
  const decode = (part: string, which: string): string => {
    try {
      return decodeURIComponent(part);
    } catch {
      // A '%' not followed by two hex digits (a password typed as is): the driver's URIError
      // would be reported as a bug in baton, and echoing the part would print the password.
      throw new UsageError(
        `${what}: the ${which} contains a '%' that is not a percent-encoded character: ` +
          'percent-encode special characters of the password (% is %25)',
      );
    }
  };
  const database = decode(parsed.pathname.replace(/^\//, ''), 'database name');
  if (!DATABASE_NAME.test(database)) {
    throw new UsageError(
      `${what} must name a database made of letters, digits, '_', '$' or '-' (got ${display})`,
    );
  }
  const socketPath = parsed.searchParams.get('socket');
  const connection: ConnectionOptions = {
    user: decode(parsed.username, 'user name') || 'root',
    password: decode(parsed.password, 'password'),
    ...(socketPath
      ? { socketPath }
      : { host: parsed.hostname || '127.0.0.1', port: Number(parsed.port || 3306) }),
  };
  return { connection, database, display };
}

export function redactUrl(url: string | URL): string {
  let parsed: URL;
  try {
    parsed = new URL(String(url));
  } catch {
    return '<invalid database URL>';
  }
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}
