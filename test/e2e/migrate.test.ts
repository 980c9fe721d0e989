/**
 * Guarantee 6: migrations are applied once, under a lock, even when several processes start
 * together; a database with a migration this code does not know is refused.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { baton } from '../helpers/cli.js';
import { loadMigrations } from '../../src/store/migrate.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
beforeEach(async () => {
  db = await createTestDatabase('migrate');
});
afterEach(async () => {
  await db.drop();
});

describe('baton migrate', () => {
  it('four processes migrating at once apply each migration exactly once', async () => {
    const results = await Promise.all(
      [1, 2, 3, 4].map(() => baton(['migrate', '--database-url', db.url])),
    );
    expect(results.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    // Exactly one process applied them; the others found the schema current.
    const all = loadMigrations().length;
    expect(results.filter((r) => r.stdout.includes(`applied ${all} migration`))).toHaveLength(1);
    expect(results.filter((r) => /is up to date/.test(r.stdout))).toHaveLength(3);
    const ledger = await db.query<{ version: number }>(
      'SELECT version FROM baton_migrations ORDER BY version',
    );
    expect(ledger.map((r) => r.version)).toEqual(loadMigrations().map((m) => m.version));
  });

  it('creates a missing database', async () => {
    const url = `${db.url}_new`;
    try {
      const result = await baton(['migrate', '--database-url', url]);
      expect(result.code).toBe(0);
      const [row] = await db.query<{ n: number }>(
        'SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = ? AND table_name = ?',
        [`${db.name}_new`, 'baton_runs'],
      );
      expect(row!.n).toBe(1);
    } finally {
      await db.query('DROP DATABASE IF EXISTS ??', [`${db.name}_new`]);
    }
  });

  it('refuses a schema newer than this code (exit 69)', async () => {
    expect((await baton(['migrate', '--database-url', db.url])).code).toBe(0);
    await db.query(
      "INSERT INTO baton_migrations (version, name, checksum) VALUES (9999, '9999_from_the_future', REPEAT('0', 64))",
    );
    const result = await baton(['migrate', '--database-url', db.url]);
    expect(result.code).toBe(69);
    expect(result.stderr).toContain('9999_from_the_future');
    expect(result.stderr).toContain('does not know');
  });

  it('refuses a migration that was edited after it was applied (exit 69)', async () => {
    expect((await baton(['migrate', '--database-url', db.url])).code).toBe(0);
    await db.query("UPDATE baton_migrations SET checksum = REPEAT('f', 64) WHERE version = 1");
    const result = await baton(['migrate', '--database-url', db.url]);
    expect(result.code).toBe(69);
    expect(result.stderr).toContain('checksum mismatch');
  });
});
