/**
 * The write API's pure parts: the per-token rate limit (a bucket of 10, refilled at 10 per 10 s,
 * on a clock the test moves) and the named tokens file (what it takes, what it refuses, and that
 * a refusal names the line but never the token).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { namedToken } from '../../src/http/auth.js';
import { RateLimiter } from '../../src/http/rate-limit.js';
import { readWriteTokens } from '../../src/http/write-tokens.js';

describe('RateLimiter', () => {
  it('allows a burst of 10, then one a second, per key', () => {
    let now = 0;
    const limiter = new RateLimiter({ capacity: 10, windowMs: 10_000 }, () => now);
    for (let i = 0; i < 10; i++) expect(limiter.take('alice')).toBe(0);
    expect(limiter.take('alice')).toBe(1_000);
    expect(limiter.take('bob'), 'a bucket per token').toBe(0);
    now = 400;
    expect(limiter.take('alice')).toBe(600);
    now = 1_000;
    expect(limiter.take('alice')).toBe(0);
    expect(limiter.take('alice')).toBeGreaterThan(0);
    now = 1_000_000;
    // Refilled to the capacity, not beyond it.
    for (let i = 0; i < 10; i++) expect(limiter.take('alice')).toBe(0);
    expect(limiter.take('alice')).toBeGreaterThan(0);
  });
});

describe('the write tokens file', () => {
  const file = (text: string) => {
    const f = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-wt-')), 'tokens');
    writeFileSync(f, text);
    return f;
  };
  const A = 'a'.repeat(16);
  const B = 'b'.repeat(24);

  it('reads name:token lines, skipping blanks and comments', () => {
    const tokens = readWriteTokens(file(`# ops\n\nalice: ${A}\r\ndeploy-bot:${B}\n`), 'F');
    expect(tokens).toEqual([
      { name: 'alice', token: A },
      { name: 'deploy-bot', token: B },
    ]);
    expect(namedToken(B, tokens)?.name).toBe('deploy-bot');
    expect(namedToken(`${B}x`, tokens)).toBeNull();
  });

  it.each([
    [`alice ${A}`, /F .*:1: expected name:token$/],
    [`al ice:${A}`, /:1: the name must be/],
    [`x:\nalice:short-secret`, /:1: the token of "x" is shorter than 16/],
    [`alice:${A}\nalice:${B}`, /:2: "alice" is named twice/],
    [`alice:${A}\nbob:${A}`, /:2: the token of "bob" is also another name's/],
    [`alice:${A} ${B}`, /:1: the token of "alice" contains white space/],
    [`reader:${B}`, /:1: the token of "reader" is the read token/],
    ['# only comments\n', /has no name:token line/],
  ])('refuses %j', (text, message) => {
    let error: Error | undefined;
    try {
      readWriteTokens(file(text), 'F', B);
    } catch (err) {
      error = err as Error;
    }
    expect(error?.message).toMatch(message);
    for (const secret of [A, B, 'short-secret']) expect(error?.message).not.toContain(secret);
  });

  it('names a file it cannot read', () => {
    expect(() => readWriteTokens('/nonexistent/tokens', 'F')).toThrow(
      'F /nonexistent/tokens: cannot read: file not found',
    );
  });
});
