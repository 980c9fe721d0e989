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
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

/** Says what to do instead; exit 1 (ExitCode.Failure, src/exit-codes.ts). */
function notReady(why) {
  process.stderr.write(
    `baton ${why}: run \`npm ci\` (it installs the dependencies and builds), then \`npx baton\` again.\n`,
  );
  process.exit(1);
}

if (existsSync(main)) {
  try {
    await import(main.href);
  } catch (err) {
    // A dist/ without its dependencies (copied alone, or a build run with another folder's
    // compiler): said like an unbuilt clone, not as a stack trace. Only a dependency of this
    // package counts; any other error is the CLI's own.
    const missing = /Cannot find package '([^']+)'/.exec(String(err?.message))?.[1];
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !(missing in (pkg.dependencies ?? {}))) throw err;
    notReady(`cannot find its dependency ${missing} here`);
  }
} else if (process.argv.length === 3 && process.argv[2] === '--version') {
  // What the built CLI prints for --version (yargs: the package's version).
  console.log(pkg.version);
} else {
  notReady('is not built in this folder yet');
}
