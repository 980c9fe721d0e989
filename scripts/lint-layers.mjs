#!/usr/bin/env node
/**
 * `npm run lint:layers`: dependency-cruiser over src/ with the rules of .dependency-cruiser.mjs
 * (the layers, siblings, commands and cycles; docs/architecture.md draws them). Prints every
 * violation and exits 1, or prints one line.
 *
 * Why not the `depcruise` command itself: it exits with the number of errors, which the system
 * keeps modulo 256, so exactly 256 violations (or 512, …) exit 0 and pass. Through the API the
 * count is whole.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, format } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

// Paths in the rules are from the repository's root, wherever this is started from.
process.chdir(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..'));

const options = await extractDepcruiseOptions('./.dependency-cruiser.mjs');
const tsConfig = extractTSConfig(options.tsConfig?.fileName ?? 'tsconfig.json');
/** @type {import('dependency-cruiser').ICruiseResult} */
const result = (await cruise(['src'], options, {}, { tsConfig })).output;
// From the process's start: loading dependency-cruiser and TypeScript is part of the cost.
const seconds = (performance.now() / 1000).toFixed(1);

if (result.summary.error > 0) {
  // dependency-cruiser 17 gives the `required` rules it reports as used a `from` (its rule
  // normaliser treats them as `forbidden` ones), and then its `format` refuses its own result.
  for (const rule of result.summary.ruleSetUsed.required ?? []) delete rule.from;
  const { output } = await format(result, { outputType: 'err' });
  process.stderr.write(`imports in src/ that point the wrong way:${output}`);
  process.exitCode = 1;
} else {
  const ours = result.modules.filter((m) => m.source.startsWith('src/'));
  const imports = ours.flatMap((m) => m.dependencies).filter((d) => d.resolved.startsWith('src/'));
  console.log(
    `imports point down the layers, no cycles (${ours.length} modules, ${imports.length} imports; ${seconds} s)`,
  );
}
