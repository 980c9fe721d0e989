/**
 * Loads the schedules file in a worker thread that ends right after, for the daemon.
 *
 * Why: parsing a large file (YAML with every node's position kept for file:line messages, then
 * zod) allocates tens of MiB for a moment. In the daemon's own heap, V8 grows its young
 * generation for that moment and hands the memory back to the system only minutes later, if at
 * all: an idle runner with 1,000 jobs sat at 112 MiB resident, of which ~30 MiB was the parse. A
 * worker has a heap of its own, freed when it ends; the daemon receives the validated `Config`
 * (plain data, copied by structured clone). The parser's modules are loaded by the worker only.
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

export function loadConfigIsolated(file: string, options: LoadOptions = {}): Promise<Config> {
  return new Promise<Config>((resolve, reject) => {
    const worker = new Worker(new URL('./load-worker.js', import.meta.url), {
      workerData: { file, options },
    });
    let answered = false;
    worker.once('message', (answer: LoadAnswer) => {
      answered = true;
      if (answer.ok) resolve(answer.config);
      else if ('problems' in answer) reject(new ConfigError(answer.problems));
      else if (typeof answer.failure === 'string') reject(new Error(answer.failure));
      else {
        const { code, message, exitCode } = answer.failure;
        reject(new BatonError(code, message, exitCode));
      }
    });
    worker.once('error', (err) => {
      answered = true;
      reject(err);
    });
    worker.once('exit', (code) => {
      if (!answered)
        reject(new Error(`the schedules file's loader ended (code ${code}) without an answer`));
    });
  });
}
