/**
 * `npm run mutants`: applies each guarantee mutant (catalogue.ts) to a scratch copy of this tree,
 * builds it, and runs the mutant's killer tests there; fails if any mutant survives.
 *
 *   npm run mutants                      every mutant, four at a time (--jobs 4; the suite runs
 *                                        six files at a time, and these are its files)
 *   npm run mutants -- --only a,b        just these
 *   npm run mutants -- --jobs 1          one mutant at a time (each runs one test file)
 *   npm run mutants -- --list            the catalogue as the table in test/README.md
 *   npm run mutants -- --no-control      skip the unmutated control run
 *   npm run mutants -- --keep            keep the scratch copies (their paths are printed)
 *   npm run mutants -- --tests-from REV  judge by REV's tests, whole killer files (was it a hole?)
 *
 * First a control run: the killers on an unmutated copy must all pass (and exist), or a "killed"
 * mutant would prove nothing. Before its killers run, each mutant must change what runs
 * (effect.ts: the schema its migrations build, the JavaScript its code compiles to); one that
 * does not is "no effect", which fails the run as a survivor does: it cannot be killed, and its
 * guarantee has no mutant. A mutant counts as killed when one of its killers has a failing
 * test — the first failure is printed, to check that it failed for the reason meant — and it
 * survives when they all pass. Nothing in this tree is touched but vitest's cache
 * (node_modules/.vite), which the copies reach through their link to node_modules. Ctrl-C stops
 * every test process and removes the copies.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { MUTANTS } from './catalogue.js';
import { applyEdits, catalogueTable } from './apply.js';
import { buildFromBuilt, EditTypeCheck, emitsAlone } from './build.js';
import { editsWithoutEffect } from './effect.js';
import type { Killer, Mutant } from './mutant.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const KILLER_TIMEOUT_MS = 10 * 60_000;
/**
 * `--tests-from REV`: the scratch copies get REV's test/ folder, and each killer file runs whole
 * (REV's tests have other names). Shows whether a mutant was a hole in that revision's suite.
 */
let testsFrom: string | null = null;

interface Verdict {
  mutant: Mutant;
  result: 'killed' | 'survived' | 'no-effect' | 'error';
  by?: Killer;
  detail: string;
  seconds: number;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      only: { type: 'string' },
      jobs: { type: 'string', default: '4' },
      list: { type: 'boolean', default: false },
      'no-control': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      'tests-from': { type: 'string' },
    },
  });
  if (values.list) {
    process.stdout.write(catalogueTable(MUTANTS) + '\n');
    return 0;
  }
  const only = values.only?.split(',').filter(Boolean);
  const unknown = only?.filter((id) => !MUTANTS.some((m) => m.id === id)) ?? [];
  if (unknown.length > 0) {
    process.stderr.write(`unknown mutant(s): ${unknown.join(', ')} (see --list)\n`);
    return 64;
  }
  const chosen = only ? MUTANTS.filter((m) => only.includes(m.id)) : MUTANTS;
  const jobs = Math.max(1, Number(values.jobs) || 1);
  const base = mkdtempSync(path.join(os.tmpdir(), 'baton-mutants-'));
  const keep = values.keep;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      // The test processes run in process groups of their own (their private servers' janitors
      // go with them): stop them all, then leave nothing behind.
      for (const child of live) signalGroup(child, 'SIGKILL');
      if (!keep) rmSync(base, { recursive: true, force: true });
      process.exit(130);
    });
  }
  testsFrom = values['tests-from'] ?? null;
  log(
    `${chosen.length} mutant(s), ${jobs} at a time, scratch copies in ${base}` +
      (testsFrom ? `; judged by the tests of ${testsFrom} (whole killer files)` : ''),
  );
  const started = Date.now();
  try {
    // Built by tsc once; each mutant's copy takes its dist/ and emits its edited files again
    // (build.ts). The control run's killers run in it.
    let unmutated: Built;
    try {
      const dir = await prepare(base, 'unmutated', [], null);
      unmutated = { dir, typeCheck: new EditTypeCheck(dir) };
    } catch (err) {
      process.stderr.write(`the unmutated tree: ${(err as Error).message}\n`);
      return 1;
    }
    if (!values['no-control']) {
      const problem = await control(unmutated.dir, chosen, jobs);
      if (problem) {
        process.stderr.write(`control run failed: ${problem}\n`);
        return 1;
      }
    }
    const verdicts: Verdict[] = [];
    const queue = [...chosen];
    await Promise.all(
      Array.from({ length: jobs }, async () => {
        for (let m = queue.shift(); m; m = queue.shift()) {
          const v = await tryMutant(base, unmutated, m, keep);
          verdicts.push(v);
          log(
            `${v.result.toUpperCase().padEnd(9)} ${m.id}` +
              (v.by ? ` by ${v.by.file} › ${v.by.test}` : '') +
              ` (${v.seconds} s): ${v.detail}`,
          );
        }
      }),
    );
    const bad = verdicts.filter((v) => v.result !== 'killed');
    const minutes = ((Date.now() - started) / 60_000).toFixed(1);
    log(
      `${verdicts.length - bad.length} of ${verdicts.length} mutants killed in ${minutes} min` +
        (bad.length
          ? `; not killed: ${bad.map((v) => `${v.mutant.id} (${v.result})`).join(', ')}`
          : ''),
    );
    return bad.length === 0 ? 0 : 1;
  } finally {
    if (!keep) rmSync(base, { recursive: true, force: true });
  }
}

