/**
 * Options of the commands that judge the fleet (`status`, `explain`). Apart from options.ts so
 * that `baton start`, which loads options.ts, does not load the fleet's judgement with it.
 */
import { DEFAULT_GONE_AFTER_MS } from '../fleet/status.js';
import { durationOption } from './options.js';

/** `--gone-after`, shared by `status` and `explain`: when a runner without heartbeat is gone. */
export const GONE_AFTER_OPTION = {
  type: 'string',
  default: `${DEFAULT_GONE_AFTER_MS / 1000}s`,
  describe:
    'a runner without a heartbeat for this long is gone (three registry heartbeats of ' +
    'the default "baton start --registry-interval 5s"; keep it at least three intervals)',
} as const;

export function goneAfterMs(args: { goneAfter: string }): number {
  return durationOption('gone-after', args.goneAfter);
}
