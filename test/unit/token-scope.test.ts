/**
 * The judgement of a scoped write token (actions/scope.ts): globs against a job's whole name,
 * case-sensitively, the target taken literally; the actions; the namespaces; the words of a
 * refusal, which name what the scope lacks.
 */
import { describe, expect, it } from 'vitest';
import {
  globMatches,
  scopeDetails,
  scopeRefusal,
  type ActionScope,
  type ScopedAttempt,
} from '../../src/actions/scope.js';

describe('globMatches', () => {
  it.each([
    ['report*', 'report-daily', true],
    ['report*', 'report', true],
    ['report*', 'xreport', false],
    ['report*', 'Report-daily', false],
    ['*-daily', 'report-daily', true],
    ['etl-?', 'etl-1', true],
    ['etl-?', 'etl-12', false],
    ['report.daily', 'reportxdaily', false],
    ['report.daily', 'report.daily', true],
    ['a+b', 'aab', false],
    ['settle', 'settle', true],
    ['settle', 'settle2', false],
    // The target is a name: `report*` asked for matches only a glob that matches that string.
    ['report-daily', 'report*', false],
    ['report*', 'report*', true],
    // A path in the target is no way around the glob's start.
    ['report*', 'settle/../report', false],
    ['*', '', true],
    ['', '', true],
    ['?', '', false],
    ['a*b*c', 'abc', true],
    ['a*b*c', 'axxbyyc', true],
    ['a*b*c', 'axxbyy', false],
    ['*-*-*', 'a-b-c', true],
    ['*x', 'xxxx', true],
    ['**y', 'xy', true],
  ])('%s against %s: %s', (glob, name, expected) => {
    expect(globMatches(glob, name)).toBe(expected);
  });
});

it('judges a glob of many stars against a long name at once (no backtracking blow-up)', () => {
  const started = performance.now();
  expect(globMatches(`${'*a'.repeat(60)}b`, 'a'.repeat(128))).toBe(false);
  // A backtracking match of this input would take longer than any test (exponential in the
  // stars); the walk takes microseconds. The bound is loose so that a loaded machine's pause
  // cannot fail it.
  expect(performance.now() - started).toBeLessThan(5_000);
});

describe('scopeRefusal', () => {
  const attempt = (a: Partial<ScopedAttempt> = {}): ScopedAttempt => ({
    action: 'run',
    job: 'report-daily',
    namespace: 'prod',
    ...a,
  });
  const teamA: ActionScope = { jobs: ['report*', 'etl-*'], actions: ['run'], namespaces: ['prod'] };

  it('allows everything without a scope, and what the scope grants', () => {
    expect(scopeRefusal('ops', undefined, attempt({ action: 'kill', job: 'x' }))).toBeNull();
    expect(scopeRefusal('team-a', teamA, attempt())).toBeNull();
    expect(scopeRefusal('team-a', teamA, attempt({ job: 'etl-load' }))).toBeNull();
    // A key left out grants every value of it.
    expect(
      scopeRefusal(
        'p',
        { actions: ['pause'] },
        attempt({ action: 'pause', job: 'any', namespace: 'x' }),
      ),
    ).toBeNull();
  });

  it("names the job refused and the scope's jobs", () => {
    expect(scopeRefusal('team-a', teamA, attempt({ job: 'settle' }))).toEqual({
      missing: 'job',
      message: 'token "team-a" may not run "settle" (its jobs: report*, etl-*)',
    });
    expect(scopeRefusal('team-a', teamA, attempt({ job: 'Report-daily' }))?.missing).toBe('job');
  });

  it('names the action refused', () => {
    expect(scopeRefusal('team-a', teamA, attempt({ action: 'pause' }))).toEqual({
      missing: 'action',
      message: 'token "team-a" may not pause (its actions: run)',
    });
    // run does not grant a re-run of a past fire, nor backfill.
    expect(scopeRefusal('team-a', teamA, attempt({ action: 'rerun' }))?.missing).toBe('action');
    expect(scopeRefusal('team-a', teamA, attempt({ action: 'backfill' }))?.missing).toBe('action');
  });

  it('refuses another namespace first, compared exactly', () => {
    expect(
      scopeRefusal('team-a', teamA, attempt({ namespace: 'staging', action: 'kill' })),
    ).toEqual({
      missing: 'namespace',
      message: 'token "team-a" may not act in namespace "staging" (its namespaces: prod)',
    });
    for (const namespace of ['Prod', 'prod ', 'pro', 'prod2']) {
      expect(scopeRefusal('team-a', teamA, attempt({ namespace }))?.missing).toBe('namespace');
    }
  });

  it('quotes a hostile target rather than print it raw', () => {
    const refusal = scopeRefusal('team-a', teamA, attempt({ job: 'x\u001b[2Jy' }));
    expect(refusal?.message).toContain('"x\\u001b[2Jy"');
  });

  it("records the scope in an allowed action's details, nothing without one", () => {
    expect(scopeDetails({ scope: teamA })).toEqual({ scope: teamA });
    expect(scopeDetails({})).toEqual({});
  });
});
