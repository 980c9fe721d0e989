/**
 * The passes of in-process runners' notifiers (src/daemon/notifier.ts), for the negative checks
 * of notification tests ("told once", "no repeat"): such a check waits for a few more passes of
 * every live notifier — each of which would have delivered a repeat — instead of a sleep. A
 * runner reports each pass it ends as the event `notify:pass` (src/daemon/runner-events.ts).
 */
import type { InProcessRunner } from './in-process-fleet.js';
import { waitFor } from './wait.js';

/**
 * Resolves once every runner's notifier has ended `count` more passes from now (`evaluated`:
 * passes that evaluated the fleet events, and delivered what they found), and `atLeastMs` have
 * passed. The notifier's loop runs one pass at a time, so of the passes that end after the call
 * all but the first began after it too: hence `count` + 1 of them.
 *
 * Both bounds matter to a negative check. The passes: each one would have delivered a repeat
 * that was due. The time: a repeat that a wrong rule would make due only later (a new episode
 * every few seconds, a throttle window that ends too soon) needs the wall clock to come, however
 * short the passes are — so `atLeastMs` is the window such a repeat would fall in.
 */
export async function notifierPasses(
  runners: readonly InProcessRunner[],
  count: number,
  { evaluated = false, atLeastMs = 0 } = {},
): Promise<void> {
  const until = Date.now() + atLeastMs;
  const ended = new Map(runners.map((r) => [r, 0]));
  const offs = runners.map((r) =>
    r.runner.events.on('notify:pass', (pass) => {
      if (pass.evaluated || !evaluated) ended.set(r, ended.get(r)! + 1);
    }),
  );
  const hosts = runners.map((r) => r.host).join(', ');
  try {
    await waitFor(
      `${count} more ${evaluated ? 'evaluating ' : ''}notifier passes of ${hosts}`,
      () => runners.every((r) => ended.get(r)! >= count + 1) && Date.now() >= until,
    );
  } finally {
    offs.forEach((off) => off());
  }
}
