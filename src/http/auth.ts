/**
 * The HTTP endpoint's one credential: a shared token, checked on every request. Two ways to send
 * it, because its two kinds of client differ: Prometheus and scripts send
 * `Authorization: Bearer <token>`; a browser opening the dashboard gets the standard Basic
 * prompt (any user name, the token as password) and then sends it with every refresh by itself.
 * A token in the URL is deliberately not accepted: URLs end up in proxy logs and browser history.
 *
 * The write API (write-api.ts) takes its named tokens (write-tokens.ts) as Bearer only: a browser
 * resends Basic credentials by itself, also on a form another site posts to this one (CSRF).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export function tokenMatches(request: IncomingMessage, token: string): boolean {
  const given = presentedCredential(request.headers.authorization);
  return given != null && sameSecret(given.secret, token);
}

/** A secret the request presents, and how: a Bearer token or a Basic password. */
export interface Credential {
  scheme: 'bearer' | 'basic';
  secret: string;
}

export function presentedCredential(header: string | undefined): Credential | null {
  if (!header) return null;
  const [scheme, value] = header.split(/\s+/, 2);
  if (!value) return null;
  switch (scheme?.toLowerCase()) {
    case 'bearer':
      return { scheme: 'bearer', secret: value };
    case 'basic': {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      return colon < 0 ? null : { scheme: 'basic', secret: decoded.slice(colon + 1) };
    }
    default:
      return null;
  }
}

/** The named token `secret` is, if any (every one compared, in constant time each). */
export function namedToken<T extends { token: string }>(
  secret: string,
  tokens: readonly T[],
): T | null {
  let found: T | null = null;
  for (const t of tokens) if (sameSecret(secret, t.token)) found = t;
  return found;
}

/** Constant-time comparison; hashing first makes the lengths equal and hides the real one. */
export function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(a), digest(b));
}
