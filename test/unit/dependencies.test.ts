/**
 * `after:` in the schedules file (docs/dependencies.md, "Configuring"): a job with `after:` alone
 * (no schedule of its own) is valid and loaded apart from the loop's schedule; every wrong edge is
 * refused with its file, line and path (config/dependency-checks.ts): an unknown parent, a name of
 * another namespace, a job after itself, cycles, fan-out jobs, fan-in parents whose instants
 * differ; `defaults:` has no `after`. And what reads the edges: the graph's helpers, the loaded
 * schedule, the fingerprint, the refusal of a past fire of a child, status, library mode.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ownSchedule, firesBetween } from '../../src/actions/past-fires.js';
import {
  chainSources,
  childrenOf,
  describeAfter,
  instantSource,
  scheduleText,
} from '../../src/config/dependencies.js';
import { jobFingerprint } from '../../src/config/fingerprint.js';
import { loadConfig, parseConfig } from '../../src/config/load.js';
import {
  emptySchedule,
  deadManSchedule,
  loadSchedule,
  registryView,
} from '../../src/daemon/loaded-schedule.js';
import { ConfigError, UsageError } from '../../src/errors.js';
import { JUDGE_TIMINGS, judgeDependent } from '../../src/fire/dependents.js';
import { deadlineWithinMs } from '../../src/store/dependent-fires.js';
import { ExitCode } from '../../src/exit-codes.js';
import { buildStatus, statusToJson } from '../../src/fleet/status.js';
import { jobPage } from '../../src/http/dashboard/run-pages.js';
import { codeConfig, mergeConfigs } from '../../src/library/job-options.js';
import { createScheduler } from '../../src/library/scheduler.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-after-'));
const file = path.join(dir, 'schedules.yaml');

/** `line:path: message` of every problem of `yaml`, or [] when it is valid. */
function problems(yaml: string): string[] {
  try {
    parseConfig(file, yaml);
  } catch (err) {
    if (err instanceof ConfigError) {
      return err.problems.map((p) => `${p.line}:${p.path}: ${p.message}`);
    }
    throw err;
  }
  return [];
}

const SETTLE = `  settle:
    schedule: "0 3 * * *"
    command: ["true"]
`;

