import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // End-to-end files start real runner processes against the shared MariaDB; two files at a
    // time keeps a 2-core machine responsive enough for every-second schedules. Three took the
    // suite from ~12 to ~9 minutes but, at load 3–4, failed a timing-sensitive network-faults
    // case (a slow link's late contention) once in five runs: not worth a flaky suite.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
