/**
 * The HTTP endpoint's pure parts: the listen address and the token rule (what is loopback, what
 * needs a token), the token check itself, and the skip kinds that label `baton_skips_total`.
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { skipKind } from '../../src/coordination/fire-protocol.js';
import { checkHttpToken, parseListenAddress } from '../../src/http/address.js';
import { tokenMatches } from '../../src/http/auth.js';
import { pausedReason } from '../../src/store/pauses.js';

describe('--http address', () => {
  it.each([
    ['127.0.0.1:9464', '127.0.0.1', 9464, true],
    ['127.8.9.10:1', '127.8.9.10', 1, true],
    ['localhost:9464', 'localhost', 9464, true],
    ['[::1]:9464', '::1', 9464, true],
    ['0.0.0.0:9464', '0.0.0.0', 9464, false],
    ['10.0.0.5:80', '10.0.0.5', 80, false],
    ['[::]:9464', '::', 9464, false],
    ['batch-01.internal:9464', 'batch-01.internal', 9464, false],
  ])('%s', (value, host, port, loopback) => {
    expect(parseListenAddress(value)).toMatchObject({ host, port, loopback });
  });

  it.each(['9464', ':9464', '127.0.0.1', '127.0.0.1:0', '127.0.0.1:65536', '[nope]:1', '::1:9464'])(
    'refuses %s',
    (value) => {
      expect(() => parseListenAddress(value)).toThrow(`--http "${value}"`);
    },
  );

  it('needs a long enough token beyond loopback, and none on it', () => {
    const wide = parseListenAddress('0.0.0.0:9464');
    const local = parseListenAddress('127.0.0.1:9464');
    expect(() => checkHttpToken(wide, undefined)).toThrow(/set --http-token/);
    expect(() => checkHttpToken(wide, 'x'.repeat(15))).toThrow(/shorter than 16/);
    expect(() => checkHttpToken(wide, 'x'.repeat(16))).not.toThrow();
    expect(() => checkHttpToken(local, undefined)).not.toThrow();
  });
});

describe('the token check', () => {
  const token = 'a-token-of-24-characters';
  const request = (authorization?: string) =>
    ({ headers: authorization ? { authorization } : {} }) as IncomingMessage;
  const basic = (user: string, password: string) =>
    `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

  it('accepts the token as Bearer or as the Basic password', () => {
    expect(tokenMatches(request(`Bearer ${token}`), token)).toBe(true);
    expect(tokenMatches(request(`bearer ${token}`), token)).toBe(true);
    expect(tokenMatches(request(basic('prometheus', token)), token)).toBe(true);
    expect(tokenMatches(request(basic('', token)), token)).toBe(true);
  });

  it('refuses anything else', () => {
    for (const header of [
      undefined,
      'Bearer',
      `Bearer ${token}x`,
      `Bearer ${token.slice(1)}`,
      `Token ${token}`,
      basic(token, 'wrong'),
      `Basic ${Buffer.from(token).toString('base64')}`,
    ]) {
      expect(tokenMatches(request(header), token), String(header)).toBe(false);
    }
  });
});

describe('skip kinds', () => {
  it.each([
    ['this fire already ran on b (done)', 'taken'],
    ['this fire is running on b (started 2026-01-01T00:00:00.000Z)', 'taken'],
    ["this fire is being claimed by b (it holds the job's lock)", 'taken'],
    ['another run held the lock at this instant (it is free now)', 'taken'],
    ['this runner already took worker slot 2 of this fire', 'taken'],
    [
      'all 2 worker slots are taken: 1: this fire is running on a (…); 2: this fire is running on b (…)',
      'taken',
    ],
    [
      'all 2 worker slots are taken: 1: an earlier run is still running on a (…); 2: this fire already ran on b (done)',
      'taken',
    ],
    [
      'all 2 worker slots are taken: 1: an earlier run is still running on a (…); 2: a manual run is running on b (…)',
      'overlap',
    ],
    ['an earlier run is still running on b (fire 2026-01-01T00:00:00.000Z, started …)', 'overlap'],
    ['a manual run is running on b (started …)', 'overlap'],
    ['a later fire (2026-01-01T00:00:00.000Z) is already running on b; …', 'overlap'],
    ['the lock is held by connection 12, which has no running row for this job', 'overlap'],
    ['waited in the queue until the next fire (…) came first; an earlier run …', 'overlap'],
  ])('%s → %s', (reason, kind) => {
    expect(skipKind(reason)).toBe(kind);
  });

  it('a pause, as pauses.ts words it', () => {
    const pause = { job: 'j', pausedBy: 'ops', pausedAt: new Date(0), reason: 'audit' };
    expect(skipKind(pausedReason(pause as Parameters<typeof pausedReason>[0]))).toBe('paused');
  });
});
