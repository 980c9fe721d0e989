/**
 * The secrets of a target — a webhook's URL (a Slack hook's path is its password), its header
 * values, an SMTP URL's password — are resolved only at delivery and must appear in no error:
 * errors end up in the outbox's `last_error`, in logs and on operators' screens. The targets
 * build their errors from fixed words, so `redact` is the second line of defence, for the text
 * of an unexpected error or of an SMTP server's reply.
 */
import type { NotifyTarget, SecretSource } from '../config/schema.js';
import type { EnvLookup } from './types.js';

/** Shorter strings are not redacted: hiding every `a` of a message hides nothing. */
const MIN_SECRET_LENGTH = 4;

export type Resolved = { ok: true; value: string } | { ok: false; error: string };

/** The URL written in the file, or the value of its `urlFromEnv` variable now. */
export function resolveSecret(source: SecretSource, env: EnvLookup): Resolved {
  if (source.kind === 'url') return { ok: true, value: source.url };
  const value = env(source.variable);
  if (value == null || value === '') {
    return { ok: false, error: `environment variable ${source.variable} is not set` };
  }
  return { ok: true, value };
}

/** What no error may show of a target: its URL's secrets (urlSecrets) and its header values. */
export function targetSecrets(target: NotifyTarget, env: EnvLookup): string[] {
  const source =
    target.kind === 'webhook' ? target.url : target.kind === 'email' ? target.smtp : null;
  const secrets: string[] = target.kind === 'webhook' ? Object.values(target.headers) : [];
  if (source) {
    const resolved = resolveSecret(source, env);
    if (resolved.ok) {
      secrets.push(...(target.kind === 'email' ? smtpSecrets : urlSecrets)(resolved.value));
    }
  }
  return secrets;
}

/** An SMTP URL's secrets, plus the forms AUTH PLAIN and AUTH LOGIN send them in (base64). */
export function smtpSecrets(raw: string): string[] {
  const secrets = urlSecrets(raw);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return secrets;
  }
  const user = safeDecode(url.username);
  const pass = safeDecode(url.password);
  if (pass) {
    const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
    secrets.push(b64(pass), b64(`\0${user}\0${pass}`));
  }
  return secrets;
}

/**
 * What must not be shown of a URL: the whole of it, its path and query, its user and password
 * (as written and percent-decoded). The host alone is not a secret but is left out of errors
 * anyway: the target's name says which one it was.
 */
export function urlSecrets(raw: string): string[] {
  const secrets = [raw];
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return secrets;
  }
  secrets.push(url.href, url.pathname, url.search, url.pathname + url.search);
  for (const part of [url.username, url.password]) {
    secrets.push(part, safeDecode(part));
  }
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

/** `text` with every occurrence of a secret replaced by `***` (longest first). */
export function redact(text: string, secrets: readonly string[]): string {
  const unique = [...new Set(secrets.filter((s) => s.length >= MIN_SECRET_LENGTH))].sort(
    (a, b) => b.length - a.length,
  );
  let out = text;
  for (const secret of unique) out = out.split(secret).join('***');
  return out;
}
