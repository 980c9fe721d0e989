/**
 * The secrets of a target — a webhook's URL (a Slack hook's path is its password), its header
 * values, an SMTP URL's password — are resolved only at delivery and must appear in no error:
 * errors end up in the outbox's `last_error`, in logs and on operators' screens. The targets
 * build their errors from fixed words, so `redact` is the second line of defence, for the text
 * of an unexpected error or of an SMTP server's reply. What a target's secrets are is said once,
 * in config/notify-target-secrets.ts (its `errors` use).
 */
import type { SecretSource } from '../config/schema.js';
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

/** `text` with every occurrence of a secret replaced by `***` (longest first). */
export function redact(text: string, secrets: readonly string[]): string {
  const unique = [...new Set(secrets.filter((s) => s.length >= MIN_SECRET_LENGTH))].sort(
    (a, b) => b.length - a.length,
  );
  let out = text;
  for (const secret of unique) out = out.split(secret).join('***');
  return out;
}