/** The killers on an unmutated copy: each must exist and pass (`jobs` files at a time). */
async function control(
  dir: string,
  mutants: readonly Mutant[],
  jobs: number,
): Promise<string | null> {
  const t0 = Date.now();
  const byFile = new Map<string, Set<string>>();
  for (const m of mutants) {
    for (const k of m.killers) byFile.set(k.file, (byFile.get(k.file) ?? new Set()).add(k.test));
  }
  const queue = [...byFile];
  const problems: string[] = [];
  await Promise.all(
    Array.from({ length: jobs }, async () => {
      for (let next = queue.shift(); next && problems.length === 0; next = queue.shift()) {
        const [file, tests] = next;
        const run = await runTests(dir, file, testsFrom ? [] : [...tests]);
        if (run.error) problems.push(`${file}: ${run.error}`);
        else if (run.passed + run.failed === 0)
          problems.push(`${file} ran no test (a hook failed?)`);
        for (const test of testsFrom ? [] : tests) {
          if (!run.titles.some((t) => t.includes(test))) {
            problems.push(`${file} has no test named "${test}"`);
          }
        }
        if (run.failed > 0) problems.push(`${file} fails without any mutant: ${run.firstFailure}`);
      }
    }),
  );
  if (problems.length > 0) return problems.join('; ');
  log(`control: every killer passes on the unmutated tree (${seconds(t0)} s)`);
  return null;
}

async function tryMutant(
  base: string,
  unmutated: Built,
  mutant: Mutant,
  keep: boolean,
): Promise<Verdict> {
  const t0 = Date.now();
  const verdict = (result: Verdict['result'], detail: string, by?: Killer): Verdict => ({
    mutant,
    result,
    detail,
    seconds: seconds(t0),
    ...(by ? { by } : {}),
  });
  let dir: string;
  try {
    const without = await editsWithoutEffect(ROOT, mutant.edits);
    if (without.length > 0) return verdict('no-effect', without.join('; '));
    dir = await prepare(base, mutant.id, mutant.edits, unmutated);
  } catch (err) {
    return verdict('error', (err as Error).message);
  }
  try {
    const files = new Set<string>();
    for (const killer of mutant.killers) {
      if (testsFrom && files.has(killer.file)) continue;
      files.add(killer.file);
      const run = await runTests(dir, killer.file, testsFrom ? [] : [killer.test]);
      if (run.error) return verdict('error', `${killer.file}: ${run.error}`);
      if (run.passed + run.failed === 0) {
        return verdict('error', `${killer.file} ran no test named "${killer.test}"`);
      }
      if (run.failed > 0) return verdict('killed', run.firstFailure, killer);
    }
    return verdict('survived', `every killer passed: ${mutant.what}`);
  } finally {
    if (keep) log(`  ${mutant.id}: ${dir}`);
  }
}

/** The unmutated copy, built by tsc, and the type check of edits against it (build.ts). */
interface Built {
  dir: string;
  typeCheck: EditTypeCheck;
}

/**
 * A copy of the tree (tracked and new files) with the edits applied, built: from `built`'s build
 * where only files compiled alone were edited, their types checked (build.ts), else by tsc.
 */
