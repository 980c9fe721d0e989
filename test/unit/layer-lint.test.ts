/**
 * The import-layer check (`npm run lint:layers`: scripts/lint-layers.mjs, its rules in
 * .dependency-cruiser.mjs) run on a copy of the project's src/ with wrong imports planted in it:
 * each form an import can take, up a layer from src/store/, and each other rule. The real src/ is
 * never touched.
 *
 * One cruise for all the plants (each in a file of its own, each looked for by name in the
 * report) and one for the clean copy: a cruise reads the whole of src/ with the TypeScript
 * compiler, a few seconds each.
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

interface Plant {
  /** What the case shows. */
  title: string;
  /**
   * Path from the copy's root: every plant's name has `planted` in it, but for a surface of an
   * operator action rewritten with a copy of its own (the report names the surface).
   */
  file: string;
  text: string;
  /** The report's line for it, from `error ` on. */
  report: string | RegExp;
}

const UNRANKED = 'in a folder that has no layer (add it to LAYERS in .dependency-cruiser.mjs)';
const STORE_UP = 'imports a layer above (store → cli)';

const PLANTS: Plant[] = [
  {
    // Else it would drop out of every other rule unseen.
    title: 'a relative import of no module',
    file: 'src/store/planted-nowhere.ts',
    text: "import './planted-missing.js';\n",
    report: /imports a relative path that is not a module: src\/store\/planted-nowhere\.ts → /,
  },
  {
    title: 'a named import',
    file: 'src/store/planted-named.ts',
    text: "import { table } from '../cli/format.js';\nexport const planted = table;\n",
    report: `${STORE_UP}: src/store/planted-named.ts → src/cli/format.ts`,
  },
  {
    // The form the regex of the check this replaced did not see: it wanted a `from`.
    title: 'a bare import, for its side effects',
    file: 'src/store/planted-bare.ts',
    text: "import '../cli/main.js';\n",
    report: `${STORE_UP}: src/store/planted-bare.ts → src/cli/main.ts`,
  },
  {
    title: 'export * from',
    file: 'src/store/planted-export-all.ts',
    text: "export * from '../cli/format.js';\n",
    report: `${STORE_UP}: src/store/planted-export-all.ts → src/cli/format.ts`,
  },
  {
    title: 'export { x } from',
    file: 'src/store/planted-export-named.ts',
    text: "export { table } from '../cli/format.js';\n",
    report: `${STORE_UP}: src/store/planted-export-named.ts → src/cli/format.ts`,
  },
  {
    title: 'a type-only import',
    file: 'src/store/planted-type.ts',
    text: "import type { RunCliOptions } from '../cli/program.js';\nexport type Planted = RunCliOptions;\n",
    report: `${STORE_UP}: src/store/planted-type.ts → src/cli/program.ts`,
  },
  {
    title: 'a dynamic import()',
    file: 'src/store/planted-dynamic.ts',
    text: "export const load = () => import('../cli/main.js');\n",
    report: `${STORE_UP}: src/store/planted-dynamic.ts → src/cli/main.ts`,
  },
  {
    title: 'a dynamic import() over several lines',
    file: 'src/store/planted-dynamic-lines.ts',
    text: "export const load = () =>\n  import(\n    '../cli/main.js'\n  );\n",
    report: `${STORE_UP}: src/store/planted-dynamic-lines.ts → src/cli/main.ts`,
  },
  {
    title: 'a leaf file importing a folder',
    file: 'src/planted-leaf.ts',
    text: "import type { Run } from './store/runs.js';\nexport type Planted = Run;\n",
    report: 'imports a layer above (leaf → store): src/planted-leaf.ts → src/store/runs.ts',
  },
  {
    title: 'a sibling layer (coordination → execution)',
    file: 'src/coordination/planted-sibling.ts',
    text: "import '../execution/watchdog.js';\n",
    report:
      'imports a sibling layer (coordination → execution): src/coordination/planted-sibling.ts → src/execution/watchdog.ts',
  },
  {
    title: 'one command importing another',
    file: 'src/cli/commands/planted-command.ts',
    text: "import './start.js';\n",
    report:
      'one command imports another (share it from src/cli/): src/cli/commands/planted-command.ts → src/cli/commands/start.ts',
  },
  {
    title: 'a cycle inside one folder',
    file: 'src/store/planted-cycle-a.ts',
    text: "import './planted-cycle-b.js';\nexport const a = 1;\n",
    report: /circular: src\/store\/planted-cycle-[ab]\.ts → /,
  },
  {
    title: 'a cycle inside one folder (its other end)',
    file: 'src/store/planted-cycle-b.ts',
    text: "import type { a } from './planted-cycle-a.js';\nexport type B = typeof a;\n",
    report: /circular: src\/store\/planted-cycle-[ab]\.ts → /,
  },
  {
    title: 'a new folder that is not in LAYERS, tied to the rest',
    file: 'src/widgets/planted-tied.ts',
    text: "import { BatonError } from '../errors.js';\nexport class Planted extends BatonError {}\n",
    report: `${UNRANKED}: src/widgets/planted-tied.ts → src/errors.ts`,
  },
  {
    title: 'a new folder that is not in LAYERS, tied to nothing',
    file: 'src/gadgets/planted-alone.ts',
    text: 'export const alone = 1;\n',
    report: `${UNRANKED}: src/gadgets/planted-alone.ts`,
  },
  {
    // A use case written in the HTTP layer again: the write API once spawned `baton backfill`.
    title: 'the HTTP layer starting a process',
    file: 'src/http/planted-spawn.ts',
    text: "import { spawn } from 'node:child_process';\nexport const planted = spawn;\n",
    report:
      'the HTTP layer starts a process (act through src/actions instead): src/http/planted-spawn.ts → child_process',
  },
  {
    // A command that grew its own copy of its action no longer imports the action.
    title: 'a surface of an action that does not use it',
    file: 'src/cli/commands/kill.ts',
    text: '// planted: a kill written here again\nexport const killCommand = {};\n',
    report:
      'cli/commands/kill does not use the kill action (src/actions/kill.ts): src/cli/commands/kill.ts',
  },
];

