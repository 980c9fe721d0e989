/**
 * How a runner's runs are stopped, watched and written: the `runs` group of the runner's timings
 * (daemon/timings.ts). Each default is the constant of the module that uses it, with its reason.
 */
import { BOOKKEEPING_WAIT_MAX_MS } from './local-runs.js';
import { FLUSH_MS } from './output-writer.js';
import { KILL_GRACE_MS, KILL_WATCH_MS, LOST_KILL_GRACE_MS } from './run-control.js';

export interface RunTimings {
  /** KILL_GRACE_MS: SIGTERM → SIGKILL of a run stopped by a timeout or a shutdown. */
  killGraceMs: number;
  /** LOST_KILL_GRACE_MS: the same for a run whose lock session is gone. */
  lostKillGraceMs: number;
  /** KILL_WATCH_MS: how often kill requests are looked for (kill-watch.ts). */
  killWatchMs: number;
  /** FLUSH_MS (output-writer.ts): a run's output is gathered this long, then written. */
  outputFlushMs: number;
  /** BOOKKEEPING_WAIT_MAX_MS (local-runs.ts): a fire's wait for a run over but for its verdict. */
  bookkeepingWaitMaxMs: number;
}

export const RUN_TIMINGS: Readonly<RunTimings> = {
  killGraceMs: KILL_GRACE_MS,
  lostKillGraceMs: LOST_KILL_GRACE_MS,
  killWatchMs: KILL_WATCH_MS,
  outputFlushMs: FLUSH_MS,
  bookkeepingWaitMaxMs: BOOKKEEPING_WAIT_MAX_MS,
};
