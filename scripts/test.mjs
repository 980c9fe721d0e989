#!/usr/bin/env node
/**
 * `npm test` after the build: the suite (vitest) and the static checks (type check, eslint,
 * prettier, the import layers) at once, the checks at a lower CPU priority.
 *
 * Why at once: the suite's first minute and a half is its longest files, which mostly wait on
 * the clock (every-second fires, stalls, leases), and a 2-core machine is half idle then; the
 * checks, run one after another before the suite, took some 35 s of wall time for about 50 s of
 * CPU (2026-12-06). Niced, they use that idle time and yield to the suite's runners when it is
 * busy, so the guarantee tests see no more load than a busy neighbour (which they must bear
 * anyway: test/README.md, "Load").
 *
 * The checks' output is held, and a failed check's printed after the suite's, so neither
 * interleaves with the other. The exit code is the suite's if it failed, else the first failed
 * check's. Arguments go to vitest (`npm test -- test/unit`).
 */
import { spawn } from 'node:child_process';
import os from 'node:os';

const CHECK_PRIORITY = 10;

/** The checks are package.json's scripts (`typecheck`, `lint:*`), so they cannot drift apart. */
const checks = ['typecheck', 'lint:eslint', 'lint:format', 'lint:layers'].map((script) => ({
  name: script,
  command: 'npm',
  args: ['run', '--silent', script],
}));

/** Runs `command` with its output held; resolves with its exit code and that output. */
function held({ name, command, args }) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      os.setPriority(child.pid, CHECK_PRIORITY);
    } catch {
      // Not permitted here: the check runs at normal priority, which is only slower.
    }
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', (err) => resolve({ name, code: 1, output: String(err) }));
    child.on('close', (code, signal) => resolve({ name, code: code ?? 1, output, signal }));
  });
}

function suite(args) {
  return new Promise((resolve) => {
    const child = spawn('npx', ['--no-install', 'vitest', 'run', ...args], { stdio: 'inherit' });
    child.on('error', () => resolve(1));
    child.on('close', (code) => resolve(code ?? 1));
  });
}

const checking = Promise.all(checks.map(held));
const suiteCode = await suite(process.argv.slice(2));
const results = await checking;

let exitCode = suiteCode;
process.stdout.write(
  `\nstatic checks: ${results.map(({ name, code }) => `${name} ${code === 0 ? 'ok' : 'FAILED'}`).join(' · ')}\n`,
);
for (const { name, code, output } of results) {
  if (code === 0) continue;
  process.stdout.write(
    `\n── ${name} (exit ${code}):\n${output.endsWith('\n') ? output : `${output}\n`}`,
  );
  if (exitCode === 0) exitCode = code;
}
process.exit(exitCode);
