import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/helpers/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // Six files at a time on a 2-core machine. A file's time is mostly waiting on the clock
    // (every-second fires, heartbeat and claim deadlines), more so since the runners and the
    // operator commands of the protocol and command tests live in the test process
    // (test/in-process). With three files the cores were 45 % idle (2026-12-06, 85ae54c); with
    // five, 12 % (fd2c6ce: a clean-clone .ci/run 405 s), most of it in the first two minutes,
    // when the longest files all wait; with six, 5 % (384 s). Before that tier the suite was
    // CPU-bound: four files took 2,671 s of files and failed on timing. Measure the idle share
    // again before raising it (test/README.md).
    maxWorkers: 6,
    // Longest files first, so that no long file is the tail of the suite (test/helpers/sequencer.ts).
    sequence: { sequencer: LongestFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
