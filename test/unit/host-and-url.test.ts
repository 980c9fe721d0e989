/**
 * Input that used to fail late or as a bug (issue 34): a host name over the columns' width, which
 * stopped every notification of its runner, and an unencoded '%' in a database URL, which was an
 * internal error (exit 70) for the CLI and a raw URIError for library mode. Both are usage errors
 * now, at the place they came from, and neither message echoes a password.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { resolveHost } from '../../src/cli/options.js';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { UsageError } from '../../src/errors.js';
import { ExitCode } from '../../src/exit-codes.js';
import { HOST_MAX_CHARS, hostWith } from '../../src/host-name.js';
import { createScheduler } from '../../src/index.js';

const PASSWORD = '50%off-s3cret';
const URL_WITH_BARE_PERCENT = `mysql://batch:${PASSWORD}@127.0.0.1:3306/baton`;

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (err) {
    return err;
  }
  throw new Error('nothing was thrown');
}

describe("an unencoded '%' in the database URL", () => {
  it('is a usage error that does not echo the password', () => {
    const err = thrown(() => parseDatabaseUrl(URL_WITH_BARE_PERCENT));
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).exitCode).toBe(ExitCode.Usage);
    expect(String(err)).toMatch(/--database-url: the password contains a '%'.*%25/);
    expect(String(err)).not.toContain('s3cret');
    // Encoded, the same password is fine.
    const ok = parseDatabaseUrl(URL_WITH_BARE_PERCENT.replace('50%off', '50%25off'));
    expect(ok.connection.password).toBe(PASSWORD);
  });

  it('is the same usage error in library mode, not a raw URIError', () => {
    const err = thrown(() => createScheduler({ databaseUrl: URL_WITH_BARE_PERCENT, host: 'h' }));
    expect(err).toBeInstanceOf(UsageError);
    expect(String(err)).toMatch(/databaseUrl: the password contains a '%'/);
    expect(String(err)).not.toContain('s3cret');
  });
});

describe('host names: one limit everywhere', () => {
  const saved = process.env.BATON_HOST;
  afterEach(() => {
    if (saved == null) delete process.env.BATON_HOST;
    else process.env.BATON_HOST = saved;
  });
  const longest = 'h'.repeat(HOST_MAX_CHARS);
  const tooLong = 'h'.repeat(HOST_MAX_CHARS + 1);

  it('--host and BATON_HOST: up to 255 characters, the refusal names its source', () => {
    delete process.env.BATON_HOST;
    expect(resolveHost({ host: longest })).toBe(longest);
    expect(() => resolveHost({ host: tooLong })).toThrow(/^--host must be 1 to 255 characters/);
    expect(() => resolveHost({ host: '' })).toThrow(/^--host must be 1 to 255/);
    process.env.BATON_HOST = tooLong;
    expect(() => resolveHost({})).toThrow(/^BATON_HOST must be 1 to 255 characters \(got 256\)/);
  });

  it('library mode refuses an over-long or empty host as a usage error', () => {
    const databaseUrl = 'mysql://root@127.0.0.1:3306/baton';
    for (const host of [tooLong, '']) {
      const err = thrown(() => createScheduler({ databaseUrl, host }));
      expect(err).toBeInstanceOf(UsageError);
      expect(String(err)).toMatch(/host must be 1 to 255 characters/);
    }
    expect(createScheduler({ databaseUrl, host: longest }).host).toBe(longest);
  });

  it('a name made of a host and a suffix fits the column and keeps the suffix whole', () => {
    const suffix = '#4242#k3y9zq';
    const name = hostWith(longest, suffix);
    expect(name).toHaveLength(HOST_MAX_CHARS);
    expect(name.endsWith(suffix)).toBe(true);
    expect(hostWith('batch-1', suffix)).toBe(`batch-1${suffix}`);
  });
});
