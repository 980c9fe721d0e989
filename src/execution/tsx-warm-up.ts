/**
 * Warming tsx up in a warm module host (warm-hosts.ts) before its run, so that a `.ts` job's
 * import at the fire costs about what an `.mjs` job's does.
 *
 * A warm host has loaded tsx, but tsx and Node do part of their work the first time a process
 * imports a TypeScript file: tsx's resolve and load hooks, its cache look-up, the lexers, and for
 * a file in a CommonJS package scope the translator that loads a CommonJS module from an
 * `import()`, and tsx's require hook. In a waiting host that first time was the job's own import.
 * So a host for TypeScript jobs (`--tsx-warm-up`) first imports the `.ts` files baton ships for
 * the two scopes (`tsx-warm-up/commonjs/warm-up.ts`, `tsx-warm-up/module/warm-up.ts`), the way
 * it imports a job: some 3–5 ms of CPU off each run's import (docs/design.md, "How a module job
 * starts"). Both scopes, whatever the kind's jobs are in: judging a job's scope would be one more
 * thing to get right (and stale when a package.json changes), for a difference in memory within
 * the noise of measuring it.
 *
 * Not the job's files: a host imports nothing of the job before its run. Shipped and constant,
 * not written anywhere: nothing lands in the job's folder (a read-only deploy works), nothing is
 * left behind by a runner killed with -9, and tsx's disk cache holds one entry for each file,
 * read by every later host — hosts started every second add nothing to it.
 *
 * esbuild is not started ahead. Its first transform in a process starts its service, a thread
 * and the esbuild binary as a child process (~100 ms), which a host would keep while it waits:
 * ~17 MiB PSS and a process more per host. A job's files are read from tsx's disk cache instead,
 * from their second run on, since module-host.ts lets the first run's writes of that cache land
 * (file-requests.ts): only the first run after a change of a file transforms it. tsx's cache stays
 * on for the same reason: with it off (TSX_DISABLE_CACHE), a host could warm up on a fresh file
 * each time without filling the cache, but every run would transform all the job's files again —
 * for a job of ten modules, ~110 ms more CPU per run than reading them from the cache.
 *
 * Warming is an optimisation only: what fails is reported (the host's `warm` message, the
 * runner's log) and the host serves its run as before.
 */
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The host's flag that asks it to warm tsx up (warm-hosts.ts gives it to tsx hosts). */
export const TSX_WARM_UP_FLAG = '--tsx-warm-up';

/** How Node (and tsx) load a file: as a CommonJS module or as an ES module. */
export type PackageScope = 'commonjs' | 'module';
const SCOPES: readonly PackageScope[] = ['commonjs', 'module'];

/** What a host did to warm tsx up, sent in its `warm` message (module-host.ts). */
export interface WarmUpReport {
  /** The scopes whose warm-up file it imported. */
  imported: PackageScope[];
  /** How long warming took. */
  ms: number;
  /** The first thing that failed, if any; the host serves its run all the same. */
  error?: string;
}

/** The shipped warm-up file of a scope (from src/execution and dist/execution alike). */
export function warmUpFile(scope: PackageScope): string {
  return fileURLToPath(new URL(`../../tsx-warm-up/${scope}/warm-up.ts`, import.meta.url));
}

/** Warms tsx up (see the header); never throws. */
export async function warmUpTsx(): Promise<WarmUpReport> {
  const started = performance.now();
  const report: WarmUpReport = { imported: [], ms: 0 };
  for (const scope of SCOPES) {
    try {
      await import(pathToFileURL(warmUpFile(scope)).href);
      report.imported.push(scope);
    } catch (err) {
      report.error ??= err instanceof Error ? err.message : String(err);
    }
  }
  report.ms = Math.round(performance.now() - started);
  return report;
}
