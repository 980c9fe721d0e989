/**
 * The one classification of database errors (src/errors.ts): each code mysql2 gives baton, and
 * what every question asked of it answers — retry the statement, the server cannot be used, the
 * schema is missing, wait it out at start-up, report it as a database error. The errors are built
 * the way mysql2 builds them (a server error: `new Error(message)` with `code`, `errno`,
 * `sqlState`, `sqlMessage`; a socket error: Node's own, with `code` and `syscall`), plus one real
 * refused connection, baton's own wrapper (`store/connect.ts:unavailable`) and its real statement
 * deadline.
 */
import net from 'node:net';
import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { fail } from '../../src/cli/action.js';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import {
  DatabaseUnavailableError,
  dbErrorCategory,
  isDatabaseError,
  isLockConflictError,
  isMissingSchemaError,
  isRetryableDbError,
  isTransientDbError,
  isUnreachableDbError,
  UsageError,
} from '../../src/errors.js';
import { ExitCode } from '../../src/exit-codes.js';
import { unavailable } from '../../src/store/connect.js';
import { StatementTimeoutError, withDeadline } from '../../src/store/deadline.js';

/** A server error as mysql2's `Packet.asError` makes it. */
function serverError(code: string, errno: number, sqlState: string, message: string): Error {
  return Object.assign(new Error(message), { code, errno, sqlState, sqlMessage: message });
}

/** A socket or DNS error as Node (and so mysql2, which passes it on) makes it. */
function socketError(code: string, syscall = 'connect'): Error {
  return Object.assign(new Error(`${syscall} ${code} 127.0.0.1:3306`), {
    code,
    errno: -1,
    syscall,
    fatal: true,
  });
}

const TARGET = parseDatabaseUrl('mysql://baton:secret@db.example:3306/baton');

/**
 * Every code the classification knows, with mysql2's error, and the answers: category, retryable,
 * unreachable, missing schema, transient. These are the answers of the two sets, the missing-schema
 * test and the daemon's `isTransient` that the map replaced.
 */
const TABLE: [Error, string, boolean, boolean, boolean, boolean][] = [
  [socketError('ECONNREFUSED'), 'unreachable', true, true, false, true],
  [socketError('ETIMEDOUT'), 'unreachable', true, true, false, true],
  [socketError('EHOSTUNREACH'), 'unreachable', true, true, false, true],
  [socketError('ENETUNREACH'), 'unreachable', true, true, false, true],
  [socketError('EAI_AGAIN', 'getaddrinfo'), 'unreachable', true, true, false, true],
  [
    serverError('ER_CON_COUNT_ERROR', 1040, '08004', 'Too many connections'),
    'unreachable',
    true,
    true,
    false,
    true,
  ],
  [
    serverError('ER_SERVER_SHUTDOWN', 1053, '08S01', 'Server shutdown in progress'),
    'unreachable',
    true,
    true,
    false,
    true,
  ],
  [
    Object.assign(new Error('Connection lost: The server closed the connection.'), {
      code: 'PROTOCOL_CONNECTION_LOST',
      fatal: true,
    }),
    'unreachable',
    true,
    true,
    false,
    true,
  ],
  [socketError('ENOTFOUND', 'getaddrinfo'), 'unknown-host', true, true, false, false],
  [socketError('ECONNRESET', 'read'), 'connection-cut', true, false, false, true],
  [socketError('EPIPE', 'write'), 'connection-cut', true, false, false, true],
  [
    Object.assign(new Error('Connection lost: timeout'), { code: 'PROTOCOL_SEQUENCE_TIMEOUT' }),
    'connection-cut',
    true,
    false,
    false,
    true,
  ],
  [
    serverError('ER_CONNECTION_KILLED', 1927, '70100', 'Connection was killed'),
    'connection-cut',
    true,
    false,
    false,
    true,
  ],
  [
    serverError('ER_QUERY_INTERRUPTED', 1317, '70100', 'Query execution was interrupted'),
    'connection-cut',
    true,
    false,
    false,
    true,
  ],
  [
    serverError('ER_LOCK_DEADLOCK', 1213, '40001', 'Deadlock found when trying to get lock'),
    'lock-conflict',
    true,
    false,
    false,
    true,
  ],
  [
    serverError('ER_LOCK_WAIT_TIMEOUT', 1205, 'HY000', 'Lock wait timeout exceeded'),
    'lock-conflict',
    true,
    false,
    false,
    true,
  ],
  [
    serverError(
      'ER_ACCESS_DENIED_ERROR',
      1045,
      '28000',
      "Access denied for user 'baton'@'localhost'",
    ),
    'access-denied',
    false,
    true,
    false,
    false,
  ],
  [
    serverError(
      'ER_DBACCESS_DENIED_ERROR',
      1044,
      '42000',
      "Access denied for user 'baton'@'%' to database 'baton'",
    ),
    'access-denied',
    false,
    true,
    false,
    false,
  ],
  [
    serverError('ER_BAD_DB_ERROR', 1049, '42000', "Unknown database 'baton'"),
    'no-database',
    false,
    true,
    true,
    false,
  ],
  [
    serverError('ER_NO_SUCH_TABLE', 1146, '42S02', "Table 'baton.baton_runs' doesn't exist"),
    'no-table',
    false,
    false,
    true,
    false,
  ],
  [
    serverError('ER_PARSE_ERROR', 1064, '42000', 'You have an error in your SQL syntax'),
    'server',
    false,
    false,
    false,
    false,
  ],
  [
    serverError('ER_DUP_ENTRY', 1062, '23000', "Duplicate entry 'x' for key 'baton_runs_fire'"),
    'server',
    false,
    false,
    false,
    false,
  ],
];

