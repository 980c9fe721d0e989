/**
 * What must not be shown of a notification target: its URL's secrets (a Slack or Teams hook's
 * path is its token; tokens travel in queries too), an SMTP URL's password (and the base64 forms
 * SMTP's AUTH sends it in) and the values of headers that carry credentials. One list, for two
 * uses that draw the line in different places:
 *
 * - `errors`: a delivery's error message (notify/secrets.ts `redact`): short text that baton
 *   builds, where nothing of a target needs to show (the target's name says which one it was), so
 *   everything that could be a secret is hidden: the URL's path and query whatever their length,
 *   the user name, every header value.
 * - `output`: a job's kept output (execution/secret-mask.ts), where the same words are a job's
 *   own data: jobs no longer inherit the variables that hold the targets' URLs
 *   (connections.ts: withheldVariables), but a job can still print a URL or a password it got some
 *   other way (its own `env:`, a file, a literal), and then the token would be kept in
 *   `baton_run_output`, `output_tail`, the dashboard and every notification that carries the
 *   output. What is masked there is what is a secret by itself: the URL whole, a path of
 *   TOKEN_MIN_LENGTH or more (with its query), a query, a password, a header value that is
 *   credential-like by its header's name or by its length (never `Content-Type` and the like).
 *   Not the host, the user name, a short path (`/hook`, `/alerts`) or a header like `X-Env:
 *   prod`: masking them would blank common words all over every job's output.
 */
import type { NotifyTarget, SecretSource } from './notify-schema.js';

/** Where a target's secrets must not show (see the header). */
export type SecretUse = 'output' | 'errors';

/** A path or header value this long is a token by its length alone (a Slack hook's path: 44+). */
const TOKEN_MIN_LENGTH = 16;
/** Header names whose values are credentials whatever their length. */
const CREDENTIAL_HEADER = /auth|token|key|secret|sign|cookie|pass|session/i;
/** Headers whose values are descriptions, never credentials, however long. */
const PLAIN_HEADERS: ReadonlySet<string> = new Set([
  'accept',
  'accept-charset',
  'accept-encoding',
  'accept-language',
  'cache-control',
  'content-language',
  'content-type',
  'user-agent',
]);

/** The URL written in the file, or the value of its `urlFromEnv`/`smtpFromEnv` variable now. */
export function resolvedSource(
  source: SecretSource,
  env: (name: string) => string | undefined,
): string | undefined {
  return source.kind === 'url' ? source.url : env(source.variable) || undefined;
}

/** What `use` may not show of `target` (see the header). */
export function targetSecrets(
  target: NotifyTarget,
  env: (name: string) => string | undefined,
  use: SecretUse,
): string[] {
  switch (target.kind) {
    case 'webhook': {
      const raw = resolvedSource(target.url, env);
      return [...(raw ? urlSecrets(raw, use) : []), ...headerSecrets(target.headers, use)];
    }
    case 'email': {
      const raw = resolvedSource(target.smtp, env);
      return raw ? smtpSecrets(raw, use) : [];
    }
    default:
      return [];
  }
}

/** The secrets of every target, for `use`. */
export function allTargetSecrets(
  targets: Readonly<Record<string, NotifyTarget>>,
  env: (name: string) => string | undefined,
  use: SecretUse,
): string[] {
  return Object.values(targets).flatMap((t) => targetSecrets(t, env, use));
}

/** The header values that are credentials (all of them for `errors`), and their credentials. */
export function headerSecrets(headers: Readonly<Record<string, string>>, use: SecretUse): string[] {
  const secrets: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    const credential =
      CREDENTIAL_HEADER.test(name) ||
      (!PLAIN_HEADERS.has(name.toLowerCase()) && value.trim().length >= TOKEN_MIN_LENGTH);
    if (use === 'output' && !credential) continue;
    secrets.push(value);
    // `Bearer <token>`, `Basic <base64>`: the credentials alone are the secret too.
    const credentials = /^\S+\s+(\S.*)$/.exec(value.trim())?.[1];
    if (credentials) secrets.push(credentials);
  }
  return secrets;
}

/** An SMTP URL's secrets, plus the forms AUTH PLAIN and AUTH LOGIN send its password in. */
export function smtpSecrets(raw: string, use: SecretUse): string[] {
  const secrets = urlSecrets(raw, use);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return secrets;
  }
  const password = safeDecode(url.password);
  if (password) {
    const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
    secrets.push(b64(password), b64(`\0${safeDecode(url.username)}\0${password}`));
  }
  return secrets;
}

/** What `use` may not show of a URL (see the header); a text that is no URL: itself, whole. */
export function urlSecrets(raw: string, use: SecretUse): string[] {
  const secrets = [raw];
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return secrets;
  }
  secrets.push(url.href, url.search);
  const path = url.pathname;
  if (use === 'errors' || path.length >= TOKEN_MIN_LENGTH) secrets.push(path + url.search);
  if (use === 'errors') secrets.push(path, url.username, safeDecode(url.username));
  secrets.push(url.password, safeDecode(url.password));
  return secrets.filter((s) => s !== '/' && s !== '');
}

/** `s` percent-decoded, or as it is when it is not valid percent-encoding. */
export function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
