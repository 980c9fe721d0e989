/**
 * The graph of `after:` edges between a file's jobs (docs/dependencies.md): who runs after whom.
 * Plain data over validated job definitions; the runner, the commands and the dashboard read it.
 */
import type { JobDefinition } from './schema.js';

/** The jobs that run after `parent` (its children), in the file's order. */
export function childrenOf(jobs: readonly JobDefinition[], parent: string): JobDefinition[] {
  return jobs.filter((j) => j.after?.jobs.includes(parent));
}
