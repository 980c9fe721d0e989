/**
 * Whether a mutant's edits change what baton runs. An edit without effect can only "survive", and
 * such a survivor hides that its guarantee has no mutant at all: `fire-key-dropped` made 0001's
 * fire key plain, but 0012 drops that key and makes it again, unique (issue 34). So, per kind of
 * file edited:
 *
 * - a migration (src/store/migrations): the schema the migrations build on a scratch database,
 *   unmutated and mutated — `SHOW CREATE TABLE` of every table — must differ. The databases are
 *   empty, so a mutant of a data migration alone (0007's backfill) would need rows planted first;
 * - TypeScript: the file compiled alone (the build has `isolatedModules`, so this is what tsc
 *   emits for it), comments removed, must differ: an edit of a comment or of types only compiles
 *   to the same JavaScript;
 * - any other file: its text must differ (test/unit/mutants.test.ts checks that of every edit).
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { createTestDatabase } from '../helpers/db.js';
import { applyEdits } from './apply.js';
import { emit, emitOptions } from './build.js';
import type { Edit } from './mutant.js';

export const MIGRATIONS = 'src/store/migrations';

/**
 * What in `edits` has no effect on the tree at `root`, in words, one entry per file (or one for
 * the migrations together); [] when every edited file changes what runs.
 */
export async function editsWithoutEffect(root: string, edits: readonly Edit[]): Promise<string[]> {
  const read = (file: string) => readFileSync(path.join(root, file), 'utf8');
  const mutated = applyEdits(edits, read);
  const problems: string[] = [];
  const options = { ...emitOptions(root), removeComments: true };
  for (const { file, text } of mutated) {
    if (file.endsWith('.ts') && emit(read(file), file, options) === emit(text, file, options)) {
      problems.push(`${file}: the edit compiles to the same JavaScript`);
    }
  }
  const migrations = mutated.filter((m) => m.file.startsWith(`${MIGRATIONS}/`));
  if (migrations.length > 0) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-mutant-migrations-'));
    try {
      cpSync(path.join(root, MIGRATIONS), dir, { recursive: true });
      for (const { file, text } of migrations)
        writeFileSync(path.join(dir, path.basename(file)), text);
      const [before, after] = await Promise.all([
        schemaBuiltBy(path.join(root, MIGRATIONS)),
        schemaBuiltBy(dir),
      ]);
      if (before === after) {
        problems.push(
          `${migrations.map((m) => m.file).join(', ')}: the migrations build the same schema ` +
            'with the edit as without it (a later migration undoes it?)',
        );
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return problems;
}

/**
 * Every table's `SHOW CREATE TABLE` after the migrations in `dir` ran on a new database of the
 * test server (test/helpers/db.ts), dropped afterwards. The next AUTO_INCREMENT value is left out:
 * it depends on rows, not on the schema.
 */
export async function schemaBuiltBy(dir: string): Promise<string> {
  const db = await createTestDatabase('mutant_schema');
  try {
    await migrate(db.conn, db.name, loadMigrations(dir));
    const tables = await db.query<Record<string, string>>('SHOW TABLES');
    const ddl: string[] = [];
    for (const name of tables.map((t) => Object.values(t)[0]!).sort()) {
      const [row] = await db.query<{ 'Create Table': string }>('SHOW CREATE TABLE ??', [name]);
      ddl.push(row!['Create Table'].replace(/ AUTO_INCREMENT=\d+/, ''));
    }
    return ddl.join(';\n');
  } finally {
    await db.drop();
  }
}
