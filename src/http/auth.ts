/**
 * The HTTP endpoint's one credential: a shared token, checked on every request. Two ways to send
 * it, because its two kinds of client differ: Prometheus and scripts send
 * `Authorization: Bearer <token>`; a browser opening the dashboard gets the standard Basic
 * prompt (any user name, the token as password) and then sends it with every refresh by itself.
 * A token in the URL is deliberately not accepted: URLs end up in proxy logs and browser history.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export function tokenMatches(request: IncomingMessage, token: string): boolean {
  const given = presentedToken(request.headers.authorization);
  return given != null && sameSecret(given, token);
}

function presentedToken(header: string | undefined): string | null {
  if (!header) return null;
  const [scheme, value] = header.split(/\s+/, 2);
  if (!value) return null;
  switch (scheme?.toLowerCase()) {
    case 'bearer':
      return value;
    case 'basic': {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      return colon < 0 ? null : decoded.slice(colon + 1);
    }
    default:
      return null;
  }
}

/** Constant-time comparison; hashing first makes the lengths equal and hides the real one. */
function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(a), digest(b));
}
