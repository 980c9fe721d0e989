import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/helpers/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    setupFiles: ['test/helpers/file-boundary.ts'],
    // Six files at a time on a 2-core machine. A file's time is mostly waiting on the clock
    // (every-second fires, heartbeat and claim deadlines), more so since the runners and the
    // operator commands of the protocol and command tests live in the test process
    // (test/in-process). With three files the cores were 45 % idle (2026-12-06, 85ae54c); with
    // five, 12 % (fd2c6ce: a clean-clone .ci/run 405 s), most of it in the first two minutes,
    // when the longest files all wait; with six, 5 % (384 s). Before that tier the suite was
    // CPU-bound: four files took 2,671 s of files and failed on timing. Measure the idle share
    // again before raising it (test/README.md).
    maxWorkers: 6,
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
