/**
 * What a job's kept output must not show of the notification targets (execution/secret-mask.ts
 * masks it): jobs no longer inherit the variables that hold the targets' URLs
 * (connections.ts: withheldVariables), but a job can still print a URL or a password it got
 * some other way (its own `env:`, a file, a literal), and then the webhook's token or the SMTP
 * password would be kept in `baton_run_output`, `output_tail`, the dashboard and every
 * notification that carries the output.
 *
 * Masked: each target URL whole (as written and as parsed back), its password (as written and
 * percent-decoded, and the base64 forms SMTP's AUTH sends), its path with its query (a Slack or
 * Teams hook's path is its token) and its query (tokens travel as `?token=`), and the value of
 * every header that may carry a credential, with the credentials of an `Authorization`-style
 * value (`Bearer <token>`) on their own too. Not masked: the host, the user name and a bare path
 * segment or query value — none is a secret by itself, and masking them would blank common words
 * (`alerts`, `json`, `hooks`) all over every job's output. The error messages of a delivery are
 * redacted more widely (notify/secrets.ts): they are short and built by baton, not a job's data.
 */
import type { NotifyTarget, SecretSource } from './notify-schema.js';

/**
 * Headers whose values are descriptions, never credentials: left unmasked. Every other header a
 * target sets (`Authorization`, `X-Api-Key`, a custom `X-Signature`…) is taken for a secret.
 */
const PLAIN_HEADERS = new Set([
  'accept',
  'accept-charset',
  'accept-encoding',
  'accept-language',
  'cache-control',
  'content-language',
  'content-type',
  'user-agent',
]);

/** The secrets of every target, for the output masks of a run. */
export function targetOutputSecrets(
  targets: Readonly<Record<string, NotifyTarget>>,
  env: (name: string) => string | undefined,
): string[] {
  const secrets: string[] = [];
  for (const target of Object.values(targets)) {
    if (target.kind === 'webhook') {
      secrets.push(...urlOutputSecrets(resolve(target.url, env)));
      for (const [name, value] of Object.entries(target.headers)) {
        if (PLAIN_HEADERS.has(name.toLowerCase())) continue;
        secrets.push(value);
        // `Bearer <token>`, `Basic <base64>`: the credentials alone are the secret too.
        const credentials = /^\S+\s+(\S.*)$/.exec(value.trim())?.[1];
        if (credentials) secrets.push(credentials);
      }
    } else if (target.kind === 'email') {
      secrets.push(...urlOutputSecrets(resolve(target.smtp, env), true));
    }
  }
  return secrets;
}

function resolve(
  source: SecretSource,
  env: (name: string) => string | undefined,
): string | undefined {
  return source.kind === 'url' ? source.url : env(source.variable) || undefined;
}

function urlOutputSecrets(raw: string | undefined, smtpAuth = false): string[] {
  if (!raw) return [];
  const secrets = [raw];
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return secrets; // not a URL: masked whole
  }
  secrets.push(url.href);
  if (url.pathname !== '/' && url.pathname !== '') secrets.push(url.pathname + url.search);
  if (url.search) secrets.push(url.search);
  if (url.password) {
    const password = decoded(url.password);
    secrets.push(url.password, password);
    if (smtpAuth) {
      // AUTH PLAIN and AUTH LOGIN, as an SMTP trace a job prints would show them.
      const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
      secrets.push(b64(password), b64(`\0${decoded(url.username)}\0${password}`));
    }
  }
  return secrets.filter((s) => s !== '');
}

function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text; // a stray `%`: the raw form is masked anyway
  }
}
