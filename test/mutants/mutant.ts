/**
 * A guarantee mutant: a small patch that breaks one of baton's guarantees the way a real
 * regression would, and the tests that must catch it. `npm run mutants` applies each to a scratch
 * copy of the tree and runs its killers; a mutant that survives them is a hole in the suite.
 *
 * Edits are literal find/replace pairs. Each `find` must occur exactly once in its file, so that a
 * mutant never silently stops applying when the code moves: `test/unit/mutants.test.ts` checks
 * that on every `npm test`, and a restructuring updates the catalogue with the code.
 */

/** The guarantees baton states (README, docs/design.md), each with mutants that break it. */
export const GUARANTEES = {
  'one-winner': 'One winner per fire, whatever the clock skew or the link',
  'no-overlap': 'No overlap: no run of a job starts while another one lives',
  visible: 'Every attempt is visible: a row per runner per fire, with the true reason',
  'dies-with-runner': 'A run never outlives its runner',
  'lost-lock': 'A lost lock session aborts its runs and never leaves a fire waiting on it',
  'no-early-start': "No run starts before its instant by the database's clock",
  'fail-closed': 'Fail closed: no run that cannot be coordinated',
  'bad-input': 'Bad input is refused whole, nothing half-applied',
  secrets: 'Secrets are never printed, logged, stored or passed to jobs',
  'graceful-stop': 'A graceful stop leaves no row running and no lock held',
  retention: 'Retention never deletes a running row or the latest success',
  sdk: "The job SDK's claims hand each row to one worker, and give it back only after the bound",
  namespaces:
    "Namespaces sharing a server stay apart: an action for one never touches another's runs",
  pools: "A pool's N, never more: at most N runs of its jobs are claimed and running at once",
  'one-timing':
    'One timing at a time, fleet-wide: no instant runs under a timing the fleet has left',
  'not-when-told':
    'No run where the fleet is told not to: an instant its calendars skip, a fire in a blackout',
  fencing:
    "A stopped run commits nothing through the fenced helpers after its job's next run started",
} as const;

export type Guarantee = keyof typeof GUARANTEES;

export interface Edit {
  /** Path from the repository root. */
  file: string;
  find: string;
  replace: string;
}

export interface Killer {
  /** Test file, from the repository root. */
  file: string;
  /** The test's name (its `it` title, or a unique part of it); passed to vitest's `-t`. */
  test: string;
}

export interface Mutant {
  /** Short kebab-case name; `npm run mutants -- --only <id>`. */
  id: string;
  guarantee: Guarantee;
  /** The regression it stands for, in one sentence. */
  what: string;
  edits: Edit[];
  /** Tried in order until one fails; the first is the one meant to catch it. */
  killers: Killer[];
}
