/**
 * Masks secrets in a job's output before any of it is kept (the history's tail and whole output):
 * the runner's database password, the connections' URLs, the notification targets' secrets, the
 * values of a job's `secretEnv`. Each
 * occurrence becomes `***`, also when the output arrives cut in the middle of one: the end of a
 * chunk that is the start of a secret is held back until the next chunk (or the end of the
 * stream) shows whether it is one.
 *
 * Secrets shorter than MIN_SECRET_BYTES are not masked: masking every `a` of a job's output
 * would destroy it and hide nothing.
 *
 * Imports stay within node: (the spawner loads this file and must stay small).
 */
export const MIN_SECRET_BYTES = 4;
const MASK = Buffer.from('***');

export class SecretMask {
  private readonly secrets: Buffer[];
  private readonly holdBytes: number;
  private carry = Buffer.alloc(0);

  constructor(secrets: readonly string[]) {
    const unique = [...new Set(secrets.filter((s) => Buffer.byteLength(s) >= MIN_SECRET_BYTES))];
    // Longest first: a secret containing another is masked whole.
    this.secrets = unique.map((s) => Buffer.from(s)).sort((a, b) => b.length - a.length);
    this.holdBytes = Math.max(0, ...this.secrets.map((s) => s.length - 1));
  }

  get active(): boolean {
    return this.secrets.length > 0;
  }

  /** The masked bytes that can be passed on now (some of `chunk` may be held back). */
  push(chunk: Buffer): Buffer {
    if (!this.active) return chunk;
    const masked = this.mask(this.carry.length ? Buffer.concat([this.carry, chunk]) : chunk);
    const keep = this.heldBack(masked);
    this.carry = Buffer.from(masked.subarray(masked.length - keep));
    return masked.subarray(0, masked.length - keep);
  }

  /** What was held back, at the end of the stream. */
  end(): Buffer {
    const rest = this.carry;
    this.carry = Buffer.alloc(0);
    return rest;
  }

  /** The length of the longest end of `buf` that is the start of a secret (held for more). */
  private heldBack(buf: Buffer): number {
    for (let k = Math.min(this.holdBytes, buf.length); k > 0; k--) {
      const end = buf.subarray(buf.length - k);
      if (this.secrets.some((s) => s.length > k && s.subarray(0, k).equals(end))) return k;
    }
    return 0;
  }

  private mask(buf: Buffer): Buffer {
    let out = buf;
    for (const secret of this.secrets) {
      let at = out.indexOf(secret);
      if (at < 0) continue;
      const parts: Buffer[] = [];
      let from = 0;
      while (at >= 0) {
        parts.push(out.subarray(from, at), MASK);
        from = at + secret.length;
        at = out.indexOf(secret, from);
      }
      parts.push(out.subarray(from));
      out = Buffer.concat(parts);
    }
    return out;
  }
}

/** `text` with `secrets` masked (an error message built from a job's words, say). */
export function maskText(text: string, secrets: readonly string[]): string {
  const mask = new SecretMask(secrets);
  if (!mask.active) return text;
  return Buffer.concat([mask.push(Buffer.from(text)), mask.end()]).toString();
}
