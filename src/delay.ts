/**
 * A sleep that a stop cuts short: resolves after `ms`, or at once when `signal` aborts — never
 * rejects, so a stopping loop simply goes on to its next check (which sees the stop). Its timer
 * holds the process unless `keepAlive` (the sleeper's root's policy, keep-alive.ts) says not.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { HOLDS_PROCESS, type KeepAlive } from './keep-alive.js';

export function delay(
  ms: number,
  signal?: AbortSignal,
  keepAlive: KeepAlive = HOLDS_PROCESS,
): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return sleep(ms, undefined, { signal, ref: keepAlive.ref }).catch((err: unknown) => {
    if ((err as { name?: string }).name !== 'AbortError') throw err;
  });
}
