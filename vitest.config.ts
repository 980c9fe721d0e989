import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/helpers/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    setupFiles: ['test/helpers/file-boundary.ts'],
    // Four files at a time on a 2-core machine. A file's time is mostly waiting on the clock
    // (every-second fires, heartbeat and claim deadlines), more so since the runners and the
    // operator commands of the protocol and command tests live in the test process
    // (test/in-process). On a quick night six were best (2026-12-06, fd2c6ce: five files 405 s,
    // six 384 s, 5 % idle). On a night when the machine ran at half that speed (2026-12-07, the
    // base 0a02ef5 itself took 637 s), six kept both cores busy (under 2 % idle) and the timing
    // tests failed 2 to 5 per clean-clone run, base and final alike; four took the same wall time
    // (624 s against 632–662 s), a third less CPU (2,316 file-seconds against 3,500) and failed
    // one. Dependable first: measure the idle share and the failures again before raising it
    // (test/README.md).
    maxWorkers: 4,
    // A worker runs one file after another in the same module graph, instead of a fresh process
    // per file: a file's imports (the runner, mysql2, the helpers) are evaluated once per worker,
    // not once per file. Measured in one sitting (2026-12-06, 8adcbd0, vitest alone): 456 → 397
    // CPU-s for the whole suite, 271 → 256 s. What a file leaves running goes on in its worker,
    // so every file ends what it starts in its own hooks; file-boundary.ts fails a file that
    // leaves an in-process runner or a statement trace. test/README.md, "One worker, many files".
    isolate: false,
    // Longest files first, so that no long file is the tail of the suite (test/helpers/sequencer.ts).
    sequence: { sequencer: LongestFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
