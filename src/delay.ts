/**
 * A sleep that a stop cuts short: resolves after `ms`, or at once when `signal` aborts — never
 * rejects, so a stopping loop simply goes on to its next check (which sees the stop).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { backgroundRef } from './keep-alive.js';

export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return sleep(ms, undefined, { signal, ref: backgroundRef() }).catch((err: unknown) => {
    if ((err as { name?: string }).name !== 'AbortError') throw err;
  });
}
