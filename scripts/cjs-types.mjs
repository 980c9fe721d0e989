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
import { cpSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const dist = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../dist');
const target = path.join(dist, 'cjs-types');

cpSync(dist, target, {
  recursive: true,
  filter: (src) => src !== target && (!path.basename(src).includes('.') || src.endsWith('.d.ts')),
});
writeFileSync(path.join(target, 'package.json'), '{ "type": "commonjs" }\n');
