/**
 * A newcomer's first commands in a fresh clone, whatever they type first. `npx baton` before
 * `npm ci` makes npm link the project's own `baton` bin into its exec cache; when that bin was
 * dist/cli/main.js, which a clone does not have until it is built, npm made no link and kept the
 * cache entry, and `npx baton` said "baton: not found" in that folder for good, even after the
 * build. The bin is now a committed launcher (bin/baton.js).
 *
 * npm also runs the project's `prepare` (the build) in that exec cache, before any dependency is
 * installed: a failing build there left the entry broken for good too ("Could not read
 * package.json"), so scripts/prepare.mjs builds only where the compiler is installed.
 *
 * The clone is the files npx reads (package.json, bin/, the prepare script) in a folder of its
 * own, with an exec cache of its own and npm offline: nothing leaves the machine. "Built" is the
 * repository's own dist/ and node_modules/ linked in, as `npm ci` (which builds) leaves them.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { command, ROOT } from '../helpers/cli.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'baton-test-clone-'));
const clone = path.join(tmp, 'baton');
cpSync(path.join(ROOT, 'package.json'), path.join(clone, 'package.json'));
for (const file of ['bin/baton.js', 'scripts/prepare.mjs']) {
  cpSync(path.join(ROOT, file), path.join(clone, file));
}
// A compiler further up the tree (a ~/node_modules, a monorepo's) is not the clone's: the
// prepare script must not build with it, without baton's dependencies.
mkdirSync(path.join(tmp, 'node_modules'));
symlinkSync(path.join(ROOT, 'node_modules/typescript'), path.join(tmp, 'node_modules/typescript'));
const { version } = (await import(path.join(ROOT, 'package.json'), { with: { type: 'json' } }))
  .default as { version: string };

/** `npx baton …` in the clone, with the clone's own npm cache (npx's exec cache is in it). */
const npx = (...args: string[]) =>
  command('npx', ['--yes', 'baton', ...args], {
    cwd: clone,
    env: { npm_config_cache: path.join(tmp, 'npm-cache'), npm_config_offline: 'true' },
    timeoutMs: 60_000,
  });

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('a fresh clone: `npx baton` before `npm ci`, then after it', () => {
  // Four npx calls, each bounded by 60 s: the test's own bound must not come first.
  it(
    'answers --version and says to run `npm ci` before the build, and is the real CLI after it',
    { timeout: 240_000 },
    async () => {
      const early = await npx('--version');
      expect(early.code, early.stderr).toBe(0);
      expect(early.stdout.trim()).toBe(version);

      const unbuilt = await npx('status');
      expect(unbuilt.code).toBe(1);
      expect(unbuilt.stderr).toMatch(/^baton is not built in this folder yet: run `npm ci`/);
      expect(unbuilt.stdout).toBe('');

      symlinkSync(path.join(ROOT, 'node_modules'), path.join(clone, 'node_modules'));
      symlinkSync(path.join(ROOT, 'dist'), path.join(clone, 'dist'));
      const built = await npx('--version');
      expect(built.code, built.stderr).toBe(0);
      expect(built.stdout.trim()).toBe(version);
      // Only the built CLI knows its commands.
      const help = await npx('--help');
      expect(help.code, help.stderr).toBe(0);
      expect(help.stdout).toMatch(/baton start/);
      expect(help.stdout).toMatch(/baton history/);
    },
  );
});
