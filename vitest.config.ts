import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // End-to-end files start real runner processes against the shared MariaDB and mostly wait
    // for every-second fires: three files at a time keep a 2-core machine busy (load ~3–4) yet
    // responsive enough for their schedules, and the suite inside its ~12-minute budget (two
    // took 12–15 minutes once the suite passed 100 files).
    maxWorkers: 3,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
