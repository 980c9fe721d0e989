/**
 * The fleet's inspection and controls (issue 4), with runners in the test process
 * (in-process-fleet.ts; the jobs are real processes) and the CLI under test as processes: what is
 * judged is `baton pause/resume/list/history/explain/show`'s output and exit codes.
 * - `baton pause` stops a job on every runner from its next fire — each runner writes a skip row
 *   whose reason starts with `paused by`, and no winner starts after the pause (checked by
 *   database time, one fire of margin) — while other jobs go on; `list` and `history` show the
 *   pause; `baton resume` brings the job back (new `done` winners).
 * - `baton explain` on a fire of three runners lists three attempts (one winner, two skips with
 *   their reasons) and nobody missing; an instant with no rows names every runner there, alive; a
 *   fire to come, a job that never fired, an unknown job and bad times or `--gone-after` values.
 * - `baton explain` without a fire time explains the schedule's latest fire even when no runner
 *   wrote a row for it (the job is gone from the only live runner's file): no attempts, the live
 *   runner named as without the job — not the older fire that has rows.
 * - `baton show` prints one failed run in full (error, exit code, output tail), as text and JSON;
 *   an unknown run id is a usage error (64).
 *
 * What needs a runner killed (SIGKILL: missing, gone, restarted) or frozen (SIGSTOP, for
 * `--gone-after`) is in e2e/inspect.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { writeSchedule, type CliResult } from '../helpers/cli.js';
import { baton } from '../helpers/cli-in-process.js';
import { createTestDatabase, dbNow, runs, type RunRow } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { expectQuiet } from '../helpers/fleet.js';
import { useInProcessFleet, type InProcessRunner } from '../helpers/in-process-fleet.js';
import {
  fireWithRows as fireWithRowsIn,
  firesBetween as firesBetweenIn,
  inspectCli,
  json,
  untilPast,
  type ExplainJson,
  type ListJson,
} from '../helpers/inspect.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['srv-01', 'srv-02', 'srv-03'];
const fleet = useInProcessFleet('inspect', { perTest: true });

/** `baton <args> --config <config> --database-url <the fleet's>`, as the operator `ops`. */
function cli(config: string, ...args: string[]): Promise<CliResult> {
  return inspectCli(fleet.db, config, ...args);
}

function firesBetween(job: string, from: Date, to?: Date) {
  return firesBetweenIn(fleet.db, job, from, to);
}

function fireWithRows(job: string, from: Date, count: number) {
  return fireWithRowsIn(fleet.db, job, from, count);
}

/** A graceful stop, as SIGTERM to `baton start` (exit 0 there): it ends with `runner stopped`. */
async function stopCleanly(runners: InProcessRunner[]): Promise<void> {
  await Promise.all(runners.map((r) => r.stop()));
  for (const r of runners) {
    expect(
      r.lines.some((l) => l.msg === 'runner stopped'),
      `${r.host} stopped`,
    ).toBe(true);
  }
}

