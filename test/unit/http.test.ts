/**
 * The HTTP endpoint's pure parts: the listen address and the token rule (what is loopback, what
 * needs a token), and the token check itself.
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { checkHttpToken, parseListenAddress } from '../../src/http/address.js';
import { tokenMatches } from '../../src/http/auth.js';

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
