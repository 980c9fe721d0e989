/**
 * TypeScript module jobs run through tsx, an optional peer dependency: it (with esbuild, about
 * 12 MB) is only needed when a job's `module:` is a `.ts` file, so installing baton does not
 * bring it. Both the schedules file's check and the job's start ask here, so a missing tsx is
 * refused when the file is loaded (exit 78, naming the job), not at the job's first fire.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** `.ts`, `.mts`, `.cts`, `.tsx`: files Node cannot import without a loader. */
export const TYPESCRIPT_FILE = /\.[cm]?tsx?$/;

/** What to tell someone whose TypeScript module job cannot run. */
export const TSX_MISSING =
  'is TypeScript, which needs tsx (an optional peer dependency of baton-cron): ' +
  'install it beside baton-cron (npm i tsx), or compile the job to .js/.mjs';

/**
 * The URL of tsx's loader (`node --import <url>`), resolved from baton's own location, as the
 * job's process will load it; null when tsx is not installed there. The file is looked at each
 * time: Node remembers a resolution, and a runner outlives a `npm uninstall`.
 */
export function tsxLoader(): string | null {
  try {
    const url = import.meta.resolve('tsx');
    return existsSync(fileURLToPath(url)) ? url : null;
  } catch {
    return null;
  }
}
