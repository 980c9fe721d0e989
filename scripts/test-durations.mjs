#!/usr/bin/env node
/**
 * Refreshes test/helpers/file-durations.json (the order test files start in, see
 * test/helpers/sequencer.ts) from a vitest JSON report:
 *   npx vitest run --reporter=default --reporter=json --outputFile=/tmp/vitest.json
 *   node scripts/test-durations.mjs /tmp/vitest.json
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';

const report = process.argv[2];
if (!report) {
  console.error('usage: node scripts/test-durations.mjs <vitest JSON report>');
  process.exit(64);
}
const { testResults } = JSON.parse(readFileSync(report, 'utf8'));
const seconds = testResults
  .map((file) => [
    relative(process.cwd(), file.name).split('\\').join('/'),
    Math.round((file.endTime - file.startTime) / 100) / 10,
  ])
  .sort((a, b) => b[1] - a[1]);
writeFileSync(
  'test/helpers/file-durations.json',
  `${JSON.stringify(Object.fromEntries(seconds), null, 2)}\n`,
);
console.log(`test/helpers/file-durations.json: ${seconds.length} files`);
