/**
 * Loads the schedules file in a worker thread that ends right after, for the daemon.
 *
 * Why: parsing a large file (YAML with every node's position kept for file:line messages, then
 * zod) allocates a lot for a moment. In the daemon's own heap, V8 grows its young generation for
 * that moment and hands the memory back to the system only minutes later, if at all, so an idle
 * runner would keep the parse's memory resident (bench/README.md has the figures). A worker has a
 * heap of its own, freed when it ends; the daemon receives the validated `Config` (plain data,
 * copied by structured clone). The parser's modules are loaded by the worker only.
 *
 * The result is the same as `loadConfig`'s: the config, or the same ConfigError (exit 78).
 */
import { Worker } from 'node:worker_threads';
import { BatonError, ConfigError, type ConfigProblem } from '../errors.js';
import type { LoadOptions } from './load.js';
import type { Config } from './schema.js';

/** What the worker posts back (see load-worker.ts). */
export type LoadAnswer =
  | { ok: true; config: Config }
  | { ok: false; problems: readonly ConfigProblem[] }
  | { ok: false; failure: { code: string; message: string; exitCode: number } | string };

/** How long the worker may take; a schedules file is read and checked in well under a second. */
export const LOAD_TIMEOUT_MS = 30_000;

export function loadConfigIsolated(
  file: string,
  options: LoadOptions = {},
  timeoutMs = LOAD_TIMEOUT_MS,
): Promise<Config> {
  return new Promise<Config>((resolve, reject) => {
    const worker = new Worker(new URL('./load-worker.js', import.meta.url), {
      workerData: { file, options },
    });
    let answered = false;
    const answer = (settle: () => void) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      settle();
    };
    // A file that never finishes reading (a FIFO, a hung network mount) must not hold up the
    // start, or every later reload behind this one.
    const timer = setTimeout(() => {
      const message = `cannot read: no answer within ${timeoutMs / 1000} s (a FIFO? a hung mount?)`;
      answer(() => reject(new ConfigError([{ file, path: '', message }])));
      void worker.terminate();
    }, timeoutMs);
    worker.once('message', (posted: LoadAnswer) =>
      answer(() => {
        if (posted.ok) resolve(posted.config);
        else if ('problems' in posted) reject(new ConfigError(posted.problems));
        else if (typeof posted.failure === 'string') reject(new Error(posted.failure));
        else {
          const { code, message, exitCode } = posted.failure;
          reject(new BatonError(code, message, exitCode));
        }
      }),
    );
    worker.once('error', (err) => answer(() => reject(err)));
    worker.once('exit', (code) =>
      answer(() =>
        reject(new Error(`the schedules file's loader ended (code ${code}) without an answer`)),
      ),
    );
  });
}
