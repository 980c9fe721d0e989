/**
 * A run is over when its process group is empty, not when its first process exits (issue 34,
 * item 1). The shape of every wrapper script: `sh` starts a child in the background and `wait`s.
 * A stop's SIGTERM reaches the whole group: the wrapper dies at once, and its child is slow to
 * clean up (a TERM trap that lasts until the test lets it go) or ignores SIGTERM altogether. Until
 * the child is gone the job's lock stays held, no retry starts, no other host's `baton run`
 * starts, and neither the runner nor `baton run` exits; what ignores SIGTERM gets SIGKILL at the
 * stop's grace.
 *
 * Judged by the processes themselves: every process of a run writes its pid (with its job, run and
 * attempt) down, and the test samples them in /proc while the runners run — never two attempts of
 * one job alive at once, none alive longer than the timeout plus the grace, none alive after its
 * runner exited — and by the jobs' journal (helpers/ground-truth.ts: a flock held for as long as
 * any process of a run lives).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { KILL_GRACE_MS } from '../../src/fire/run-control.js';
import { baton } from '../helpers/cli.js';
import { runs, type RunRow } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import {
  expectNoOverlapInJournal,
  writeJournaledSchedule,
  type Journal,
} from '../helpers/ground-truth.js';
import { alive, killGroup } from '../helpers/procfs.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('stopped-group', { perTest: true });

/**
 * How much later than its SIGKILL was due a sample may still see a process: the runner's timeout and
 * kill timers and the spawner's signals run late on a loaded machine (seen: up to about 1.5 s), plus
 * the sampler's own 20 ms. A process that outlived its stop would be alive for good.
 */
const SAMPLING_SLACK_MS = 4_000;
const TIMEOUT_MS = 1_000;

/**
 * The child a wrapper leaves running. `slow`: on SIGTERM it says so (`cleaning` in the journal's
 * folder) and cleans up until the test creates `let-go` there — longer than any grace, unless the
 * test lets it go. `deaf`: it ignores SIGTERM (as do the `sleep`s it starts: ignored signals stay
 * ignored across exec). $1 is the journal's folder.
 */
const CHILD = {
  slow:
    `trap 'echo "$BATON_RUN_ID" >> "$1/cleaning"; ` +
    `while [ ! -e "$1/let-go" ]; do sleep 0.05; done; exit 0' TERM`,
  deaf: `trap '' TERM`,
  // Cleans up for 6 s, then says how long its cleanup really took (a second SIGTERM to the group
  // would end its `sleep` early; a SIGKILL, the line).
  patient:
    `trap 't0=$(date +%s%3N); sleep 6; ` +
    `echo "$BATON_RUN_ID $(( $(date +%s%3N) - t0 ))" >> "$1/cleaned"; exit 0' TERM`,
} as const;
type ChildKind = keyof typeof CHILD;

function childScript(kind: ChildKind): string {
  return [
    CHILD[kind],
    'echo "$BATON_JOB $BATON_RUN_ID ${BATON_ATTEMPT:-1} child $$" >> "$1/pids"',
    'while :; do sleep 0.1; done',
  ].join('\n');
}

/**
 * A wrapper script's work: a first attempt starts the child (of a scheduled fire, or of a manual run
 * where the job's environment says CHILD_ON=manual; with LEAVE_CHILD set it exits as soon as the child
 * has written its pid, leaving the child behind; with VIA_TIMEOUT set the child runs under GNU `timeout`, which moves it into a
 * process group of its own) and waits for it (only a
 * stop ends the child); any other run records itself and ends soon (it lives long enough
 * to be sampled).
 */
function wrapperWork(child: string): string {
  return [
    'echo "$BATON_JOB $BATON_RUN_ID ${BATON_ATTEMPT:-1} leader $$" >> "$J/pids"',
    `if [ "\${BATON_ATTEMPT:-1}" = 1 ] && [ "$BATON_TRIGGER" = "\${CHILD_ON:-schedule}" ]; then`,
    `  \${VIA_TIMEOUT:+timeout 100} bash '${child}' "$J" &`,
    // A wrapper that leaves its child waits until the child has set its trap and written its pid:
    // the group's SIGTERM must meet the child's own handling, not a shell that has not read it yet.
    '  if [ -n "$LEAVE_CHILD" ]; then',
    '    until grep -qs " child " "$J/pids"; do sleep 0.02; done',
    '  else wait; fi',
    'else sleep 0.3; fi',
  ].join('\n');
}

