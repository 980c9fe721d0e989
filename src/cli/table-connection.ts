/**
 * One connection to a migrated baton database for a command that reads or writes one of its
 * tables (`pause`, `definitions`): a database whose schema lacks the table is a clear 69 naming
 * it and what to do, not a driver error.
 */
import type { DatabaseTarget } from '../config/database-url.js';
import { DatabaseUnavailableError, isMissingSchemaError } from '../errors.js';
import { openConnection } from '../store/connect.js';

export type Connection = Awaited<ReturnType<typeof openConnection>>;

/** Runs `body` on a connection to `target`, closed after; a missing `table` is a clear 69. */
export async function withTable<T>(
  target: DatabaseTarget,
  table: string,
  body: (conn: Connection) => Promise<T>,
): Promise<T> {
  let conn;
  try {
    conn = await openConnection(target, { create: false });
    return await body(conn);
  } catch (err) {
    if (!isMissingSchemaError(err)) throw err;
    throw new DatabaseUnavailableError(
      `the database at ${target.display} has no ${table} table yet: run \`baton migrate\` ` +
        '(or start a runner, which migrates) first',
      { cause: err },
    );
  } finally {
    await conn?.end().catch(() => {});
  }
}
