/**
 * `--http <host:port>`: where the daemon's HTTP endpoint listens. Loopback is the default posture
 * (a reverse proxy or a local Prometheus agent reaches it); anything wider must carry a token,
 * because the dashboard shows job output and the runner's fleet.
 */
import { isIP } from 'node:net';
import { UsageError } from '../errors.js';

export interface ListenAddress {
  host: string;
  port: number;
  /** Only this machine can connect (127.0.0.0/8, ::1, localhost). */
  loopback: boolean;
  /** As given, for messages and logs. */
  display: string;
}

/** The shortest token accepted: long enough that guessing it over HTTP is hopeless. */
export const MIN_TOKEN_LENGTH = 16;

export function parseListenAddress(value: string): ListenAddress {
  const fail = (why: string) =>
    new UsageError(`--http "${value}": ${why} (expected host:port, e.g. 127.0.0.1:9464)`);
  // [::1]:9464 for IPv6, host:port otherwise.
  const match = /^\[([^\]]+)\]:(\d+)$/.exec(value) ?? /^([^:[\]]+):(\d+)$/.exec(value);
  if (!match) throw fail('not a host and port');
  const host = match[1]!;
  const port = Number(match[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw fail('the port must be between 1 and 65535');
  }
  if (value.startsWith('[') && isIP(host) !== 6) throw fail(`"${host}" is not an IPv6 address`);
  return { host, port, loopback: isLoopbackName(host), display: value };
}

/** localhost, 127.0.0.0/8 or ::1. */
export function isLoopbackName(host: string): boolean {
  if (host === 'localhost' || host === '::1') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

/**
 * The token rule, checked before anything starts: beyond loopback a token is required, and a
 * token, where given, must not be trivially short.
 */
export function checkHttpToken(address: ListenAddress, token: string | undefined): void {
  if (token != null && token.length < MIN_TOKEN_LENGTH) {
    throw new UsageError(
      `--http-token is shorter than ${MIN_TOKEN_LENGTH} characters; use a random one ` +
        '(e.g. openssl rand -hex 24)',
    );
  }
  if (!address.loopback && token == null) {
    throw new UsageError(
      `--http ${address.display} listens beyond this machine: set --http-token (or ` +
        'BATON_HTTP_TOKEN), or listen on 127.0.0.1',
    );
  }
}