describe('baton pause / resume', () => {
  it('stops a job on every runner at its next fire, shows it in list and history, and resume brings it back', async () => {
    const config = writeSchedule(`
namespace: pause-test
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["sleep", "0.03"]
  other:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const runners = await fleet.start(HOSTS, { config });
    await fireWithRows('tick', await dbNow(fleet.db), 3);

    const paused = await cli(
      config,
      'pause',
      'tick',
      '--reason',
      'maintenance window',
      '--host',
      'ops-1',
    );
    expect(paused.stderr).toBe('');
    expect(paused.code).toBe(0);
    expect(paused.stdout).toContain(
      'paused tick in namespace "pause-test": paused by ops@ops-1 at ',
    );
    // Any fire whose runners looked for a pause after it was stored skips; one second of margin
    // covers a fire that was already past that look when the pause landed.
    const cutoff = new Date((await dbNow(fleet.db)).getTime() + 1_000);
    // While paused, list shows it, and history says it of tick alone: asked while the paused
    // fires come (each command only reads).
    const listing = Promise.all([
      cli(config, 'list', '--json'),
      cli(config, 'list', '-o', 'wide'),
      cli(config, 'history', 'other', '--limit', '3'),
    ]);
    // Three fires from the cutoff: each runner has skipped the third as paused (it writes its
    // row before it says so), and the three fires have their rows; they are judged below.
    const thirdFire = Math.ceil(cutoff.getTime() / 1_000) * 1_000 + 2_000;
    await Promise.all(
      runners.map((r) =>
        r.nextEvent(
          'fire:skipped',
          (e) =>
            e.fire.job === 'tick' &&
            e.kind === 'paused' &&
            e.runId != null &&
            e.fire.scheduledAt.getTime() >= thirdFire,
        ),
      ),
    );
    await waitFor(
      'three paused fires of tick, each with three skip rows',
      async () =>
        [...(await firesBetween('tick', cutoff)).values()].filter((rows) => rows.length === 3)
          .length >= 3,
    );
    const otherAfterPause = await fireWithRows('other', cutoff, 3);
    expect(otherAfterPause[1].filter((r) => r.winner === 1)).toHaveLength(1);

    // History and explain show the paused fires.
    const [[listedResult, table, otherHistory], history, explainedResult] = await Promise.all([
      listing,
      cli(config, 'history', 'tick', '--limit', '6', '-o', 'wide'),
      // The third paused fire by its time: "the latest fire" could be a newer one whose rows
      // are still being written.
      cli(config, 'explain', 'tick', new Date(thirdFire).toISOString(), '--json'),
    ]);
    const listed = json<ListJson>(listedResult);
    const tickListed = listed.jobs.find((j) => j.name === 'tick')!;
    expect(tickListed.paused).toBe(true);
    expect(tickListed.pause).toMatchObject({ pausedBy: 'ops@ops-1', reason: 'maintenance window' });
    expect(listed.jobs.find((j) => j.name === 'other')).toMatchObject({
      paused: false,
      pause: null,
    });
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toContain('PAUSED');
    expect(table.stdout.split('\n').find((l) => l.startsWith('tick '))).toContain(
      'yes, by ops@ops-1',
    );
    expect(history.code).toBe(0);
    expect(history.stderr).toMatch(
      /^baton: note: tick is paused by ops@ops-1 at \S+: maintenance window\n$/,
    );
    expect(history.stdout).toContain('paused by ops@ops-1 at ');
    expect(otherHistory.stderr).toBe('');
    const explained = json<ExplainJson>(explainedResult);
    expect(explained.verdict).toMatch(
      /^nobody ran it: 3 runners skipped it \(paused by ops@ops-1 at /,
    );

    // The pause holds until the resume is asked for: a fire after that may run (the command
    // takes a moment to exit, and the test to read the time after it).
    const resumeAsked = await dbNow(fleet.db);
    const resumed = await cli(config, 'resume', 'tick');
    expect(resumed.stderr).toBe('');
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toContain(
      'resumed tick in namespace "pause-test" (it was paused by ops@ops-1',
    );
    const resumedAt = await dbNow(fleet.db);
    const back = new Date(resumedAt.getTime() + 1_000);
    // After the resume: nothing paused any more (asked while the fires after it come).
    const [, , again, listedAfter, historyAfter] = await Promise.all([
      fireWithRows('tick', back, 3),
      fireWithRows('tick', new Date(back.getTime() + 1_000), 3),
      cli(config, 'resume', 'tick'),
      cli(config, 'list', '--json'),
      cli(config, 'history', 'tick', '--limit', '1'),
    ]);

    const stillPaused = await firesBetween('tick', cutoff, resumeAsked);
    await stopCleanly(runners);

    // The guarantee: from the cutoff until the resume, not one winner of tick started — by fire
    // instant or by start time — and every fire has one paused skip row per runner.
    const rows = await runs(fleet.db, 'tick');
    const startedWhilePaused = rows.filter(
      (r) =>
        r.winner === 1 &&
        ((r.scheduled_at >= cutoff && r.scheduled_at < resumeAsked) ||
          (r.started_at >= cutoff && r.started_at < resumeAsked)),
    );
    expect(startedWhilePaused).toEqual([]);
    // Every fire has its winner, or is skipped by every runner because it was paused.
    expectOneWinnerPerFire(rows, 'tick', { noWinner: ['paused'] });
    expect(stillPaused.size).toBeGreaterThanOrEqual(3);
    for (const [at, fireRows] of stillPaused) {
      const label = new Date(at).toISOString();
      // The last fire before the resume may have been caught by it half-way.
      if (fireRows.length < 3 && at > resumeAsked.getTime() - 2_000) continue;
      expect(
        fireRows.map((r) => r.status),
        label,
      ).toEqual(['skipped', 'skipped', 'skipped']);
      expect(new Set(fireRows.map((r) => r.host)), label).toEqual(new Set(HOSTS));
      for (const r of fireRows) {
        expect(r.winner, label).toBeNull();
        expect(r.triggered_by, label).toBe('schedule');
        expect(r.reason, label).toMatch(/^paused by ops@ops-1 at \S+: maintenance window$/);
      }
    }
    // After the resume: every fire from a second later has one done winner and no paused row.
    const afterResume = await firesBetween('tick', back);
    expect(afterResume.size).toBeGreaterThanOrEqual(2);
    for (const [at, fireRows] of afterResume) {
      const label = new Date(at).toISOString();
      expect(
        fireRows.filter((r) => r.winner === 1).map((r) => r.status),
        label,
      ).toEqual(['done']);
      expect(
        fireRows.filter((r) => r.reason?.startsWith('paused')),
        label,
      ).toEqual([]);
    }
    // The other job never stopped.
    const otherWhilePaused = await firesBetween('other', cutoff, resumedAt);
    expect(otherWhilePaused.size).toBeGreaterThanOrEqual(3);
    for (const [at, fireRows] of otherWhilePaused) {
      expect(
        fireRows.filter((r) => r.winner === 1),
        new Date(at).toISOString(),
      ).toHaveLength(1);
    }

    // After the resume: nothing paused any more.
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('tick was not paused in namespace "pause-test"');
    expect(json<ListJson>(listedAfter).jobs.find((j) => j.name === 'tick')).toMatchObject({
      paused: false,
    });
    expect(historyAfter.stderr).toBe('');
    expectQuiet(runners);
  });

  it('needs a migrated database, checks the job name, and refuses a job not in the file unless --force', async () => {
    const config = writeSchedule(`
namespace: pause-cli
jobs:
  tick:
    schedule: "0 3 * * *"
    command: ["true"]
`);
    // A database nobody has started baton on: a clear 69 that says what to do.
    const empty = await createTestDatabase('pause_cli_empty');
    try {
      const bare = (...args: string[]) =>
        baton([...args, '--config', config, '--database-url', empty.url]);
      const [unmigrated, unmigratedResume, listedResult] = await Promise.all([
        bare('pause', 'tick'),
        bare('resume', 'tick'),
        bare('list', '--json'),
      ]);
      expect(unmigrated.code).toBe(69);
      expect(unmigrated.stderr).toContain('run `baton migrate`');
      expect(unmigratedResume.code).toBe(69);
      // `list` still works without the pauses table: nothing is paused there.
      const listed = json<ListJson>(listedResult);
      expect(listed.jobs[0]).toMatchObject({ name: 'tick', paused: false });
      expect(await empty.query('SHOW TABLES')).toEqual([]);
    } finally {
      await empty.drop();
    }

    // The fleet's database is migrated (as `baton migrate` leaves it). What is refused changes
    // nothing, and list without a database reads none: asked side by side.
    const [badName, notInFile, offline] = await Promise.all([
      cli(config, 'pause', 'no such job'),
      cli(config, 'pause', 'nightly', '--host', 'ops-2'),
      baton([
        'list',
        '-o',
        'wide',
        '--config',
        config,
        '--database-url',
        'mysql://root@127.0.0.1:1/x',
      ]),
    ]);
    expect(badName.code).toBe(64);
    expect(badName.stderr).toContain('job name may contain only');
    // A job the file does not have is refused (cli-usage.test.ts), unless forced.
    expect(notInFile.code).toBe(64);
    expect(await fleet.db.query('SELECT * FROM baton_pauses')).toEqual([]);
    const stranger = await cli(config, 'pause', 'nightly', '--host', 'ops-2', '--force');
    expect(stranger.code).toBe(0);
    expect(stranger.stderr).toContain('"nightly" is not a known job; paused it anyway');
    const [row] = await fleet.db.query<{ job: string; paused_by: string; reason: string | null }>(
      'SELECT job, paused_by, reason FROM baton_pauses WHERE namespace = ?',
      ['pause-cli'],
    );
    expect(row).toEqual({ job: 'nightly', paused_by: 'ops@ops-2', reason: null });
    const twice = await cli(config, 'pause', 'nightly', '--host', 'ops-3', '--reason', 'again');
    expect(twice.code).toBe(0);
    expect(twice.stdout).toContain('nightly was already paused by ops@ops-2 at ');
    expect((await cli(config, 'resume', 'nightly')).stdout).toContain('resumed nightly');
    expect(await fleet.db.query('SELECT * FROM baton_pauses')).toEqual([]);
    // Without a database at all, list still lists: without the column, with a note on stderr
    // because this database was named explicitly.
    expect(offline.code).toBe(0);
    expect(offline.stdout).toContain('tick ');
    expect(offline.stdout).not.toContain('PAUSED');
    expect(offline.stderr).toMatch(/^baton: note: pauses not shown: .*ECONNREFUSED/);
  });
});

describe('baton explain', () => {
  it('lists three attempts for a fire of three runners and nobody missing; an instant without rows, a fire to come, a job that never fired; bad input is 64', async () => {
    const config = writeSchedule(`
namespace: explain-test
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["sleep", "0.03"]
  never:
    schedule: "0 3 1 1 *"
    command: ["true"]
`);
    const runners = await fleet.start(HOSTS, { config });
    const [fire1, rows1] = await fireWithRows('tick', await dbNow(fleet.db), 3);
    const winner1 = rows1.find((r) => r.winner === 1)!;

    // Every question about this fleet (each command only reads).
    const between = new Date(fire1.getTime() + 500);
    await untilPast(fleet.db, between);
    const future = new Date(Math.ceil(Date.now() / 1000) * 1000 + 3_600_000);
    const badTimes = ['yesterday', '2026-13-01T00:00:00Z', '12:00'];
    const [j1Result, text, j4Result, j5Result, never, unknown, badGoneAfter, ...bad] =
      await Promise.all([
        cli(config, 'explain', 'tick', fire1.toISOString(), '--json'),
        // The human form. A fire without an offset is UTC.
        cli(config, 'explain', 'tick', fire1.toISOString().replace('T', ' ').replace('Z', '')),
        cli(config, 'explain', 'tick', between.toISOString(), '--json'),
        cli(config, 'explain', 'tick', future.toISOString(), '--json'),
        cli(config, 'explain', 'never'),
        cli(config, 'explain', 'nope'),
        cli(config, 'explain', 'tick', '--gone-after', 'soon'),
        ...badTimes.map((t) => cli(config, 'explain', 'tick', t)),
      ]);

    const j1 = json<ExplainJson>(j1Result);
    expect(j1.job).toBe('tick');
    expect(j1.scheduledAt).toBe(fire1.toISOString());
    expect(j1.attempts).toHaveLength(3);
    expect(new Set(j1.attempts.map((a) => a.host))).toEqual(new Set(HOSTS));
    expect(j1.attempts.filter((a) => a.winner)).toEqual([
      expect.objectContaining({ host: winner1.host, status: 'done', reason: null }),
    ]);
    const skips = j1.attempts.filter((a) => !a.winner);
    expect(skips.map((a) => a.status)).toEqual(['skipped', 'skipped']);
    for (const s of skips) {
      expect(s.reason).toMatch(
        new RegExp(
          `^this fire (is being claimed by|is running on|already ran on) ${winner1.host} `,
        ),
      );
    }
    expect(j1.missing).toEqual([]);
    expect(j1.verdict).toMatch(
      new RegExp(`^ran on ${winner1.host} \\(done in \\S+\\); 2 runners skipped$`),
    );
    // The human form: the verdict first, then a row per attempt.
    expect(text.code).toBe(0);
    const lines = text.stdout.split('\n');
    expect(lines[0]).toBe(j1.verdict);
    for (const host of HOSTS) expect(lines.some((l) => l.startsWith(`${host} `))).toBe(true);
    expect(text.stdout).toContain('no attempt missing');

    // An instant with no rows at all: nobody attempted it; the runners there are listed.
    const j4 = json<ExplainJson>(j4Result);
    expect(j4.attempts).toEqual([]);
    expect(j4.verdict).toMatch(/^nobody attempted it: .* is not a fire of "\* \* \* \* \* \*"/);
    expect(j4.missing).toEqual(HOSTS);
    expect(j4.missingRunners.map((m) => [m.host, m.alive])).toEqual([
      ['srv-01', true],
      ['srv-02', true],
      ['srv-03', true],
    ]);
    const j5 = json<ExplainJson>(j5Result);
    expect(j5.verdict).toMatch(/^nobody attempted it: this fire has not come yet/);

    // A job of the file that never fired: said so, exit 0. Unknown jobs and bad times: 64.
    expect(never.code).toBe(0);
    expect(never.stdout).toContain('never has not fired yet');
    expect(unknown.code).toBe(64);
    expect(unknown.stderr).toContain('unknown job "nope"');
    badTimes.forEach((t, i) => {
      expect(bad[i]!.code, t).toBe(64);
      expect(bad[i]!.stderr, t).toContain('not an ISO-8601 instant');
    });
    expect(badGoneAfter.code).toBe(64);
    expect(badGoneAfter.stderr).toContain('--gone-after "soon"');

    await stopCleanly(runners);
    expectQuiet(runners);
  });

  it("without a fire time: the schedule's latest fire, even when nobody wrote a row for it", async () => {
    const withTick = writeSchedule(`
namespace: explain-latest
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["sleep", "0.03"]
  other:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const withoutTick = writeSchedule(`
namespace: explain-latest
jobs:
  other:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const first = await fleet.start(['srv-01', 'srv-02'], { config: withTick });
    await fireWithRows('tick', await dbNow(fleet.db), 2);
    await stopCleanly(first);
    // srv-01 comes back with a file that has no tick; srv-02 stays down.
    const [srv01] = await fleet.start(['srv-01'], { config: withoutTick });
    const [last] = await fleet.db.query<{ at: Date }>(
      "SELECT MAX(scheduled_at) AS at FROM baton_runs WHERE job = 'tick'",
    );
    // Two fires of tick with nobody to run them: srv-01 has won a fire of `other` two seconds
    // after the last of tick (a claim waits for the database's clock to reach its fire).
    await srv01!.nextEvent(
      'fire:won',
      (e) => e.fire.job === 'other' && e.fire.scheduledAt.getTime() >= last!.at.getTime() + 2_000,
    );

    const [jResult, text, olderResult] = await Promise.all([
      cli(withTick, 'explain', 'tick', '--json'),
      cli(withTick, 'explain', 'tick'),
      // Given explicitly, the fire with rows is still there to explain.
      cli(withTick, 'explain', 'tick', last!.at.toISOString(), '--json'),
    ]);
    const j = json<ExplainJson>(jResult);
    expect(Date.parse(j.scheduledAt!)).toBeGreaterThan(last!.at.getTime() + 1_000);
    expect(Date.parse(j.scheduledAt!) % 1_000).toBe(0);
    expect(j.latestFromSchedule).toBe(true);
    expect(j.attempts).toEqual([]);
    expect(j.missing).toEqual(['srv-01']);
    expect(j.missingRunners).toEqual([
      expect.objectContaining({ host: 'srv-01', state: 'no-job', alive: true }),
    ]);
    expect(j.verdict).toMatch(
      /^nobody attempted it( yet: the fire was \S+ ago|: no runner wrote a row for this fire); srv-01 left no attempt \(alive, without this job in its schedule\)$/,
    );
    expect(text.code).toBe(0);
    expect(text.stdout.split('\n')[0]).toMatch(/^nobody attempted it/);
    expect(text.stdout).toMatch(/^fire: +\S+ \S+ UTC \(the latest\)$/m);
    expect(text.stdout).toContain("note:       the latest fire by the schedules file's schedule");

    const older = json<ExplainJson>(olderResult);
    expect(older.attempts.map((a) => a.host).sort()).toEqual(['srv-01', 'srv-02']);
    await stopCleanly([srv01!]);
    expectQuiet([...first, srv01!]);
  });
});

describe('baton show', () => {
  it('shows a failed run in full with its error and output tail; an unknown id is 64', async () => {
    const config = writeSchedule(`
namespace: show-test
jobs:
  boom:
    schedule: "* * * * * *"
    command: ["sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"]
`);
    const [runner] = await fleet.start(['srv-01'], { config });
    const finished = await runner!.nextEvent(
      'run:finished',
      (e) => e.fire.job === 'boom' && e.status === 'failed',
    );
    await runner!.stop();
    const [failed] = await fleet.db.query<RunRow>('SELECT * FROM baton_runs WHERE id = ?', [
      finished.runId,
    ]);
    expect(failed).toBeDefined();

    const [text, jResult, unknown, notANumber] = await Promise.all([
      cli(config, 'show', String(failed!.id)),
      cli(config, 'show', String(failed!.id), '--json'),
      cli(config, 'show', String(failed!.id + 100_000)),
      cli(config, 'show', 'abc'),
    ]);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    const field = (key: string) =>
      text.stdout
        .split('\n')
        .find((l) => l.startsWith(`${key}:`))
        ?.slice(key.length + 1)
        .trim();
    expect(field('id')).toBe(String(failed!.id));
    expect(field('job')).toBe('boom');
    expect(field('namespace')).toBe('show-test');
    expect(field('status')).toBe('failed');
    expect(field('exit code')).toBe('3');
    expect(field('error')).toBe('exited with code 3');
    expect(field('host')).toBe(`srv-01 (pid ${failed!.pid})`);
    const tail = text.stdout.slice(text.stdout.indexOf('\noutput tail'));
    expect(tail).toContain('to-stdout\n');
    expect(tail).toContain('to-stderr\n');

    const j = json<Record<string, unknown>>(jResult);
    expect(j).toEqual({
      id: failed!.id,
      job: 'boom',
      scheduledAt: failed!.scheduled_at.toISOString(),
      rerun: 0,
      winner: true,
      workerSlot: 1,
      trigger: 'schedule',
      status: 'failed',
      reason: null,
      reasonKind: null,
      host: 'srv-01',
      pid: failed!.pid,
      startedAt: failed!.started_at.toISOString(),
      finishedAt: failed!.finished_at!.toISOString(),
      durationMs: failed!.finished_at!.getTime() - failed!.started_at.getTime(),
      exitCode: 3,
      attempts: 1,
      error: 'exited with code 3',
      namespace: 'show-test',
      lockConnectionId: expect.any(Number),
      outputTail: failed!.output_tail,
      params: null,
      pool: null,
      // A scheduled fire's winner: its job's first timing version (docs/schedules.md).
      timingVersion: 1,
      warnAt: null,
      slowAt: null,
      tooShort: false,
      // No child job's run (`after:`): no parent runs behind it.
      upstream: null,
      actions: [],
    });
    expect(j.outputTail).toMatch(/to-stdout\n/);
    expect(j.outputTail).toMatch(/to-stderr\n/);

    expect(unknown.code).toBe(64);
    expect(unknown.stderr).toContain(`no run with id ${failed!.id + 100_000}`);
    expect(notANumber.code).toBe(64);
    expect(notANumber.stderr).toContain('expected a positive whole number');
    expectQuiet([runner!]);
  });
});