describe('a job with after: and no schedule', () => {
  const yaml = `namespace: shop
defaults:
  jitter: 1m
jobs:
${SETTLE}  report:
    command: ["true"]
    after:
      jobs: settle
      on: failure
      within: 2h
`;

  it('is valid: no schedule of its own, its after: with the defaults applied', () => {
    const config = parseConfig(file, yaml);
    const report = config.jobs.find((j) => j.name === 'report')!;
    expect(report.schedule).toBeNull();
    expect(report.after).toEqual({ jobs: ['settle'], on: 'failure', withinMs: 7_200_000 });
    // Jitter spreads a schedule's fires; inherited by a job without one it does not apply.
    expect(report.jitterMs).toBe(0);
    expect(config.jobs.find((j) => j.name === 'settle')!.jitterMs).toBe(60_000);
    const short = parseConfig(
      file,
      `jobs:\n${SETTLE}  report:\n    command: ["true"]\n    after: {jobs: [settle]}\n`,
    ).jobs[1]!;
    expect(short.after).toEqual({ jobs: ['settle'], on: 'success', withinMs: 86_400_000 });
  });

  it('a job with neither schedule nor after is refused, and so is jitter written on a child', () => {
    expect(problems('jobs:\n  a:\n    command: ["true"]\n')).toEqual([
      '2:jobs.a: missing `schedule` (or `after:`)',
    ]);
    expect(
      problems(
        `jobs:\n${SETTLE}  report:\n    command: ["true"]\n    jitter: 5m\n    after: {jobs: settle}\n`,
      ),
    ).toEqual([
      "7:jobs.report.jitter: `jitter` delays the fires of a job's own schedule; report has none " +
        '(it runs after its parents, when they let it): remove it',
    ]);
  });

  it('is loaded among the jobs the dispatcher knows, but not in the loop, recovery or registry schedules', async () => {
    const config = parseConfig(file, yaml);
    const loaded = loadSchedule(config, emptySchedule(config), new Date('2027-01-01T00:00:00Z'));
    expect([...loaded.jobs.keys()]).toEqual(['settle', 'report']);
    expect([...loaded.schedules.keys()]).toEqual(['settle']);
    expect(loaded.knownSince.has('report')).toBe(true);
    const view = await registryView(loaded, new Date('2027-01-01T00:00:00Z'));
    expect(view.report!.next).toBeUndefined();
    expect(view.settle!.next?.at).toHaveLength(3);
    // The dead-man's default window of a child is counted on its parent's fires — not for this
    // one, which runs on its parent's failures (it would be "no success" whenever settle is well).
    expect(deadManSchedule(loaded, 'report')).toBeNull();
    expect(deadManSchedule(loaded, 'settle')?.expression).toBe('0 3 * * *');
    expect(deadManSchedule(loaded, 'nobody')).toBeNull();
    const onSuccess = parseConfig(file, yaml.replace('on: failure', 'on: success'));
    const loadedOnSuccess = loadSchedule(onSuccess, emptySchedule(onSuccess), new Date());
    expect(deadManSchedule(loadedOnSuccess, 'report')?.expression).toBe('0 3 * * *');
  });

  it('has no past fires to run: run --fire and backfill are refused (exit 64), naming the parent', () => {
    const report = parseConfig(file, yaml).jobs[1]!;
    let error: unknown;
    try {
      firesBetween(report, new Date('2027-01-01'), new Date('2027-01-02'), 10);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(UsageError);
    expect((error as UsageError).exitCode).toBe(ExitCode.Usage);
    expect((error as Error).message).toBe(
      'report has no schedule of its own: it runs after settle; backfill settle --with-dependents',
    );
    expect(() => ownSchedule(report)).toThrow(UsageError);
    expect(ownSchedule(parseConfig(file, yaml).jobs[0]!)).toBe('0 3 * * *');
  });

  it("its fingerprint has its after:, so drift sees an edge change; others' stay as they were", () => {
    const a = parseConfig(file, yaml);
    const b = parseConfig(file, yaml.replace('on: failure', 'on: always'));
    expect(jobFingerprint(a.jobs[1]!, file)).not.toBe(jobFingerprint(b.jobs[1]!, file));
    expect(jobFingerprint(a.jobs[0]!, file)).toBe(jobFingerprint(b.jobs[0]!, file));
    const withSchedule = (after: string) =>
      parseConfig(
        file,
        `jobs:\n${SETTLE}  x:\n    schedule: "0 4 * * *"\n    command: ["true"]\n${after}`,
      ).jobs[1]!;
    expect(jobFingerprint(withSchedule(''), file)).not.toBe(
      jobFingerprint(withSchedule('    after: {jobs: settle}\n'), file),
    );
  });
});

describe('the checks of the edges', () => {
  it('a child whose own schedule fires at an instant of its parents: refused (it would run before them); other instants are fine', () => {
    expect(
      problems(
        `jobs:\n${SETTLE}  report:\n    schedule: "0 3 * * 1"\n    command: ["true"]\n    after: {jobs: settle}\n`,
      ),
    ).toEqual([
      `8:jobs.report.after: report's own schedule ("0 3 * * 1" UTC) fires at instants of settle's too (2026-01-05T03:00:00Z): there it would run at the instant, before settle, not after it; give report \`after:\` alone, or a schedule of other instants`,
    ]);
    expect(
      problems(
        `jobs:\n${SETTLE}  report:\n    schedule: "0 4 * * 1"\n    command: ["true"]\n    after: {jobs: settle}\n`,
      ),
    ).toEqual([]);
  });

  it('an unknown parent, at the item of the list, with the jobs and the closest name', () => {
    expect(
      problems(
        `jobs:\n${SETTLE}  report:\n    command: ["true"]\n    after:\n      jobs: [setle]\n`,
      ),
    ).toEqual([
      '8:jobs.report.after.jobs.0: unknown job "setle" (jobs: settle); did you mean "settle"?',
    ]);
    // One name, not a list: the list's key.
    expect(
      problems(`jobs:\n${SETTLE}  report:\n    command: ["true"]\n    after: {jobs: nope}\n`),
    ).toEqual(['7:jobs.report.after.jobs: unknown job "nope" (jobs: settle)']);
  });

  it("a parent written as another namespace's job, or as no job name at all", () => {
    expect(
      problems(
        `namespace: shop\njobs:\n${SETTLE}  report:\n    command: ["true"]\n    after:\n      jobs:\n        - settle\n        - other/settle\n        - "other:settle"\n        - "set tle"\n`,
      ),
    ).toEqual([
      '11:jobs.report.after.jobs.1: "other/settle" is not a job of this file: parents must be ' +
        'jobs of this file\'s namespace ("shop"), named as under `jobs:` (a job of namespace ' +
        '"other" cannot be a parent)',
      '12:jobs.report.after.jobs.2: "other:settle" is not a job of this file: parents must be ' +
        'jobs of this file\'s namespace ("shop"), named as under `jobs:` (a job of namespace ' +
        '"other" cannot be a parent)',
      '13:jobs.report.after.jobs.3: "set tle" is not a job of this file: parents must be jobs ' +
        'of this file\'s namespace ("shop"), named as under `jobs:`',
    ]);
  });

  it('a job after itself', () => {
    expect(
      problems(
        `jobs:\n${SETTLE}  report:\n    command: ["true"]\n    after: {jobs: [settle, report]}\n`,
      ),
    ).toEqual(['7:jobs.report.after.jobs.1: report cannot run after itself']);
  });

  it('a cycle of two and one of three: once per cycle, at its job first in the file', () => {
    expect(
      problems(
        `jobs:\n${SETTLE}  a:\n    command: ["true"]\n    after: {jobs: b}\n  b:\n    command: ["true"]\n    after: {jobs: [a, settle]}\n`,
      ),
    ).toEqual([
      '7:jobs.a.after: a cycle: a → b → a (each runs after the next): none of them would ever run',
    ]);
    // Met first from z (a job after the cycle), still told at x, the first of it in the file.
    const three = problems(
      `jobs:\n${SETTLE}  w:\n    command: ["true"]\n    after: {jobs: z}\n  x:\n    schedule: "0 4 * * *"\n    command: ["true"]\n    after: {jobs: z}\n  y:\n    command: ["true"]\n    after: {jobs: x}\n  z:\n    command: ["true"]\n    after: {jobs: y}\n`,
    );
    expect(three).toEqual([
      '11:jobs.x.after: a cycle: x → z → y → x (each runs after the next): none of them would ever run',
    ]);
  });

  /** A file of `n` jobs after one another: j0 after j1 … after j(n-1), written child first. */
  function chainYaml(n: number, cycle: boolean): string {
    let y = 'jobs:\n';
    for (let i = 0; i < n - 1; i++)
      y += `  j${i}:\n    after: {jobs: j${i + 1}}\n    command: ["true"]\n`;
    const last = cycle ? `    after: {jobs: j0}\n` : `    schedule: "0 3 * * *"\n`;
    return y + `  j${n - 1}:\n${last}    command: ["true"]\n`;
  }

  it('a chain of 10,000 jobs written child first is valid; with a fan-in at its end too', () => {
    // Walked by recursion, each of these was "Maximum call stack size exceeded" (exit 70).
    expect(problems(chainYaml(10_000, false))).toEqual([]);
    const fanIn = `  twin:\n    schedule: "0 3 * * *"\n    command: ["true"]\n  report:\n    after: {jobs: [j0, twin]}\n    command: ["true"]\n`;
    expect(problems(chainYaml(10_000, false) + fanIn)).toEqual([]);
  });

  it('a cycle of 20,000 jobs is one problem, at its first job, its words shortened', () => {
    const found = problems(chainYaml(20_000, true));
    expect(found).toEqual([
      '3:jobs.j0.after: a cycle: j0 → j1 → j2 → j3 → j4 → j5 → j6 → … 19991 more … → j19998 → ' +
        'j19999 → j0, 20000 jobs (each runs after the next): none of them would ever run',
    ]);
  });

  it('a parent named twice is refused at its second item', () => {
    expect(
      problems(
        `jobs:\n${SETTLE}  report:\n    command: ["true"]\n    after:\n      jobs:\n        - settle\n        - settle\n`,
      ),
    ).toEqual(['10:jobs.report.after.jobs.1: "settle" is named twice: a typo for another parent?']);
  });

  it('a fan-out job as a child or as a parent', () => {
    expect(
      problems(
        `jobs:\n  fan:\n    schedule: "0 3 * * *"\n    workers: 3\n    command: ["true"]\n${SETTLE}  report:\n    workers: 2\n    command: ["true"]\n    after: {jobs: [settle, fan]}\n`,
      ),
    ).toEqual([
      '12:jobs.report.after.jobs.1: cannot be honoured: fan is a fan-out job (`workers: 3`); a ' +
        'fan-out job (`workers` > 1) cannot be a parent or a child in `after:` yet',
      '12:jobs.report.after: cannot be honoured: report is a fan-out job (`workers: 2`); a ' +
        'fan-out job (`workers` > 1) cannot be a parent or a child in `after:` yet',
    ]);
  });

  it("fan-in parents must share their instants (an after-only parent has its own parents')", () => {
    const hourly = `  hourly:\n    schedule: "0 * * * *"\n    command: ["true"]\n`;
    expect(
      problems(
        `jobs:\n${SETTLE}${hourly}  report:\n    command: ["true"]\n    after: {jobs: [settle, hourly]}\n`,
      ),
    ).toEqual([
      '10:jobs.report.after.jobs: the parents of report do not fire at the same instants ' +
        '(settle: "0 3 * * *" UTC, hourly: "0 * * * *" UTC; 2026-01-01T01:00:00Z is a fire of ' +
        'hourly, not of settle): a child runs at an instant all its parents share',
    ]);
    // The same wall clock in another zone is another instant.
    const seoul = `  seoul:\n    schedule: "0 3 * * *"\n    timezone: Asia/Seoul\n    command: ["true"]\n`;
    const chain = `  fetch:\n    command: ["true"]\n    after: {jobs: settle}\n`;
    expect(
      problems(
        `jobs:\n${SETTLE}${seoul}${chain}  report:\n    command: ["true"]\n    after: {jobs: [fetch, seoul]}\n`,
      ),
    ).toEqual([
      '14:jobs.report.after.jobs: the parents of report do not fire at the same instants ' +
        '(fetch: after settle, seoul: "0 3 * * *" Asia/Seoul; 2026-01-01T03:00:00Z is a fire of ' +
        'fetch, not of seoul): a child runs at an instant all its parents share',
    ]);
    // Parents that agree — one of them through its own parent — are fine.
    const same = `  import:\n    schedule: "0 3 * * *"\n    command: ["true"]\n`;
    expect(
      problems(
        `jobs:\n${SETTLE}${same}${chain}  report:\n    command: ["true"]\n    after: {jobs: [fetch, import], on: always}\n`,
      ),
    ).toEqual([]);
  });

  it('instants are compared past the first 50: parents or an own schedule that differ at minute 59 of each hour', () => {
    const every2 = `  settle:\n    schedule: "*/2 * * * * *"\n    command: ["true"]\n`;
    // Their first 50 instants (100 s) are the same; every hour's minute 59 is not.
    expect(
      problems(
        `jobs:\n${every2}  import:\n    schedule: "*/2 0-58 * * * *"\n    command: ["true"]\n  report:\n    after: {jobs: [settle, import]}\n    command: ["true"]\n`,
      ),
    ).toEqual([
      expect.stringMatching(
        /^9:jobs\.report\.after\.jobs: the parents of report do not fire at the same instants .*T\d\d:59:\d\dZ is a fire of settle, not of import\)/,
      ),
    ]);
    // The child's own schedule shares settle's instants from minute 2 of each hour on.
    expect(
      problems(
        `jobs:\n${every2}  report:\n    schedule: "*/2 2-59 * * * *"\n    after: {jobs: settle}\n    command: ["true"]\n`,
      ),
    ).toEqual([expect.stringMatching(/^7:jobs\.report\.after: report's own schedule/)]);
    // A monthly parent and an hourly child share 03:00 on the 1st only.
    expect(
      problems(
        `jobs:\n  settle:\n    schedule: "0 3 1 * *"\n    command: ["true"]\n  report:\n    schedule: "0 * * * *"\n    after: {jobs: settle}\n    command: ["true"]\n`,
      ),
    ).toEqual([expect.stringMatching(/^7:jobs\.report\.after: report's own schedule/)]);
    // A yearly parent on a date the first 50 do not reach, against one on two dates.
    expect(
      problems(
        `jobs:\n  settle:\n    schedule: "0 3 1 1 *"\n    command: ["true"]\n  import:\n    schedule: "0 3 1 1,7 *"\n    command: ["true"]\n  report:\n    after: {jobs: [settle, import]}\n    command: ["true"]\n`,
      ),
    ).toEqual([expect.stringMatching(/2026-07-01T03:00:00Z is a fire of import, not of settle/)]);
    // The same instants written two ways are fine.
    expect(
      problems(
        `jobs:\n${every2}  import:\n    schedule: "0-59/2 * * * * *"\n    command: ["true"]\n  report:\n    after: {jobs: [settle, import]}\n    command: ["true"]\n`,
      ),
    ).toEqual([]);
  });

  it('a 1,000-job file with 500 fan-ins over 20 schedules is checked, its cost printed', () => {
    let y = 'jobs:\n';
    for (let i = 0; i < 500; i++) {
      const schedule = `${i % 20} ${3 + (i % 5)} * * *`;
      y += `  p${i}:\n    schedule: "${schedule}"\n    command: ["true"]\n`;
    }
    for (let i = 0; i < 500; i++) {
      y += `  c${i}:\n    after: {jobs: [p${i}, p${(i + 60) % 500}]}\n    command: ["true"]\n`;
    }
    const started = performance.now();
    expect(problems(y)).toEqual([]);
    const ms = performance.now() - started;
    console.log(`1,000-job file with 500 fan-ins checked in ${ms.toFixed(0)} ms`);
  });

  it('disabled parents and children, and overlap: allow on a child, are fine', () => {
    expect(
      problems(
        `jobs:\n  settle:\n    schedule: "0 3 * * *"\n    enabled: false\n    command: ["true"]\n  report:\n    command: ["true"]\n    enabled: false\n    overlap: allow\n    after: {jobs: settle}\n`,
      ),
    ).toEqual([]);
  });

  it('a parent whose own definition is wrong is not "unknown": only its own problem is told', () => {
    expect(
      problems(
        `jobs:\n  settle:\n    schedule: "61 3 * * *"\n    command: ["true"]\n  report:\n    command: ["true"]\n    after: {jobs: settle}\n`,
      ),
    ).toEqual([expect.stringMatching(/^3:jobs\.settle\.schedule: invalid cron expression/)]);
  });

  it("defaults: has no after: (an edge is a job's own)", () => {
    expect(problems(`defaults:\n  after: {jobs: settle}\njobs:\n${SETTLE}`)).toEqual([
      '2:defaults.after: unknown key "after"',
    ]);
  });
});

describe('within, judged', () => {
  const instant = new Date('2026-12-07T10:00:00Z');
  const after = { jobs: ['settle'], on: 'success' as const, withinMs: 1_000 };
  const deadline = new Date(instant.getTime() + after.withinMs);
  const settle = (finishedAt: Date | null) => [
    {
      job: 'settle',
      run: {
        id: 7,
        status: finishedAt ? ('done' as const) : ('running' as const),
        rerun: 0,
        host: 'h',
        startedAt: instant,
        finishedAt,
      },
      missed: null,
      skips: [],
    },
  ];
  const at = (ms: number) => new Date(instant.getTime() + ms);

  it('by when the verdict says the parent ended, not by when the judge looks', () => {
    const late = settle(at(3_000));
    // Judged before the deadline would have been impossible; judged at once after the verdict
    // or a minute late: the same answer — the verdict came too late.
    for (const now of [at(3_010), at(60_000)]) {
      expect(judgeDependent(after, late, instant, now, deadline, JUDGE_TIMINGS)).toMatchObject({
        kind: 'upstream',
        parent: 'settle',
        parentRunId: 7,
        reason: "settle's verdict came too late: done (run 7) 3s after the instant, past within 1s",
      });
    }
    // Ended in time: due, even to a judge that looks after the deadline.
    for (const now of [at(900), at(60_000)]) {
      expect(judgeDependent(after, settle(at(800)), instant, now, deadline, JUDGE_TIMINGS)).toEqual(
        { kind: 'due', parentRuns: { settle: 7 } },
      );
    }
  });

  it('a parent still running is looked at again no later than the deadline, then skipped', () => {
    const running = settle(null);
    expect(judgeDependent(after, running, instant, at(100), deadline, JUDGE_TIMINGS)).toEqual({
      kind: 'wait',
      checkAt: deadline,
      waitingFor: ['settle'],
    });
    expect(
      judgeDependent(after, running, instant, deadline, deadline, JUDGE_TIMINGS),
    ).toMatchObject({
      kind: 'upstream',
      reason: 'settle did not finish this fire within 1s (run 7 still running)',
    });
  });

  it("a child's deadline never counts more than 366 days, whatever reached it", () => {
    const year = 366 * 86_400_000;
    expect(
      [1_000, 0, -5, year + 1, 5_000_000 * 86_400_000, Infinity, NaN].map(deadlineWithinMs),
    ).toEqual([1_000, 0, 0, year, year, year, year]);
  });
});

describe('the graph, read', () => {
  const config = parseConfig(
    file,
    `jobs:
${SETTLE}  import:
    schedule: "0 3 * * *"
    command: ["true"]
  fetch:
    command: ["true"]
    after: {jobs: settle}
  report:
    command: ["true"]
    after: {jobs: [fetch, import], on: failure}
  audit:
    schedule: "30 3 * * *"
    command: ["true"]
    after: {jobs: settle, on: always}
`,
  );

  it('children, words for a schedule cell, and where a child gets its instants', () => {
    expect(childrenOf(config.jobs, 'settle').map((j) => j.name)).toEqual(['fetch', 'audit']);
    expect(childrenOf(config.jobs, 'report')).toEqual([]);
    const [settle, , fetch, report, audit] = config.jobs;
    expect(describeAfter(fetch!.after!)).toBe('after settle');
    expect(describeAfter(report!.after!)).toBe('after fetch, import (on failure)');
    expect(describeAfter(audit!.after!)).toBe('after settle (always)');
    expect(scheduleText(report!)).toBe('after fetch, import (on failure)');
    expect(scheduleText(audit!)).toBe('30 3 * * *');
    expect(instantSource(config.jobs, 'report')).toBe(settle);
    expect(instantSource(config.jobs, 'audit')).toBe(audit);
    expect(instantSource(config.jobs, 'nobody')).toBeNull();
    // The schedules a child's fires come from (the runners' expectation of them): up the chain.
    const names = (job: string) => chainSources(config.jobs, job).map((j) => j.name);
    expect(names('report')).toEqual(['settle']); // fetch has no schedule: settle's instants
    expect(names('audit')).toEqual(['settle']);
    expect(names('settle')).toEqual([]);
    const disabled = config.jobs.map((j) => (j.name === 'fetch' ? { ...j, enabled: false } : j));
    expect(chainSources(disabled, 'report')).toEqual([]);
  });

  it("status: a child has no next fire of its own, and its dead-man window is its parent's", () => {
    const now = new Date('2027-03-10T12:00:00Z');
    const lastSuccessAt = new Date('2027-03-01T03:05:00Z');
    const report = buildStatus({
      now,
      namespace: 'default',
      runners: [],
      running: [],
      config,
      pauses: [],
      history: new Map([['fetch', { lastSuccessAt, firstSeenAt: lastSuccessAt }]]),
    });
    const fetch = report.jobs.find((j) => j.name === 'fetch')!;
    expect(fetch).toMatchObject({ schedule: null, nextFire: null });
    expect(fetch.after).toEqual({ jobs: ['settle'], on: 'success', withinMs: 86_400_000 });
    // Two daily fires after the success, plus 10% of a day.
    expect(fetch.overdueAt).toEqual(new Date('2027-03-03T05:24:00Z'));
    expect(report.warnings.some((w) => w.kind === 'no-success' && w.job === 'fetch')).toBe(true);
    expect(statusToJson(report).jobs.find((j) => j.name === 'fetch')!.after).toEqual(fetch.after);
  });

  it("the dashboard's job page: its parents and children (links), no next fires of its own", async () => {
    // No history: every read answers no rows.
    const pool = { query: async () => [[], []] as never };
    const source = {
      pool,
      namespace: 'default',
      config,
      host: 'h',
      now: new Date('2027-01-01T00:00:00Z'),
      nextFire: () => null,
      database: 'baton',
    };
    const fetch = (await jobPage(source, 'fetch'))!;
    expect(fetch).toMatchObject({
      schedule: null,
      after: { jobs: ['settle'], on: 'success', withinMs: 86_400_000 },
      children: ['report'],
      nextFires: [],
    });
    const settle = (await jobPage(source, 'settle'))!;
    expect(settle).toMatchObject({ after: null, children: ['fetch', 'audit'] });
    expect(settle.nextFires[0]).toBe('2027-01-01T03:00:00.000Z');
  });
});

describe('library mode', () => {
  const fileWithSettle = path.join(dir, 'library.yaml');
  writeFileSync(fileWithSettle, `jobs:\n${SETTLE}`);
  const settings = { namespace: 'default' };

  it('a code job after a file job: its edges are checked on the merged jobs', () => {
    const code = codeConfig(settings, new Map([['report', { after: { jobs: ['settle'] } }]]));
    const merged = mergeConfigs(code, loadConfig(fileWithSettle));
    expect(merged.jobs.map((j) => [j.name, j.schedule, j.after?.jobs])).toEqual([
      ['report', null, ['settle']],
      ['settle', '0 3 * * *', undefined],
    ]);
  });

  it('a wrong edge of a code job is refused at the merge, named scheduler: jobs.…', () => {
    const code = codeConfig(
      settings,
      new Map<string, object>([
        ['report', { after: { jobs: ['setle'] } }],
        ['loop', { after: { jobs: 'loop' } }],
      ]),
    );
    let error: unknown;
    try {
      mergeConfigs(code, loadConfig(fileWithSettle));
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      {
        file: 'scheduler',
        path: 'jobs.report.after.jobs',
        message: 'unknown job "setle" (jobs: loop, settle); did you mean "settle"?',
      },
      { file: 'scheduler', path: 'jobs.loop.after.jobs', message: 'loop cannot run after itself' },
    ]);
    // Without a file, the code's own jobs are checked together.
    expect(() => mergeConfigs(code, null)).toThrow(
      /scheduler: jobs\.report\.after\.jobs: unknown job "setle"/,
    );
  });

  it('scheduler.job takes a job with after: alone, whose parent may come later or from a file', () => {
    const scheduler = createScheduler({
      databaseUrl: 'mysql://root@127.0.0.1:3306/baton_never_connected',
      host: 'h',
    });
    const handler = () => {};
    expect(() =>
      scheduler
        .job('report', { after: { jobs: ['settle'], on: 'always', within: '2h' } }, handler)
        .job('summary', { after: { jobs: 'report' } }, handler)
        .load(fileWithSettle),
    ).not.toThrow();
  });
});
