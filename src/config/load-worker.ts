/**
 * The worker thread of load-isolated.ts: loads the schedules file, posts the answer, and ends
 * (its heap, with everything the parse allocated, goes with it).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { BatonError, ConfigError } from '../errors.js';
import type { LoadAnswer } from './load-isolated.js';
import { loadConfig, type LoadOptions } from './load.js';

const { file, options } = workerData as { file: string; options: LoadOptions };
let answer: LoadAnswer;
try {
  answer = { ok: true, config: loadConfig(file, options) };
} catch (err) {
  if (err instanceof ConfigError) answer = { ok: false, problems: err.problems };
  else if (err instanceof BatonError) {
    answer = {
      ok: false,
      failure: { code: err.code, message: err.message, exitCode: err.exitCode },
    };
  } else answer = { ok: false, failure: err instanceof Error ? err.message : String(err) };
}
parentPort!.postMessage(answer);
