/**
 * Runs after every test file (vitest.config.ts `setupFiles`). A worker runs one file after
 * another in the same process (`isolate: false`), so what a file leaves running would go on under
 * the files after it — firing, holding locks, taking CPU — and make them fail for a reason of
 * another file's. A file that leaves an in-process runner running fails here, naming it, and the
 * runner is stopped so that the next file starts clean.
 */
import { afterAll } from 'vitest';
import { stopRunnersLeftRunning } from './living-runners.js';

afterAll(async () => {
  const left = await stopRunnersLeftRunning();
  if (left.length > 0) {
    throw new Error(
      `this file left in-process runners running (${left.join(', ')}): stop them in its own hooks`,
    );
  }
});
