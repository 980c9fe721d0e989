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
import { ApiError, runParamsOf } from '../../src/http/write-actions.js';
import type { JobDefinition } from '../../src/config/schema.js';

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
    // A second word is a scope's (key=value): a token with white space is not one.
    [`alice:${A} ${B}`, /:1: the scope of "alice": after the token, expected jobs=/],
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

  it('reads scopes after the token; a line without one keeps every right', () => {
    const tokens = readWriteTokens(
      file(
        `alice:${A}\n` +
          `team-a:${B}   jobs=report*,etl-?,report* actions=run,re-run,run namespaces=prod # team A\n` +
          `pauser:${'c'.repeat(20)} actions=pause,resume\n`,
      ),
      'F',
    );
    expect(tokens).toEqual([
      { name: 'alice', token: A },
      {
        name: 'team-a',
        token: B,
        scope: { jobs: ['report*', 'etl-?'], actions: ['run', 'rerun'], namespaces: ['prod'] },
      },
      { name: 'pauser', token: 'c'.repeat(20), scope: { actions: ['pause', 'resume'] } },
    ]);
    expect(tokens[0]).not.toHaveProperty('scope');
  });

  it.each([
    [
      `a:${A} actions=run,blackout`,
      /F .*:1: the scope of "a": actions=: unknown action "blackout" \(expected run, rerun, backfill, pause, resume, kill\)$/,
    ],
    [`a:${A} actions=`, /:1: the scope of "a": actions=: an empty action/],
    [`a:${A} actions=run,,pause`, /:1: the scope of "a": actions=: an empty action/],
    [`a:${A} jobs=`, /:1: the scope of "a": jobs=: an empty job name or glob/],
    [`a:${A} jobs=report*,`, /:1: the scope of "a": jobs=: an empty job name or glob/],
    [
      `a:${A} jobs=report/..`,
      /:1: the scope of "a": jobs=: the job glob "report\/\.\." may contain only/,
    ],
    [`a:${A} jobs=-x`, /:1: .*the job glob "-x" may contain only/],
    [`a:${A} jobs=${'x'.repeat(129)}`, /:1: .*jobs=: a job glob longer than 128/],
    [
      `a:${A} namespaces=prod,Pr*d`,
      /:1: the scope of "a": namespaces=: the namespace "Pr\*d" is no namespace name/,
    ],
    [`a:${A} namespaces=`, /:1: the scope of "a": namespaces=: an empty namespace/],
    [`a:${A} namespaces=../x`, /:1: .*the namespace "..\/x" is no namespace name/],
    [`a:${A} jobs=x jobs=y`, /:1: the scope of "a": jobs= is given twice/],
    [`a:${A} job=x`, /:1: the scope of "a": after the token, expected jobs=/],
    [`b:${B}\na:${A} --actions=run`, /:2: the scope of "a": after the token, expected/],
  ])('refuses the scope %j, naming file:line and never the token', (text, message) => {
    let error: Error | undefined;
    try {
      readWriteTokens(file(text), 'F');
    } catch (err) {
      error = err as Error;
    }
    expect(error?.message).toMatch(message);
    for (const secret of [A, B]) expect(error?.message).not.toContain(secret);
  });

  it('does not echo an unknown scope key: it may be the rest of a token with a space', () => {
    let error: Error | undefined;
    try {
      readWriteTokens(file(`a:${A} secret-half=${B}`), 'F');
    } catch (err) {
      error = err as Error;
    }
    expect(error?.message).toMatch(/:1: the scope of "a": after the token, expected/);
    expect(error?.message).not.toContain('secret-half');
    expect(error?.message).not.toContain(B);
  });

  it('names a file it cannot read', () => {
    expect(() => readWriteTokens('/nonexistent/tokens', 'F')).toThrow(
      'F /nonexistent/tokens: cannot read: file not found',
    );
  });
});

describe("the run route's parameters", () => {
  const job = (kind: 'command' | 'shell' | 'module') =>
    ({
      name: 'report',
      target:
        kind === 'command'
          ? { kind, argv: ['report'] }
          : kind === 'shell'
            ? { kind, script: 'report' }
            : { kind, path: 'report.mjs' },
    }) as unknown as JobDefinition;
  const refusal = (f: () => unknown) => {
    try {
      f();
    } catch (err) {
      return err instanceof ApiError ? `${err.status} ${err.message}` : String(err);
    }
    return null;
  };

  it('takes env and args as given, none by default', () => {
    expect(runParamsOf(job('command'), {})).toEqual({ env: {}, args: [] });
    expect(
      runParamsOf(job('command'), { env: { MODE: 'a\tb', _x1: '' }, args: ['--day', ''] }),
    ).toEqual({ env: { MODE: 'a\tb', _x1: '' }, args: ['--day', ''] });
    expect(runParamsOf(job('module'), { env: { REGION: 'eu' } })).toEqual({
      env: { REGION: 'eu' },
      args: [],
    });
  });

  it.each([
    [{ env: { '1X': 'v' } }, 'command', '400 the body: env.1X: not a variable name'],
    [{ env: { 'a b': 'v' } }, 'command', '400 the body: env: not a variable name'],
    [{ env: { BATON_JOB: 'v' } }, 'command', '400 the body: env.BATON_JOB: BATON_* variables'],
    [{ env: { X: 'a\u0000' } }, 'command', '400 the body: env.X: the value contains a control'],
    [{ env: { X: 'a\u202eb' } }, 'command', '400 the body: env.X: the value contains a control'],
    [{ args: ['a', 'b\nc'] }, 'command', '400 the body: args[1]: contains a control character'],
    [{ args: ['x'] }, 'shell', '400 the body: args: report is a shell job'],
    [{ args: ['x'] }, 'module', '400 the body: args: report is a module job'],
  ] as const)('refuses %j for a %s job', (body, kind, message) => {
    const said = refusal(() => runParamsOf(job(kind), body as never));
    expect(said).toContain(message);
    for (const value of ['a\u0000', 'b\nc', 'a\u202eb']) expect(said).not.toContain(value);
  });
});