describe('one classification of database errors', () => {
  it.each(TABLE)('%s → %s', (err, category, retryable, unreachable, missingSchema, transient) => {
    expect(dbErrorCategory(err)).toBe(category);
    expect(isRetryableDbError(err)).toBe(retryable);
    expect(isUnreachableDbError(err)).toBe(unreachable);
    expect(isMissingSchemaError(err)).toBe(missingSchema);
    expect(isTransientDbError(err)).toBe(transient);
    // Every driver or server error is a database error for the CLI (exit 69), not a bug.
    expect(isDatabaseError(err)).toBe(true);
    expect(isLockConflictError(err)).toBe(category === 'lock-conflict');
  });

  it("leaves baton's own errors, other system errors and non-errors unclassified", () => {
    for (const err of [
      new UsageError('bad flag'),
      socketError('EACCES', 'open'),
      new Error('plain'),
      'ECONNREFUSED',
      null,
      undefined,
      { code: 42 },
    ]) {
      expect(dbErrorCategory(err)).toBeUndefined();
      expect(isRetryableDbError(err)).toBe(false);
      expect(isUnreachableDbError(err)).toBe(false);
      expect(isMissingSchemaError(err)).toBe(false);
      expect(isTransientDbError(err)).toBe(false);
      expect(isDatabaseError(err)).toBe(false);
    }
  });

  it('reads a real refused connection of mysql2 as unreachable and transient', async () => {
    // A port that was free a moment ago: nothing listens there.
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const err: unknown = await mysql
      .createConnection({ host: '127.0.0.1', port, user: 'root', connectTimeout: 2_000 })
      .then(
        (conn) => conn.end(),
        (e: unknown) => e,
      );
    expect(dbErrorCategory(err)).toBe('unreachable');
    expect(isTransientDbError(err)).toBe(true);
    // As openConnection reports it: wrapped, the driver's error as the cause.
    const wrapped = unavailable(TARGET, err);
    expect(wrapped).toBeInstanceOf(DatabaseUnavailableError);
    expect(isTransientDbError(wrapped)).toBe(true);
    expect(isUnreachableDbError(wrapped)).toBe(false);
  });

  it('looks through the wrapper of openConnection for a missing schema and for start-up waits', () => {
    const noDatabase = unavailable(TARGET, TABLE.find(([, c]) => c === 'no-database')![0]);
    const noTable = unavailable(TARGET, TABLE.find(([, c]) => c === 'no-table')![0]);
    const denied = unavailable(TARGET, TABLE.find(([, c]) => c === 'access-denied')![0]);
    const unknownHost = unavailable(TARGET, socketError('ENOTFOUND', 'getaddrinfo'));
    expect(noDatabase.message).not.toContain('secret');
    expect(isMissingSchemaError(noDatabase)).toBe(true);
    expect(isMissingSchemaError(noTable)).toBe(true);
    expect(isMissingSchemaError(denied)).toBe(false);
    // A wrong password, a missing database, an unknown host: they will not fix themselves.
    for (const err of [noDatabase, denied, unknownHost])
      expect(isTransientDbError(err)).toBe(false);
    // A missing table is no connection problem: the cause decides, and it has none.
    expect(isTransientDbError(noTable)).toBe(false);
    // The first of the error and its cause that is a connection problem decides.
    const hostThenRefused = Object.assign(socketError('ENOTFOUND', 'getaddrinfo'), {
      cause: socketError('ECONNREFUSED'),
    });
    expect(isTransientDbError(hostThenRefused)).toBe(false);
    // A plain object is no Error: its cause is not looked at.
    expect(
      isTransientDbError({ code: 'DATABASE_UNAVAILABLE', cause: socketError('ECONNREFUSED') }),
    ).toBe(false);
  });

  it("counts baton's statement deadline as transient, as the error itself only", async () => {
    const timeout: unknown = await withDeadline(
      new Promise(() => {}),
      5,
      'statement',
      () => {},
    ).catch((e: unknown) => e);
    expect(timeout).toBeInstanceOf(StatementTimeoutError);
    expect(dbErrorCategory(timeout)).toBe('deadline');
    expect(isTransientDbError(timeout)).toBe(true);
    expect(isRetryableDbError(timeout)).toBe(false);
    expect(isUnreachableDbError(timeout)).toBe(false);
    expect(isDatabaseError(timeout)).toBe(false);
    expect(isTransientDbError(new DatabaseUnavailableError('x', { cause: timeout }))).toBe(false);
  });

  it('maps them to exit codes in the CLI: database errors 69, anything else a bug (70)', () => {
    const write = process.stderr.write;
    const lines: string[] = [];
    process.stderr.write = ((chunk: string) => lines.push(chunk) > 0) as typeof write;
    try {
      for (const [err] of TABLE) expect(fail(err)).toBe(ExitCode.Unavailable);
      expect(fail(new StatementTimeoutError('statement', 10))).toBe(ExitCode.Software);
      expect(fail(new Error('plain'))).toBe(ExitCode.Software);
      expect(fail(new UsageError('bad flag'))).toBe(ExitCode.Usage);
    } finally {
      process.stderr.write = write;
    }
    expect(lines[0]).toMatch(/^baton: database error: connect ECONNREFUSED/);
  });
});
