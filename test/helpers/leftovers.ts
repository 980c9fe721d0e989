/**
 * What a test file has started and must end in its own hooks: in-process runners, statement
 * traces. A worker runs file after file in one process (vitest.config.ts `isolate: false`), so
 * what a file forgot would go on under the next files — a runner firing and taking CPU, a trace
 * recording every later statement. file-boundary.ts ends what is left and says which file left
 * it. A module of its own so that the setup file, loaded for every file, loads no runner.
 */
import { expect } from 'vitest';

interface Leftover {
  readonly what: string;
  /** The test file that started it (relative to the repository). */
  readonly file: string;
  end(): unknown;
}

const open = new Set<Leftover>();

/** The test file running now, relative to the repository (`test/e2e/….test.ts`). */
export function runningTestFile(): string {
  const testPath = expect.getState().testPath ?? '(outside a test file)';
  return testPath.replace(/^.*?\/test\//, 'test/');
}

/** How long ending what is left may take before the boundary reports it as hung. */
const END_WITHIN_MS = 30_000;

/**
 * Records `what` as started by the running test file, ended by `end` if the file leaves it;
 * returns the function to call once the file has ended it itself.
 */
export function mustEnd(what: string, end: () => unknown): () => void {
  const leftover = { what, file: runningTestFile(), end };
  open.add(leftover);
  return () => open.delete(leftover);
}

/**
 * Ends everything still open; returns one line per thing ("what, started by file"), and says
 * so if ending took longer than END_WITHIN_MS rather than hang the hook.
 */
export async function endLeftovers(): Promise<string[]> {
  const left = [...open];
  open.clear();
  if (left.length === 0) return [];
  const lines = left.map((l) => `${l.what}, started by ${l.file}`);
  let timer: NodeJS.Timeout | undefined;
  const ended = await Promise.race([
    Promise.allSettled(left.map(async (l) => l.end())).then(() => true),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), END_WITHIN_MS))),
  ]).finally(() => clearTimeout(timer));
  if (!ended) lines.push(`(ending them took over ${END_WITHIN_MS / 1000} s: some may still run)`);
  return lines;
}
