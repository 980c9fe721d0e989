#!/usr/bin/env node
/**
 * Fails when an import in src/ points the wrong way (docs/architecture.md draws the layers):
 *
 * - **Up a layer.** Every folder of src/ has a rank; a module imports only from its own folder
 *   or from folders ranked below it. Folders of the same rank are siblings and do not import
 *   each other (coordination and execution meet only in fire/, which is above both).
 * - **Across commands.** A file of src/cli/commands/ does not import another command: what two
 *   commands share lives in src/cli/ (options.ts, format.ts, config-options.ts).
 * - **In a circle.** No cycle among the modules, inside a folder either.
 *
 * Reads the relative `import … from './x.js'` specifiers of every src/**\/*.ts file — type-only
 * imports included, since they still tie two modules' designs together. A dynamic `import()`
 * counts too: loading a module late does not change which way it depends.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../src');

/**
 * Bottom to top. `leaf` is every file directly in src/ (the vocabulary: errors, exit codes, run
 * statuses, lock names, logging, text) except index.ts, the public surface, which is on top.
 */
const LAYERS = [
  ['leaf'],
  ['schedule', 'sdk'],
  ['config'],
  ['store'],
  ['coordination', 'execution', 'notify'],
  ['fire'],
  ['daemon'],
  ['fleet'],
  ['actions'],
  ['http'],
  ['cli', 'library'],
  ['index'],
];
const rankOf = new Map(LAYERS.flatMap((names, rank) => names.map((n) => [n, rank])));

function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? files(path.join(dir, e.name))
      : e.name.endsWith('.ts')
        ? [path.join(dir, e.name)]
        : [],
  );
}

/** The layer a module belongs to: its first folder under src/, or `leaf` / `index`. */
function layerOf(file) {
  const parts = path.relative(root, file).split(path.sep);
  if (parts.length > 1) return parts[0];
  return parts[0] === 'index.ts' ? 'index' : 'leaf';
}

const rel = (f) => path.relative(root, f);
const graph = new Map();
const problems = [];
for (const file of files(root)) {
  const text = readFileSync(file, 'utf8');
  const specifiers = [
    ...text.matchAll(/(?:import|export)[^'"]*?from\s+['"](\.{1,2}\/[^'"]+)['"]/g),
    ...text.matchAll(/import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g),
  ].map((m) => m[1]);
  const deps = specifiers.map((s) => path.resolve(path.dirname(file), s.replace(/\.js$/, '.ts')));
  graph.set(file, deps);
  const from = layerOf(file);
  for (const dep of deps) {
    const to = layerOf(dep);
    if (!rankOf.has(from) || !rankOf.has(to)) {
      problems.push(
        `${rel(file)} → ${rel(dep)}: folder "${rankOf.has(from) ? to : from}" has no layer (add it to LAYERS)`,
      );
    } else if (from !== to && rankOf.get(to) >= rankOf.get(from)) {
      const how = rankOf.get(to) === rankOf.get(from) ? 'a sibling layer' : 'a layer above';
      problems.push(`${rel(file)} → ${rel(dep)}: imports ${how} (${from} → ${to})`);
    }
    const commands = path.join(root, 'cli', 'commands') + path.sep;
    if (file.startsWith(commands) && dep.startsWith(commands)) {
      problems.push(
        `${rel(file)} → ${rel(dep)}: one command imports another (share it from src/cli/)`,
      );
    }
  }
}

const state = new Map(); // file → 'visiting' | 'done'
function visit(file, trail) {
  if (state.get(file) === 'done') return;
  if (state.get(file) === 'visiting') {
    problems.push(`circular: ${[...trail.slice(trail.indexOf(file)), file].map(rel).join(' → ')}`);
    return;
  }
  state.set(file, 'visiting');
  for (const dep of graph.get(file) ?? []) visit(dep, [...trail, file]);
  state.set(file, 'done');
}
for (const file of graph.keys()) visit(file, []);

if (problems.length > 0) {
  console.error(`imports in src/ that point the wrong way:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`imports point down the layers, no cycles (${graph.size} modules)`);
