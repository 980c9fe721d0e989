/**
 * Issue 36: the composition root owns all state. No module of src/ keeps mutable state of its own
 * at module level — a `let` or `var`, or a `const` holding anything made with `new` (a Map, a
 * class's instance…; a URL or a Date is a value) — outside the list below, each entry with its reason; docs/architecture.md ("State that
 * stays at module level, and why") says the same. A lookup table declared `ReadonlyMap` or
 * `ReadonlySet` is not state: the compiler keeps it unchanged. Read with the TypeScript compiler
 * (not a regex), so `export let`, a declaration list and an `as` cast all count.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

/** `file: name` → why it stays. Keep in step with docs/architecture.md. */
const ALLOWED: Record<string, string> = {
  // Entries of processes of their own: the module is that process's composition root.
  'src/execution/spawner.ts: runs': "the spawner process's entry: its runs",
  'src/execution/spawner.ts: lapsed': "the spawner process's entry: runs stopped by its lease",
  'src/execution/spawner.ts: lease': "the spawner process's entry: its runner's lease",
  'src/execution/spawner.ts: processes': "the spawner process's entry: its runs' processes",
  'src/execution/module-host.ts: settled': "a module job's host process's entry: its one run",
  'src/config/load-worker.ts: answer': "the config loader worker's entry: its one answer",
  'src/cli/usage.ts: invocation': "the CLI process's record of its argv",
  'src/cli/usage.ts: matched': "the CLI process's record of the command its argv matched",
  // Caches of pure functions: what they hold is what the function would compute again.
  'src/schedule/cron.ts: knownTimeZones': 'memo: the time zones Intl accepted',
  'src/schedule/cron.ts: calculators': 'memo: croner calculators by expression (WeakRef)',
  'src/schedule/zoned.ts: wallFormats': 'memo: one wall-clock formatter per time zone',
  'src/schedule/cron.ts: forgetCalculator': 'memo: forgets a collected calculator',
  'src/cli/times.ts: localFormats': 'memo: Intl.DateTimeFormat by zone',
  'src/execution/job-environment.ts: readThisTurn':
    "memo: process.env's entries, for the rest of the event loop's turn",
  'src/http/dashboard/page.ts: built': 'memo: the dashboard page, built once from constants',
  'src/http/dashboard/overview.ts: wordsCache': 'memo: rendered words by input',
  // Weakly keyed by an object whose owner owns the entry's life (it goes with the key).
  'src/store/run-verdicts.ts: verdictBatchers': "a pool's verdict batcher, keyed by the pool",
  'src/store/host-slots.ts: slotsByPool': "the hosts' slots read on a pool, keyed by the pool",
  'src/sdk/unique-key.ts: verified': "a job's connection's checked unique keys, by connection",
  'src/sdk/server-flavor.ts: cache': "a job's connection's server facts, by connection",
  'src/sdk/connection.ts: broken': "a job's connections known broken",
};

/** The browser's script is a page of its own (its tsconfig beside it), not a Node module. */
const NOT_NODE = 'src/http/dashboard/browser/';

/** Made with `new` but values, used as constants: not state. */
const VALUES: ReadonlySet<string> = new Set(['URL', 'Date']);

function unwrap(e: ts.Expression): ts.Expression {
  let x = e;
  while (
    ts.isAsExpression(x) ||
    ts.isSatisfiesExpression(x) ||
    ts.isParenthesizedExpression(x) ||
    ts.isTypeAssertionExpression(x)
  )
    x = x.expression;
  return x;
}

/** A declared type that the compiler keeps unchanged: ReadonlyMap, ReadonlySet, readonly T[]. */
function readonlyType(type: ts.TypeNode | undefined): boolean {
  if (!type) return false;
  if (ts.isTypeReferenceNode(type)) {
    const name = type.typeName.getText();
    return name === 'ReadonlyMap' || name === 'ReadonlySet' || name === 'ReadonlyArray';
  }
  return ts.isTypeOperatorNode(type) && type.operator === ts.SyntaxKind.ReadonlyKeyword;
}

/** `file: name — what` for each module-level piece of mutable state of `text`. */
export function moduleState(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  for (const statement of source.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    const list = statement.declarationList;
    const kind =
      list.flags & ts.NodeFlags.Let ? 'let' : list.flags & ts.NodeFlags.Const ? 'const' : 'var';
    for (const d of list.declarations) {
      const name = d.name.getText(source);
      if (kind !== 'const') {
        found.push(`${file}: ${name} — a module-level ${kind}`);
        continue;
      }
      const init = d.initializer && unwrap(d.initializer);
      if (!init || !ts.isNewExpression(init) || readonlyType(d.type)) continue;
      const made = init.expression.getText(source);
      if (!VALUES.has(made)) found.push(`${file}: ${name} — a module-level new ${made}`);
    }
  }
  return found;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

function srcState(): { found: string[]; files: string[] } {
  const files = sources(path.join(ROOT, 'src'))
    .map((f) => path.relative(ROOT, f).split(path.sep).join('/'))
    .filter((f) => !f.startsWith(NOT_NODE));
  const found = files.flatMap((f) => moduleState(f, readFileSync(path.join(ROOT, f), 'utf8')));
  return { found, files };
}

const key = (finding: string) => finding.split(' — ')[0]!;

describe('module-level state in src/', () => {
  it('is only what the allowlist names, with its reason', () => {
    const { found, files } = srcState();
    expect(files.length).toBeGreaterThan(100);
    expect(found.filter((f) => !(key(f) in ALLOWED))).toEqual([]);
  });

  it('has no allowlist entry left over (each names state that is still there)', () => {
    const seen = new Set(srcState().found.map(key));
    expect(Object.keys(ALLOWED).filter((k) => !seen.has(k))).toEqual([]);
  });

  it('is listed in docs/architecture.md, entry by entry', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## State that stays at module level, and why'));
    expect(section.length).toBeLessThan(doc.length);
    for (const k of Object.keys(ALLOWED)) {
      const [file, name] = k.split(': ') as [string, string];
      expect(section, k).toContain(`\`${file.replace(/^src\//, '')}\``);
      expect(section, k).toContain(`\`${name}\``);
    }
  });

  it('fails on a planted `let`, `var`, `export let` and `new Map` (a copy of a real file)', () => {
    const file = 'src/daemon/loop.ts';
    const real = readFileSync(path.join(ROOT, file), 'utf8');
    expect(moduleState(file, real)).toEqual([]);
    const planted = [
      'let x = 0;',
      'var y = 1;',
      'export let z: number | null = null;',
      'const seen = new Map<string, number>();',
      'const names = new Set([1]) as Set<number>;',
      'const watch = new RunProcesses();',
      // Not state: a constant, a table the compiler keeps unchanged, a let inside a function.
      'const LIMIT = 3;',
      "const KNOWN: ReadonlySet<string> = new Set(['a']);",
      "const HERE = new URL('.', import.meta.url);",
      'function f(): number { let local = 1; return local; }',
    ].join('\n');
    expect(moduleState(file, `${real}\n${planted}\n`)).toEqual([
      `${file}: x — a module-level let`,
      `${file}: y — a module-level var`,
      `${file}: z — a module-level let`,
      `${file}: seen — a module-level new Map`,
      `${file}: names — a module-level new Set`,
      `${file}: watch — a module-level new RunProcesses`,
    ]);
  });
});