/** A schedules file whose jobs (`yaml`'s) are wrappers of the children above. */
function wrapperSchedule(yaml: (job: (child: ChildKind, settings?: string) => string) => string) {
  return writeJournaledSchedule(
    (j) => {
      const dir = path.dirname(j.dir);
      const command = (child: ChildKind) =>
        j.yaml({ work: wrapperWork(path.join(dir, `${child}.sh`)) });
      return yaml(
        (child, settings = '') =>
          `\n    command: ${command(child)}${settings ? `\n    ${settings.trim().split('\n').join('\n    ')}` : ''}`,
      );
    },
    {
      'slow.sh': childScript('slow'),
      'deaf.sh': childScript('deaf'),
      'patient.sh': childScript('patient'),
    },
  );
}

interface SeenProcess {
  job: string;
  /** `runId/attempt`. */
  attempt: string;
  role: string;
  pid: number;
  lastSeen: number;
}

/**
 * Samples the pids the jobs wrote down, every 20 ms: which attempts of each job are alive at the
 * same moment, and until when each process was seen alive.
 */
function samplePids(j: Journal) {
  const file = path.join(j.dir, 'pids');
  const seen = new Map<number, SeenProcess>();
  const together: string[] = [];
  /** Attempts whose child was seen alive after their wrapper was gone: the case under test. */
  const orphaned = new Set<string>();
  const look = () => {
    const now = Date.now();
    const lines = existsSync(file) ? readFileSync(file, 'utf8').split('\n') : [];
    const attemptsAlive = new Map<string, Set<string>>();
    for (const line of lines) {
      const [job, runId, attempt, role, pid] = line.split(' ');
      if (!pid || !alive(Number(pid))) continue;
      const key = `${runId}/${attempt}`;
      seen.set(Number(pid), {
        job: job!,
        attempt: key,
        role: role!,
        pid: Number(pid),
        lastSeen: now,
      });
      attemptsAlive.set(job!, (attemptsAlive.get(job!) ?? new Set()).add(key));
    }
    for (const [job, attempts] of attemptsAlive) {
      if (attempts.size > 1) together.push(`${job}: attempts ${[...attempts].join(' and ')}`);
    }
    const processes = [...seen.values()];
    for (const child of processes.filter((p) => p.role === 'child' && p.lastSeen === now)) {
      const leader = processes.find((p) => p.role === 'leader' && p.attempt === child.attempt);
      if (leader && leader.lastSeen < now) orphaned.add(`${child.job} ${child.attempt}`);
    }
  };
  const timer = setInterval(look, 20);
  return {
    stop() {
      clearInterval(timer);
      look();
    },
    /** Moments two attempts of one job were alive together. */
    together,
    orphaned,
    seen: () => [...seen.values()],
    /** The processes seen that are still alive now. */
    alive: () => [...seen.values()].filter((s) => alive(s.pid)),
  };
}

/** `baton run JOB` of the schedules file `config` from `host`, with `extra` options. */
function runFrom(
  host: string,
  config: string,
  job: string,
  extra: string[] = [],
  timeoutMs?: number,
) {
  return baton(
    ['run', job, ...extra, '--config', config, '--database-url', fleet.db.url, '--host', host],
    timeoutMs != null ? { timeoutMs } : {},
  );
}

/** The winner row of `job`'s first fire once it has its verdict, after its retry. */
function verdictAfterRetry(job: string): Promise<RunRow> {
  return waitFor(
    `${job}'s verdict, after its retry`,
    async () =>
      (await runs(fleet.db, job)).find(
        (r) =>
          r.winner === 1 &&
          (r as RunRow & { attempts: number }).attempts === 2 &&
          r.finished_at != null,
      ),
    { timeoutMs: 40_000, intervalMs: 50 },
  );
}

