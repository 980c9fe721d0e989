/**
 * The guarantee mutants' catalogue stays true to the code on every `npm test` (running the mutants
 * themselves is `npm run mutants`, which takes long): each mutant still applies — every text it
 * mutates occurs exactly once — and changes what runs (effect.ts; a schema mutant on the real
 * database server), each killer names a test that exists, every guarantee has a mutant, and
 * test/README.md lists the catalogue as it is.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyEdits, catalogueTable } from '../mutants/apply.js';
import { MUTANTS } from '../mutants/catalogue.js';
import { EditTypeCheck, emit, emitOptions, emittedPath } from '../mutants/build.js';
import { editsWithoutEffect } from '../mutants/effect.js';
import { GUARANTEES } from '../mutants/mutant.js';
import { ROOT } from '../helpers/cli.js';

const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

describe('the mutant catalogue', () => {
  it('has unique kebab-case ids and a mutant for every guarantee', () => {
    const ids = MUTANTS.map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
    const covered = new Set(MUTANTS.map((m) => m.guarantee));
    expect(Object.keys(GUARANTEES).filter((g) => !covered.has(g as never))).toEqual([]);
  });

  it.each(MUTANTS.map((m) => [m.id, m] as const))('%s applies to the code as it is', (_, m) => {
    const mutated = applyEdits(m.edits, read);
    expect(mutated.length).toBeGreaterThan(0);
    for (const { file, text } of mutated) expect(text, file).not.toBe(read(file));
  });

  it.each(MUTANTS.map((m) => [m.id, m] as const))('%s changes what runs', async (_, m) => {
    expect(await editsWithoutEffect(ROOT, m.edits)).toEqual([]);
  });

  it.each(MUTANTS.map((m) => [m.id, m] as const))('%s names killers that exist', (_, m) => {
    expect(m.killers.length).toBeGreaterThan(0);
    for (const k of m.killers) {
      expect(k.file).toMatch(/^test\/.*\.test\.ts$/);
      expect(read(k.file), `${k.file} has a test named "${k.test}"`).toContain(k.test);
    }
  });

  it('is listed in test/README.md as it is', () => {
    expect(read('test/README.md')).toContain(catalogueTable(MUTANTS));
  });
});

describe('applyEdits', () => {
  const files: Record<string, string> = { 'a.ts': 'one two one', 'b.ts': 'three' };
  const from = (f: string) => files[f]!;

  it('applies edits in order, several to one file', () => {
    expect(
      applyEdits(
        [
          { file: 'a.ts', find: 'two', replace: 'TWO' },
          { file: 'a.ts', find: 'TWO one', replace: '2 $& 1' },
          { file: 'b.ts', find: 'three', replace: '3' },
        ],
        from,
      ),
    ).toEqual([
      { file: 'a.ts', text: 'one 2 $& 1' },
      { file: 'b.ts', text: '3' },
    ]);
  });

  it('refuses a text that is not there, or there twice', () => {
    expect(() => applyEdits([{ file: 'a.ts', find: 'four', replace: '' }], from)).toThrow(
      /a\.ts: the text to mutate occurs 0 times, not once/,
    );
    expect(() => applyEdits([{ file: 'a.ts', find: 'one', replace: '' }], from)).toThrow(
      /occurs 2 times/,
    );
  });
});

describe('editsWithoutEffect', () => {
  it("flags the fire key made plain in 0001, which 0012 makes again (issue 34's no-op mutant)", async () => {
    const problems = await editsWithoutEffect(ROOT, [
      {
        file: 'src/store/migrations/0001_create_baton_runs.sql',
        find: 'UNIQUE KEY baton_runs_fire',
        replace: 'KEY baton_runs_fire',
      },
      {
        file: 'src/store/server-check.ts',
        find: "Key_name = 'baton_runs_fire' AND Non_unique = 0",
        replace: "Key_name = 'baton_runs_fire'",
      },
    ]);
    // The start-up check's edit has an effect; the migration's alone does not.
    expect(problems).toEqual([
      'src/store/migrations/0001_create_baton_runs.sql: the migrations build the same schema ' +
        'with the edit as without it (a later migration undoes it?)',
    ]);
  });

  it('passes a migration edit that changes the schema', async () => {
    const edit = {
      file: 'src/store/migrations/0001_create_baton_runs.sql',
      find: 'KEY baton_runs_scheduled (namespace, scheduled_at),',
      replace: '',
    };
    expect(await editsWithoutEffect(ROOT, [edit])).toEqual([]);
  });

  it('flags code edits of a comment or of types only, and passes one of code', async () => {
    const file = 'src/store/server-check.ts';
    const comment = { file, find: 'as a unique key', replace: 'as a key' };
    const types = {
      file,
      find: 'assertFireKey(db: Queryable)',
      replace: 'assertFireKey(db: Queryable | never)',
    };
    const code = { file, find: ' AND Non_unique = 0', replace: '' };
    const same = `${file}: the edit compiles to the same JavaScript`;
    expect(await editsWithoutEffect(ROOT, [comment])).toEqual([same]);
    expect(await editsWithoutEffect(ROOT, [types])).toEqual([same]);
    expect(await editsWithoutEffect(ROOT, [comment, code])).toEqual([]);
  });
});

describe("a mutant's build (build.ts)", () => {
  // A mutant's copy takes the unmutated dist/ and emits only its edited files again: that is the
  // build only if each file compiled alone is, byte for byte, what tsc emitted for it (`npm test`
  // has just built dist/).
  it('emits every file of src/ exactly as tsc did', () => {
    const files = readdirSync(path.join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
      .map((f) => `src/${f.split(path.sep).join('/')}`);
    expect(files.length).toBeGreaterThan(100);
    const options = emitOptions(ROOT);
    const differ = files.filter((f) => emit(read(f), f, options) !== read(emittedPath(f)));
    expect(differ, 'emitted alone ≠ dist/ (a dist/ older than src/? npm run build)').toEqual([]);
  });

  it('type-checks the edited files against the rest: a misspelled name, a type imported as a value', () => {
    const check = new EditTypeCheck(ROOT);
    const file = 'src/store/server-check.ts';
    const edit = (find: string, replace: string) => {
      const [edited] = applyEdits([{ file, find, replace }], read);
      return check.errors([edited!]);
    };
    expect(edit(' AND Non_unique = 0', '')).toEqual([]);
    expect(
      edit('throw new DatabaseUnavailableError(', 'throw new DatabaseUnavailableErr('),
    ).toEqual([
      expect.stringMatching(
        /^src\/store\/server-check\.ts\(\d+,\d+\): error TS2552: Cannot find name 'DatabaseUnavailableErr'/,
      ),
    ]);
    expect(
      edit(
        "import type { Queryable } from './deadline.js';",
        "import { Queryable } from './deadline.js';",
      ),
    ).toEqual([expect.stringMatching(/error TS1484: 'Queryable' is a type/)]);
  });

  it('refuses an edit that does not parse, naming the file', () => {
    const file = 'src/store/server-check.ts';
    expect(() => emit(`${read(file)}\nexport const = ;`, file, emitOptions(ROOT))).toThrow(
      /does not build: src\/store\/server-check\.ts: /,
    );
  });
});
