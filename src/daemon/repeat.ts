/**
 * A background loop: `tick` every `everyMs`, each tick after the previous one has settled (a
 * slow database never stacks them up), until `signal` aborts. A tick reports its own failures
 * (log lines); one that throws anyway is logged here and the loop goes on.
 */
import { delay } from '../delay.js';
import type { KeepAlive } from '../keep-alive.js';

import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';

export function repeat(
  everyMs: number,
  tick: () => Promise<void>,
  signal: AbortSignal,
  log: Logger,
  keepAlive?: KeepAlive,
): void {
  void (async () => {
    for (;;) {
      await delay(everyMs, signal, keepAlive);
      if (signal.aborted) return;
      await tick().catch((err: unknown) =>
        log.error({ err: errorMessage(err) }, 'a background task failed'),
      );
    }
  })();
}