async function prepare(
  base: string,
  name: string,
  edits: Mutant['edits'],
  built: Built | null,
): Promise<string> {
  const dir = path.join(base, name);
  const listed = spawnSync(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    {
      cwd: ROOT,
      encoding: 'utf8',
    },
  );
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  for (const file of listed.stdout.split('\0').filter(Boolean)) {
    const from = path.join(ROOT, file);
    if (!existsSync(from)) continue; // deleted in the work tree
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    cpSync(from, path.join(dir, file));
  }
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  if (testsFrom) {
    rmSync(path.join(dir, 'test'), { recursive: true, force: true });
    const archive = spawnSync('sh', [
      '-c',
      // REV's vitest.config.ts too: it names REV's setup files and sequencer, and how REV's
      // files were meant to run (in a process each, before isolate: false).
      `git -C "$1" archive "$2" test vitest.config.ts | tar -x -C "$3"`,
      'sh',
      ROOT,
      testsFrom,
      dir,
    ]);
    if (archive.status !== 0) throw new Error(`no test/ at ${testsFrom}: ${archive.stderr}`);
  }
  const edited = applyEdits(edits, (f) => readFileSync(path.join(dir, f), 'utf8'));
  for (const { file, text } of edited) writeFileSync(path.join(dir, file), text);
  if (built && emitsAlone(edited.map((e) => e.file))) {
    const errors = built.typeCheck.errors(edited);
    if (errors.length > 0) throw new Error(`does not build: ${errors.join('; ')}`);
    buildFromBuilt(dir, built.dir, edited);
    return dir;
  }
  // Not spawnSync: the other job's tests go on meanwhile, and their output must be read.
  const build = await run(
    process.execPath,
    ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'],
    dir,
  );
  if (build.code !== 0) throw new Error(`does not build: ${build.output.trim()}`);
  // The rest of `npm run build`: the dashboard's browser script (its own project: without it
  // `baton start --http` refuses to start, and every killer that serves the dashboard fails)…
  const browser = await run(
    process.execPath,
    ['node_modules/typescript/bin/tsc', '-p', 'src/http/dashboard/browser'],
    dir,
  );
  if (browser.code !== 0) throw new Error(`does not build: ${browser.output.trim()}`);
  // … and the CommonJS copy of the declarations.
  const types = await run(process.execPath, ['scripts/cjs-types.mjs'], dir);
  if (types.code !== 0) throw new Error(`scripts/cjs-types.mjs failed: ${types.output.trim()}`);
  return dir;
}

/** Runs a command to its end; its exit code and output. */
function run(
  file: string,
  args: string[],
  cwd: string,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const take = (d: Buffer) => (output = (output + d.toString()).slice(-8_000));
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', (err) => resolve({ code: null, output: err.message }));
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** The test processes running now, each the leader of its process group. */
const live = new Set<ChildProcess>();

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // already gone
  }
}

interface TestRun {
  passed: number;
  failed: number;
  titles: string[];
  firstFailure: string;
  error?: string;
}

/** Runs the named tests of one file with vitest in `dir`; reads its JSON report. */
function runTests(dir: string, file: string, tests: string[]): Promise<TestRun> {
  const report = path.join(dir, `.vitest-report-${Date.now()}-${Math.random()}.json`);
  const pattern = tests.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
  const filter = pattern ? ['-t', pattern] : [];
  const env: NodeJS.ProcessEnv = {};
  // As the test helpers do for baton's processes: no BATON_* setting of the caller's shell —
  // but the suite's own settings (BATON_TEST_*: another server, another mariadbd) pass.
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('BATON_') || k.startsWith('BATON_TEST_')) env[k] = v;
  }
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        'node_modules/vitest/vitest.mjs',
        'run',
        file,
        ...filter,
        '--reporter=json',
        `--outputFile=${report}`,
      ],
      { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'], detached: true },
    );
    live.add(child);
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
    const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), KILLER_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      live.delete(child);
      clearTimeout(timer);
      if (!existsSync(report)) {
        resolve({
          passed: 0,
          failed: 0,
          titles: [],
          firstFailure: '',
          error: `vitest wrote no report (exit ${code ?? signal}): ${stderr.trim().slice(-1_000)}`,
        });
        return;
      }
      let json: VitestReport;
      try {
        json = JSON.parse(readFileSync(report, 'utf8')) as VitestReport;
      } catch (err) {
        const error = `vitest's report is unreadable (${(err as Error).message})`;
        resolve({ passed: 0, failed: 0, titles: [], firstFailure: '', error });
        return;
      }
      const results = json.testResults.flatMap((f) => f.assertionResults);
      const ran = results.filter((r) => r.status === 'passed' || r.status === 'failed');
      const failed = ran.filter((r) => r.status === 'failed');
      // A file that fails outside any test (an error in a hook, a crash) counts as failed too.
      const fileErrors = json.testResults.filter((f) => f.status === 'failed' && f.message);
      resolve({
        passed: ran.length - failed.length,
        failed: failed.length + (failed.length === 0 && ran.length > 0 ? fileErrors.length : 0),
        titles: results.map((r) => r.title),
        firstFailure: firstLine(failed[0]?.failureMessages[0] ?? fileErrors[0]?.message ?? ''),
      });
    });
  });
}

interface VitestReport {
  testResults: {
    status: string;
    message?: string;
    assertionResults: { title: string; status: string; failureMessages: string[] }[];
  }[];
}

function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .find((l) => l.trim())
      ?.trim()
      .slice(0, 300) ?? ''
  );
}

function seconds(since: number): number {
  return Math.round((Date.now() - since) / 1000);
}

function log(line: string): void {
  process.stdout.write(`[mutants ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}

process.exitCode = await main();
