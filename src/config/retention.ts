/**
 * How short a `retention:` may be: a rule of the configuration (checked when the file is loaded,
 * and by `baton prune --older-than`), owned here so that the store, which prunes, and the
 * config, which refuses, agree without importing each other.
 */
import { formatDuration } from './duration.js';

/**
 * History younger than this is never pruned: `baton explain` and `baton history` must still
 * answer "why did last night's batch not run?", and a runner coming back from an outage reads the
 * last hour (or its `catchUp:` window) to tell missed fires from fires that ran.
 */
export const MIN_RETENTION_MS = 86_400_000;

/**
 * Why `ms` is too short a retention, or null when it is long enough: at least a day, and at least
 * every job's `catchUp:` window — a runner back from an outage runs the latest fire of that window
 * that has no row at all, so a fire whose rows were pruned would run a second time.
 */
export function retentionTooShort(
  ms: number,
  jobs: readonly { name: string; catchUpMs: number | null }[],
): string | null {
  if (ms < MIN_RETENTION_MS) {
    return (
      `${formatDuration(ms)} is shorter than ${formatDuration(MIN_RETENTION_MS)}: baton keeps ` +
      'at least a day of history (what `explain` and the recovery after an outage read)'
    );
  }
  const longest = jobs
    .filter((j) => j.catchUpMs != null && j.catchUpMs > ms)
    .sort((a, b) => b.catchUpMs! - a.catchUpMs!)[0];
  if (!longest) return null;
  return (
    `${formatDuration(ms)} is shorter than the catchUp window of job ${longest.name} ` +
    `(${formatDuration(longest.catchUpMs!)}): after an outage its runner would find a pruned ` +
    'fire unrun and run it again'
  );
}
