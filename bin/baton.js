#!/usr/bin/env node
/**
 * The `baton` command: the built CLI, dist/cli/main.js. This launcher is committed, not built,
 * so that `npx baton` typed in a fresh clone before anything else finds a file to link. npm's
 * exec cache keeps the link it makes on that first call; when the bin was dist/cli/main.js the
 * link was never made (no dist/ yet), and `npx baton` said "baton: not found" in that folder for
 * good. Now the link exists from the start and reaches the real CLI once `npm ci` has built it.
 */
import { existsSync, readFileSync } from 'node:fs';

const main = new URL('../dist/cli/main.js', import.meta.url);
if (existsSync(main)) {
  await import(main.href);
} else if (process.argv.length === 3 && process.argv[2] === '--version') {
  // What the built CLI prints for --version (yargs: the package's version).
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  console.log(pkg.version);
} else {
  process.stderr.write(
    'baton is not built in this folder yet: run `npm ci` (it installs the dependencies and ' +
      'builds), then `npx baton` again.\n',
  );
  // ExitCode.Failure (src/exit-codes.ts): not something sysexits names.
  process.exit(1);
}
