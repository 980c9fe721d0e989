#!/usr/bin/env node
/**
 * Fails when src/ has a circular import (CONVENTIONS.md: "no circular imports"). Reads the
 * relative `import … from './x.js'` specifiers of every src/**\/*.ts file — type-only imports
 * included, since they still tie two modules' designs together — and looks for a cycle.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../src');

function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? files(path.join(dir, e.name))
      : e.name.endsWith('.ts')
        ? [path.join(dir, e.name)]
        : [],
  );
}

const graph = new Map();
for (const file of files(root)) {
  const text = readFileSync(file, 'utf8');
  const deps = [...text.matchAll(/(?:import|export)[^'"]*?from\s+['"](\.{1,2}\/[^'"]+)['"]/g)].map(
    (m) => path.resolve(path.dirname(file), m[1].replace(/\.js$/, '.ts')),
  );
  graph.set(file, deps);
}

const state = new Map(); // file → 'visiting' | 'done'
const cycles = [];
function visit(file, trail) {
  if (state.get(file) === 'done') return;
  if (state.get(file) === 'visiting') {
    cycles.push(
      [...trail.slice(trail.indexOf(file)), file].map((f) => path.relative(root, f)).join(' → '),
    );
    return;
  }
  state.set(file, 'visiting');
  for (const dep of graph.get(file) ?? []) visit(dep, [...trail, file]);
  state.set(file, 'done');
}
for (const file of graph.keys()) visit(file, []);

if (cycles.length > 0) {
  console.error(`circular imports in src/:\n  ${cycles.join('\n  ')}`);
  process.exit(1);
}
console.log(`no circular imports (${graph.size} modules)`);