let sampler: ReturnType<typeof samplePids> | undefined;
afterEach(() => {
  sampler?.stop();
  // A failed test may leave children behind: they must not outlive it.
  for (const s of sampler?.alive() ?? []) {
    killGroup(s.pid);
    try {
      process.kill(s.pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  sampler = undefined;
});

/** Each process of a job with a timeout lived at most the timeout plus the grace. */
function expectBoundedLifetimes(journal: Journal, jobs: string[]): void {
  for (const s of sampler!.seen().filter((x) => jobs.includes(x.job))) {
    const attempt = journal.attempts(s.job).find((a) => `${a.runId}/${a.attempt}` === s.attempt);
    expect(attempt, `${s.job} ${s.attempt} in the journal`).toBeDefined();
    expect(
      s.lastSeen - attempt!.start,
      `${s.job} ${s.attempt} ${s.role} (pid ${s.pid}) lived longer than timeout + grace`,
    ).toBeLessThan(TIMEOUT_MS + KILL_GRACE_MS + SAMPLING_SLACK_MS);
  }
}

describe('a stopped run whose wrapper exits at once', () => {
  it("holds the lock until its slow child is gone: another host's baton run waits", async () => {
    const { config, journal } = wrapperSchedule(
      (job) => `
namespace: groups
jobs:
  slow:
    schedule: "*/5 * * * * *"${job('slow', 'timeout: 1s')}
`,
    );
    sampler = samplePids(journal);
    const runners = await fleet.start(['srv-a', 'srv-b'], { config });

    // The run timed out: its wrapper is gone at once, its child cleans up.
    const cleaning = path.join(journal.dir, 'cleaning');
    await waitFor('a timed-out run whose child cleans up', () => existsSync(cleaning), {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    // Another host waits for the job's lock: it may run only once that child is gone (here:
    // SIGKILLed at the stop's grace, since the test lets it go only after the manual run).
    const manual = await runFrom('srv-c', config, 'slow', ['--wait', '30'], 45_000);
    writeFileSync(path.join(journal.dir, 'let-go'), '');
    for (const runner of runners) expect(await runner.stop('SIGTERM')).toBe(0);
    sampler.stop();

    expect(manual.code, manual.stderr).toBe(0);
    expect(journal.attempts('slow').filter((a) => a.host === 'srv-c')).toHaveLength(1);
    // The case happened: a wrapper gone, its child alive.
    expect([...sampler.orphaned], 'a wrapper gone, its child alive').not.toEqual([]);
    expect(sampler.together, 'two runs of one job alive at once').toEqual([]);
    expectNoOverlapInJournal(journal.attempts('slow'), 'slow');
    expect(sampler.alive(), 'processes alive after their runners exited').toEqual([]);
    expectBoundedLifetimes(journal, ['slow']);
  });

  it('SIGKILLs a child that ignores SIGTERM at the grace, then retries', async () => {
    const { config, journal } = wrapperSchedule(
      (job) => `
namespace: groups
jobs:
  deaf:
    schedule: "*/5 * * * * *"${job('deaf', 'timeout: 1s\nretries: 1\nretryDelay: 100ms')}
`,
    );
    sampler = samplePids(journal);
    const runners = await fleet.start(['srv-a', 'srv-b'], { config });
    const verdict = await verdictAfterRetry('deaf');
    for (const runner of runners) expect(await runner.stop('SIGTERM')).toBe(0);
    sampler.stop();

    expect(verdict.status).toBe('done');
    expect([...sampler.orphaned], 'a wrapper gone, its child alive').not.toEqual([]);
    expect(sampler.together, 'two attempts of one job alive at once').toEqual([]);
    expectNoOverlapInJournal(journal.attempts('deaf'), 'deaf');
    expect(sampler.alive(), 'processes alive after their runners exited').toEqual([]);
    expectBoundedLifetimes(journal, ['deaf']);
  });
});

describe('a child in a process group of its own (GNU timeout, set -m)', () => {
  it('is still part of its run: SIGKILLed at the grace before the retry, gone with the runners', async () => {
    const { config, journal } = wrapperSchedule(
      (job) => `
namespace: groups
jobs:
  timed:
    schedule: "*/5 * * * * *"${job('deaf', 'timeout: 1s\nretries: 1\nretryDelay: 100ms\nenv: {VIA_TIMEOUT: "1"}')}
`,
    );
    sampler = samplePids(journal);
    const runners = await fleet.start(['srv-a', 'srv-b'], { config });
    await verdictAfterRetry('timed');
    for (const runner of runners) expect(await runner.stop('SIGTERM')).toBe(0);
    sampler.stop();

    const child = sampler.seen().find((s) => s.role === 'child');
    expect(child, 'the child under timeout').toBeDefined();
    // The case under test: the child is not in its run's first process group.
    expect([...sampler.orphaned], 'a wrapper gone, its child alive').not.toEqual([]);
    expect(sampler.together, 'two attempts of one job alive at once').toEqual([]);
    expectNoOverlapInJournal(journal.attempts('timed'), 'timed');
    expect(sampler.alive(), 'processes alive after their runners exited').toEqual([]);
    expectBoundedLifetimes(journal, ['timed']);
  });
});

describe('a stop with no timeout', () => {
  it('baton start exits only once a running job left nothing alive', async () => {
    const { config, journal } = wrapperSchedule(
      (job) => `
namespace: groups
jobs:
  stubborn:
    schedule: "*/2 * * * * *"${job('deaf')}
`,
    );
    sampler = samplePids(journal);
    const [runner] = await fleet.start(['srv-a'], { config, args: ['--grace', '0'] });
    await waitFor(
      "the stubborn job's child",
      () => sampler!.seen().some((s) => s.role === 'child'),
      { timeoutMs: 20_000, intervalMs: 20 },
    );
    // The runner stops its run (SIGTERM to the group, SIGKILL after the kill grace) and waits.
    expect(await runner!.stop('SIGTERM')).toBe(0);
    expect(sampler.alive(), 'processes alive after baton start exited').toEqual([]);
    const winners = (await runs(fleet.db, 'stubborn')).filter((r) => r.winner === 1);
    expect(winners.map((r) => r.status)).toEqual(['interrupted']);
  });

  it('baton run exits only once its timed-out job left nothing alive', async () => {
    const { config, journal } = wrapperSchedule(
      (job) => `
namespace: groups
jobs:
  deaf:
    schedule: "0 0 1 1 *"${job('deaf', 'timeout: 1s\nenv: {CHILD_ON: manual}')}
`,
    );
    sampler = samplePids(journal);
    const result = await runFrom('srv-a', config, 'deaf');
    expect(result.code, result.stderr).toBe(1);
    expect(sampler.seen().some((s) => s.role === 'child')).toBe(true);
    expect(sampler.alive(), 'processes alive after baton run exited').toEqual([]);
    const [row] = await runs(fleet.db, 'deaf');
    expect(row?.status).toBe('timeout');
  });
});

describe("a stop whose grace is longer than the leftovers' 5 s", () => {
  it("baton kill --grace 12s: the wrapper's child cleans up undisturbed, one SIGTERM, no SIGKILL", async () => {
    const { config, journal } = wrapperSchedule(
      (job) => `
namespace: groups
jobs:
  patient:
    schedule: "*/2 * * * * *"${job('patient')}
`,
    );
    sampler = samplePids(journal);
    const [runner] = await fleet.start(['srv-a'], { config });
    const child = await waitFor(
      "the patient job's child",
      () => sampler!.seen().find((s) => s.role === 'child'),
      { timeoutMs: 20_000, intervalMs: 20 },
    );
    const runId = Number(child.attempt.split('/')[0]);
    const kill = await baton(
      ['kill', String(runId), '--grace', '12s', '--database-url', fleet.db.url],
      { timeoutMs: 30_000 },
    );
    expect(kill.code, kill.stdout + kill.stderr).toBe(0);
    const cleaned = readFileSync(path.join(journal.dir, 'cleaned'), 'utf8').trim().split(' ');
    expect(Number(cleaned[0])).toBe(runId);
    // Its 6 s cleanup ran whole: no second SIGTERM cut its sleep short, no SIGKILL at 5 s.
    expect(Number(cleaned[1])).toBeGreaterThanOrEqual(5_900);
    const [row] = await fleet.db.query<RunRow>('SELECT * FROM baton_runs WHERE id = ?', [runId]);
    expect(row?.status).toBe('killed');
    expect(await runner!.stop('SIGTERM')).toBe(0);
    expect(sampler.alive(), 'processes alive after baton start exited').toEqual([]);
  });
});

describe('a job that exits by itself', () => {
  it('is over only once what it left behind is gone (SIGTERM, then SIGKILL)', async () => {
    const { config, journal } = wrapperSchedule(
      (job) => `
namespace: groups
jobs:
  leaves:
    schedule: "0 0 1 1 *"${job('deaf', 'env: {CHILD_ON: manual, LEAVE_CHILD: "1"}')}
`,
    );
    sampler = samplePids(journal);
    const result = await runFrom('srv-a', config, 'leaves');
    expect(result.code, result.stderr).toBe(0);
    expect(
      sampler.seen().filter((s) => s.role === 'child'),
      'the child it left',
    ).toHaveLength(1);
    expect(sampler.alive(), 'processes alive after baton run exited').toEqual([]);
    const [row] = await runs(fleet.db, 'leaves');
    expect(row?.status).toBe('done');
    // The run's end is when its last process was gone, not when the wrapper exited.
    const lastSeen = Math.max(...sampler.seen().map((s) => s.lastSeen));
    expect(row!.finished_at!.getTime()).toBeGreaterThanOrEqual(lastSeen - 5);
  });
});
