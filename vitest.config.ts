import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/helpers/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // End-to-end files start real runner processes against the shared MariaDB and mostly wait
    // on the clock (every-second fires, heartbeat deadlines): three files at a time on a 2-core
    // machine. With two, the suite took 16.5 minutes of vitest on the 2026-12-05 VM (1,843 s of
    // files); an earlier three-file run failed a slow-link case of network-faults once, since
    // made exact (test/helpers/fires.ts knows a lock held by a lost session).
    // Four took 703 s but 2,671 s of files (the CPU shared four ways) and four timing failures.
    maxWorkers: 3,
    // Longest files first, so that no long file is the tail of the suite (test/helpers/sequencer.ts).
    sequence: { sequencer: LongestFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