const scratch: string[] = [];

/** A copy of what the check reads: src/, its config, tsconfig.json, the script; node_modules linked. */
function copyProject(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-layers-'));
  scratch.push(dir);
  cpSync(path.join(ROOT, 'src'), path.join(dir, 'src'), { recursive: true });
  for (const file of [
    'package.json',
    'tsconfig.json',
    '.dependency-cruiser.mjs',
    'scripts/lint-layers.mjs',
  ]) {
    cpSync(path.join(ROOT, file), path.join(dir, file));
  }
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  return dir;
}

/** Runs the copy's check as `npm run lint:layers` runs it; its exit code and all it printed. */
function lintLayers(dir: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(dir, 'scripts/lint-layers.mjs')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output: stripVTControlCharacters(output) }));
  });
}

let clean: Awaited<ReturnType<typeof lintLayers>>;
let planted: Awaited<ReturnType<typeof lintLayers>>;

beforeAll(async () => {
  const cleanCopy = copyProject();
  const plantedCopy = copyProject();
  for (const { file, text } of PLANTS) {
    mkdirSync(path.dirname(path.join(plantedCopy, file)), { recursive: true });
    writeFileSync(path.join(plantedCopy, file), text);
  }
  [clean, planted] = await Promise.all([lintLayers(cleanCopy), lintLayers(plantedCopy)]);
}, 120_000);

afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

it('passes the unplanted copy of src/ with one line', () => {
  expect(clean.output.trim()).toMatch(
    /^imports point down the layers, no cycles \(\d+ modules, \d+ imports; [\d.]+ s\)$/,
  );
  expect(clean.code).toBe(0);
});

describe('fails the planted copy', () => {
  it('with exit code 1', () => {
    expect(planted.code).toBe(1);
  });

  it.each(PLANTS)('naming $title', ({ report }) => {
    const lines = planted.output.split('\n').map((line) => line.trim());
    const expected =
      typeof report === 'string' ? `error ${report}` : new RegExp(`^error ${report.source}`);
    expect(
      lines.some((line) =>
        typeof expected === 'string' ? line === expected : expected.test(line),
      ),
      `no line ${String(expected)} in:\n${planted.output}`,
    ).toBe(true);
  });

  it('and names nothing but the plants', () => {
    const errors = planted.output.split('\n').filter((line) => line.trim().startsWith('error '));
    expect(errors.length).toBeGreaterThanOrEqual(PLANTS.length - 1);
    for (const line of errors) {
      expect(line.includes('planted') || line.includes('does not use the kill action'), line).toBe(
        true,
      );
    }
  });
});
