/**
 * The setup file (vitest.config.ts `setupFiles`): vitest loads it before every test file. A
 * worker runs one file after another in the same process (`isolate: false`), so what a file
 * leaves running (leftovers.ts: in-process runners, statement traces) would go on under the files
 * after it and make them fail for another file's reason.
 *
 * - Its `afterAll`, the file's last hook, ends what the file left and fails that file, naming
 *   each thing and the file that started it.
 * - Before the file, it ends what an earlier file left without that hook having run (an earlier
 *   `afterAll` of that file threw or timed out, so that file has failed already) and says so on
 *   stderr, without failing this file, which is not to blame.
 */
import { afterAll } from 'vitest';
import { endLeftovers } from './leftovers.js';

const earlier = await endLeftovers();
if (earlier.length > 0) {
  process.stderr.write(
    `file-boundary: ended what an earlier file left running (its hooks failed):\n  ${earlier.join('\n  ')}\n`,
  );
}

afterAll(async () => {
  const left = await endLeftovers();
  if (left.length > 0) {
    throw new Error(
      `this file left running what it must end in its own hooks:\n  ${left.join('\n  ')}`,
    );
  }
});
