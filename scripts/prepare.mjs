#!/usr/bin/env node
/**
 * npm's `prepare`: builds baton (`npm run build`) — after `npm ci` or `npm install` in a clone,
 * and for a git dependency — so that a clone works with `npm ci` alone.
 *
 * npm also runs it when `npx baton` is typed in a clone before `npm ci`: it links the project
 * into its exec cache and prepares it there, before any dependency is installed. A failed build
 * then would leave that cache entry broken for good (npx fails in that folder even after the
 * build, "Could not read package.json"). So without the compiler this says what to do and
 * succeeds; the command (bin/baton.js) says it again when run, and works once built.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

// This clone's own compiler, not one found further up (a ~/node_modules, a monorepo's): with
// that one the build would run without baton's dependencies, fail, and break the cache entry.
if (!existsSync(new URL('../node_modules/typescript/package.json', import.meta.url))) {
  console.warn('baton: not built: its dependencies are not installed yet (run `npm ci`)');
  process.exit(0);
}
const npm = process.env.npm_execpath;
const build = npm
  ? spawnSync(process.execPath, [npm, 'run', 'build'], { stdio: 'inherit' })
  : spawnSync('npm', ['run', 'build'], { stdio: 'inherit' });
process.exit(build.status ?? 1);
