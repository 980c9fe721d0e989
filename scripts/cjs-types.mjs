#!/usr/bin/env node
/**
 * Gives CommonJS consumers types they can import (run by `npm run build`, after tsc).
 *
 * The package is ESM (`"type": "module"`), so TypeScript reads dist/*.d.ts as ES modules, and a
 * CommonJS project with `moduleResolution: node16` refuses `import … from 'baton-cron'` there
 * (TS1479), although Node 20.19+ loads the same dist/index.js with `require()` (require(esm)).
 * This copies the declarations into dist/cjs-types/ beside a package.json of
 * `"type": "commonjs"`: the same text, read as CommonJS. package.json's `exports` points the
 * `require` condition's types there; the code behind both conditions is dist/index.js.
 */
import { copyFileSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const dist = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../dist');
const target = path.join(dist, 'cjs-types');

rmSync(target, { recursive: true, force: true });
for (const file of readdirSync(dist, { recursive: true, encoding: 'utf8' })) {
  if (!file.endsWith('.d.ts')) continue;
  mkdirSync(path.dirname(path.join(target, file)), { recursive: true });
  copyFileSync(path.join(dist, file), path.join(target, file));
}
writeFileSync(path.join(target, 'package.json'), '{ "type": "commonjs" }\n');
