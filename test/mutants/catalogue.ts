/**
 * The guarantee mutants (see mutant.ts): the regressions baton must never ship, each with the
 * tests that catch it. Listed, with their killers, in test/README.md (`npm run mutants -- --list`).
 */
import type { Mutant } from './mutant.js';

export const MUTANTS: readonly Mutant[] = [
  {
    id: 'fire-key-dropped',
    guarantee: 'one-winner',
    what:
      'The unique fire key is gone (a plain index instead, and the start-up check no longer ' +
      'asks for uniqueness): only the lock is left.',
    edits: [
      {
        file: 'src/store/migrations/0001_create_baton_runs.sql',
        find: 'UNIQUE KEY baton_runs_fire',
        replace: 'KEY baton_runs_fire',
      },
      {
        file: 'src/store/server-check.ts',
        find: "Key_name = 'baton_runs_fire' AND Non_unique = 0",
        replace: "Key_name = 'baton_runs_fire'",
      },
    ],
    killers: [
      {
        file: 'test/e2e/one-winner.test.ts',
        test: 'finds the lock free after a short job and meets the fire key',
      },
    ],
  },
];
