/**
 * The fleet's inspection and controls (issue 4), on real runner processes:
 * - `baton pause` stops a job on every runner from its next fire — each runner writes a skip row
 *   whose reason starts with `paused by`, and no winner starts after the pause (checked by
 *   database time, one fire of margin) — while other jobs go on; `list` and `history` show the
 *   pause; `baton resume` brings the job back (new `done` winners).
 * - `baton explain` on a fire of three runners lists three attempts (one winner, two skips with
 *   their reasons) and nobody missing; after one runner is killed with SIGKILL, a later fire lists
 *   two attempts and names the killed runner as missing and gone; once it is restarted, that fire
 *   still names it — as `restarted` (its registry row now starts after the fire).
 * - `baton explain` without a fire time explains the schedule's latest fire even when no runner
 *   wrote a row for it (the job is gone from the only live runner's file): no attempts, the live
 *   runner named as without the job — not the older fire that has rows.
 * - `baton explain --gone-after`: a frozen runner (SIGSTOP: its lock session still open) is alive,
 *   lagging, within the default 15 s, and gone with `--gone-after 3s`; a bad value is 64.
 * - `baton show` prints one failed run in full (error, exit code, output tail), as text and JSON;
 *   an unknown run id is a usage error (64).
 */
import { describe, expect, it } from 'vitest';
import { baton, writeSchedule, type CliResult } from '../helpers/cli.js';
import { byFire, createTestDatabase, dbNow, runs, type RunRow } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['srv-01', 'srv-02', 'srv-03'];
const fleet = useFleet('inspect', { perTest: true });

/** `baton <args> --config <config> --database-url <the fleet's>`. */
/** As the operator `ops` (SUDO_USER: the person who ran sudo is the one recorded). */
function cli(config: string, ...args: string[]): Promise<CliResult> {
  return baton([...args, '--config', config, '--database-url', fleet.db.url], {
    env: { SUDO_USER: 'ops' },
  });
}

function json<T>(r: CliResult): T {
  expect(r.stderr, r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as T;
}

/** Rows of `job` at fires in [from, to), grouped by fire. */
async function firesBetween(job: string, from: Date, to = new Date(8.64e15)) {
  return byFire(
    (await runs(fleet.db, job)).filter((r) => r.scheduled_at >= from && r.scheduled_at < to),
  );
}

/** The first fire at or after `from` that has `count` rows, once it has them. */
async function fireWithRows(job: string, from: Date, count: number): Promise<[Date, RunRow[]]> {
  return waitFor(
    `a fire of ${job} from ${from.toISOString()} with ${count} rows`,
    async () => {
      for (const [at, rows] of await firesBetween(job, from)) {
        if (rows.length === count && rows.some((r) => r.winner === 1 && r.status === 'done')) {
          return [new Date(at), rows] as [Date, RunRow[]];
        }
      }
      return null;
    },
    { timeoutMs: 20_000 },
  );
}

interface ExplainJson {
  job: string;
  scheduledAt: string | null;
  latestFromSchedule?: boolean;
  notes?: string[];
  verdict: string;
  attempts: { host: string; winner: boolean; status: string; reason: string | null }[];
  missing: string[];
  missingRunners: { host: string; state: string; alive: boolean; detail: string }[];
}

interface ListJson {
  jobs: {
    name: string;
    paused: boolean | null;
    pause: { pausedBy: string; pausedAt: string; reason: string | null } | null;
  }[];
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
    await waitFor(
      'three paused fires of tick, each with three skip rows',
      async () =>
        [...(await firesBetween('tick', cutoff)).values()].filter((rows) => rows.length === 3)
          .length >= 3,
      { timeoutMs: 20_000 },
    );
    const otherAfterPause = await fireWithRows('other', cutoff, 3);
    expect(otherAfterPause[1].filter((r) => r.winner === 1)).toHaveLength(1);

    // While paused: list and history show it.
    const listed = json<ListJson>(await cli(config, 'list', '--json'));
    const tickListed = listed.jobs.find((j) => j.name === 'tick')!;
    expect(tickListed.paused).toBe(true);
    expect(tickListed.pause).toMatchObject({ pausedBy: 'ops@ops-1', reason: 'maintenance window' });
    expect(listed.jobs.find((j) => j.name === 'other')).toMatchObject({
      paused: false,
      pause: null,
    });
    const table = await cli(config, 'list', '-o', 'wide');
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toContain('PAUSED');
    expect(table.stdout.split('\n').find((l) => l.startsWith('tick '))).toContain(
      'yes, by ops@ops-1',
    );
    const history = await cli(config, 'history', 'tick', '--limit', '6', '-o', 'wide');
    expect(history.code).toBe(0);
    expect(history.stderr).toMatch(
      /^baton: note: tick is paused by ops@ops-1 at \S+: maintenance window\n$/,
    );
    expect(history.stdout).toContain('paused by ops@ops-1 at ');
    const otherHistory = await cli(config, 'history', 'other', '--limit', '3');
    expect(otherHistory.stderr).toBe('');

    const explained = json<ExplainJson>(await cli(config, 'explain', 'tick', '--json'));
    expect(explained.verdict).toMatch(
      /^nobody ran it: \d runners? skipped it \(paused by ops@ops-1 at /,
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
    await fireWithRows('tick', back, 3);
    await fireWithRows('tick', new Date(back.getTime() + 1_000), 3);

    const stillPaused = await firesBetween('tick', cutoff, resumeAsked);
    const codes = await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expect(codes).toEqual([0, 0, 0]);

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
    const again = await cli(config, 'resume', 'tick');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('tick was not paused in namespace "pause-test"');
    const listedAfter = json<ListJson>(await cli(config, 'list', '--json'));
    expect(listedAfter.jobs.find((j) => j.name === 'tick')).toMatchObject({ paused: false });
    expect((await cli(config, 'history', 'tick', '--limit', '1')).stderr).toBe('');
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
      const unmigrated = await bare('pause', 'tick');
      expect(unmigrated.code).toBe(69);
      expect(unmigrated.stderr).toContain('run `baton migrate`');
      expect((await bare('resume', 'tick')).code).toBe(69);
      // `list` still works without the pauses table: nothing is paused there.
      const listed = json<ListJson>(await bare('list', '--json'));
      expect(listed.jobs[0]).toMatchObject({ name: 'tick', paused: false });
      expect(await empty.query('SHOW TABLES')).toEqual([]);
    } finally {
      await empty.drop();
    }

    // The fleet's database is migrated (as `baton migrate` leaves it).
    const badName = await cli(config, 'pause', 'no such job');
    expect(badName.code).toBe(64);
    expect(badName.stderr).toContain('job name may contain only');
    // A job the file does not have is refused (cli-usage.test.ts), unless forced.
    expect((await cli(config, 'pause', 'nightly', '--host', 'ops-2')).code).toBe(64);
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
    const offline = await baton([
      'list',
      '-o',
      'wide',
      '--config',
      config,
      '--database-url',
      'mysql://root@127.0.0.1:1/x',
    ]);
    expect(offline.code).toBe(0);
    expect(offline.stdout).toContain('tick ');
    expect(offline.stdout).not.toContain('PAUSED');
    expect(offline.stderr).toMatch(/^baton: note: pauses not shown: .*ECONNREFUSED/);
  });
});

describe('baton explain', () => {
  it('lists three attempts for a fire of three runners, and names a runner killed before a later fire', async () => {
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

    const j1 = json<ExplainJson>(
      await cli(config, 'explain', 'tick', fire1.toISOString(), '--json'),
    );
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
    // The human form: the verdict first, then a row per attempt. A fire without an offset is UTC.
    const text = await cli(
      config,
      'explain',
      'tick',
      fire1.toISOString().replace('T', ' ').replace('Z', ''),
    );
    expect(text.code).toBe(0);
    const lines = text.stdout.split('\n');
    expect(lines[0]).toBe(j1.verdict);
    for (const host of HOSTS) expect(lines.some((l) => l.startsWith(`${host} `))).toBe(true);
    expect(text.stdout).toContain('no attempt missing');

    // srv-03 dies without a word; a later fire has two attempts and names it.
    await runners[2]!.stop('SIGKILL');
    const killedAt = await dbNow(fleet.db);
    const [fire2, rows2] = await fireWithRows('tick', new Date(killedAt.getTime() + 1_000), 2);
    expect(new Set(rows2.map((r) => r.host))).toEqual(new Set(['srv-01', 'srv-02']));
    const j2 = json<ExplainJson>(
      await cli(config, 'explain', 'tick', fire2.toISOString(), '--json'),
    );
    expect(j2.attempts).toHaveLength(2);
    expect(j2.attempts.filter((a) => a.winner)).toHaveLength(1);
    expect(j2.missing).toEqual(['srv-03']);
    expect(j2.missingRunners).toEqual([
      expect.objectContaining({ host: 'srv-03', state: 'gone', alive: false }),
    ]);
    expect(j2.verdict).toMatch(/; srv-03 left no attempt \(gone since \S+ \S+\)$/);
    const text2 = await cli(config, 'explain', 'tick', fire2.toISOString());
    expect(text2.stdout.split('\n')[0]).toBe(j2.verdict);
    expect(text2.stdout).toMatch(/^srv-03 +\d+ +gone /m);

    // Without a fire time: the latest fire, which srv-03 missed too.
    const latestBefore = await dbNow(fleet.db);
    const j3 = json<ExplainJson>(await cli(config, 'explain', 'tick', '--json'));
    expect(new Date(j3.scheduledAt!).getTime()).toBeGreaterThanOrEqual(
      Math.floor(latestBefore.getTime() / 1000) * 1000 - 2_000,
    );
    expect(j3.missing).toContain('srv-03');

    // An instant with no rows at all: nobody attempted it; the runners there are listed.
    const between = new Date(fire2.getTime() + 500);
    const j4 = json<ExplainJson>(
      await cli(config, 'explain', 'tick', between.toISOString(), '--json'),
    );
    expect(j4.attempts).toEqual([]);
    expect(j4.verdict).toMatch(/^nobody attempted it: .* is not a fire of "\* \* \* \* \* \*"/);
    expect(j4.missing).toEqual(HOSTS);
    expect(j4.missingRunners.map((m) => [m.host, m.alive])).toEqual([
      ['srv-01', true],
      ['srv-02', true],
      ['srv-03', false],
    ]);
    const future = new Date(Math.ceil(Date.now() / 1000) * 1000 + 3_600_000);
    const j5 = json<ExplainJson>(
      await cli(config, 'explain', 'tick', future.toISOString(), '--json'),
    );
    expect(j5.verdict).toMatch(/^nobody attempted it: this fire has not come yet/);

    // srv-03 comes back: its registry row now starts after fire2, and it took part in the job
    // before that fire — named as restarted, no longer left out.
    const [again] = await fleet.start(['srv-03'], { config });
    const j6 = json<ExplainJson>(
      await cli(config, 'explain', 'tick', fire2.toISOString(), '--json'),
    );
    expect(j6.attempts).toHaveLength(2);
    expect(j6.missing).toEqual(['srv-03']);
    expect(j6.missingRunners).toEqual([
      expect.objectContaining({
        host: 'srv-03',
        state: 'restarted',
        alive: true,
        detail: expect.stringMatching(/^restarted at \S+ \S+ — down or starting at the fire$/),
      }),
    ]);
    expect(j6.verdict).toMatch(
      /; srv-03 left no attempt \(restarted at \S+ \S+: down or starting at the fire\)$/,
    );

    // A job of the file that never fired: said so, exit 0. Unknown jobs and bad times: 64.
    const never = await cli(config, 'explain', 'never');
    expect(never.code).toBe(0);
    expect(never.stdout).toContain('never has not fired yet');
    const unknown = await cli(config, 'explain', 'nope');
    expect(unknown.code).toBe(64);
    expect(unknown.stderr).toContain('unknown job "nope"');
    for (const bad of ['yesterday', '2026-13-01T00:00:00Z', '12:00']) {
      const r = await cli(config, 'explain', 'tick', bad);
      expect(r.code, bad).toBe(64);
      expect(r.stderr, bad).toContain('not an ISO-8601 instant');
    }

    await Promise.all([...runners.slice(0, 2), again!].map((r) => r.stop('SIGTERM')));
    expectQuiet(runners.slice(0, 2));
    // A runner restarted seconds after a kill -9 takes its host's row back: no "another runner
    // uses the host id" — the old one's lock session ended with it.
    expect(again!.errors(), 'srv-03 restarted after kill -9').toEqual([]);
    expect(again!.stderr).toBe('');
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
    expect(await Promise.all(first.map((r) => r.stop('SIGTERM')))).toEqual([0, 0]);
    // srv-01 comes back with a file that has no tick; srv-02 stays down.
    const [srv01] = await fleet.start(['srv-01'], { config: withoutTick });
    const [last] = await fleet.db.query<{ at: Date }>(
      "SELECT MAX(scheduled_at) AS at FROM baton_runs WHERE job = 'tick'",
    );
    await waitFor('two fires of tick with nobody to run them', async () => {
      return (await dbNow(fleet.db)).getTime() > last!.at.getTime() + 2_000;
    });

    const j = json<ExplainJson>(await cli(withTick, 'explain', 'tick', '--json'));
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
    const text = await cli(withTick, 'explain', 'tick');
    expect(text.code).toBe(0);
    expect(text.stdout.split('\n')[0]).toMatch(/^nobody attempted it/);
    expect(text.stdout).toMatch(/^fire: +\S+ \S+ UTC \(the latest\)$/m);
    expect(text.stdout).toContain("note:       the latest fire by the schedules file's schedule");

    // Given explicitly, the fire with rows is still there to explain.
    const older = json<ExplainJson>(
      await cli(withTick, 'explain', 'tick', last!.at.toISOString(), '--json'),
    );
    expect(older.attempts.map((a) => a.host).sort()).toEqual(['srv-01', 'srv-02']);
    await srv01!.stop('SIGTERM');
    expectQuiet([...first, srv01!]);
  });

  it('--gone-after: a frozen runner is alive for 15 s by default, gone after a shorter window', async () => {
    const config = writeSchedule(`
namespace: explain-gone
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const runners = await fleet.start(['srv-01', 'srv-02'], {
      config,
      args: ['--registry-interval', '1s'],
    });
    await fireWithRows('tick', await dbNow(fleet.db), 2);
    runners[1]!.child.kill('SIGSTOP');
    const frozenAt = await dbNow(fleet.db);
    try {
      // A fire 4 s after the freeze: srv-01's row only (its winner, or its skip when the frozen
      // runner happened to hold the job's lock).
      const fire = await waitFor(
        'a fire 4 s after the freeze with srv-01 only',
        async () => {
          for (const [at, rows] of await firesBetween(
            'tick',
            new Date(frozenAt.getTime() + 4_000),
          )) {
            if (rows.length === 1 && rows[0]!.host === 'srv-01') return new Date(at);
          }
          return null;
        },
        { timeoutMs: 20_000 },
      );
      const byDefault = json<ExplainJson>(
        await cli(config, 'explain', 'tick', fire.toISOString(), '--json'),
      );
      expect(byDefault.missingRunners).toEqual([
        expect.objectContaining({ host: 'srv-02', state: 'lagging', alive: true }),
      ]);
      const quick = json<ExplainJson>(
        await cli(config, 'explain', 'tick', fire.toISOString(), '--json', '--gone-after', '3s'),
      );
      expect(quick.missingRunners).toEqual([
        expect.objectContaining({
          host: 'srv-02',
          state: 'gone',
          alive: false,
          detail: expect.stringMatching(/^gone since .*\(no heartbeat for \S+: crashed, killed/),
        }),
      ]);
      expect(quick.verdict).toMatch(/; srv-02 left no attempt \(gone since \S+ \S+\)$/);
      const bad = await cli(config, 'explain', 'tick', '--gone-after', 'soon');
      expect(bad.code).toBe(64);
      expect(bad.stderr).toContain('--gone-after "soon"');
    } finally {
      runners[1]!.child.kill('SIGCONT');
    }
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expectQuiet(runners.slice(0, 1));
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
    const failed = await waitFor('a failed run of boom', async () => {
      const [row] = await fleet.db.query<RunRow>(
        "SELECT * FROM baton_runs WHERE job = 'boom' AND status = 'failed' ORDER BY id LIMIT 1",
      );
      return row;
    });
    await runner!.stop('SIGTERM');

    const text = await cli(config, 'show', String(failed.id));
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    const field = (key: string) =>
      text.stdout
        .split('\n')
        .find((l) => l.startsWith(`${key}:`))
        ?.slice(key.length + 1)
        .trim();
    expect(field('id')).toBe(String(failed.id));
    expect(field('job')).toBe('boom');
    expect(field('namespace')).toBe('show-test');
    expect(field('status')).toBe('failed');
    expect(field('exit code')).toBe('3');
    expect(field('error')).toBe('exited with code 3');
    expect(field('host')).toBe(`srv-01 (pid ${failed.pid})`);
    const tail = text.stdout.slice(text.stdout.indexOf('\noutput tail'));
    expect(tail).toContain('to-stdout\n');
    expect(tail).toContain('to-stderr\n');

    const j = json<Record<string, unknown>>(await cli(config, 'show', String(failed.id), '--json'));
    expect(j).toEqual({
      id: failed.id,
      job: 'boom',
      scheduledAt: failed.scheduled_at.toISOString(),
      rerun: 0,
      winner: true,
      workerSlot: 1,
      trigger: 'schedule',
      status: 'failed',
      reason: null,
      reasonKind: null,
      host: 'srv-01',
      pid: failed.pid,
      startedAt: failed.started_at.toISOString(),
      finishedAt: failed.finished_at!.toISOString(),
      durationMs: failed.finished_at!.getTime() - failed.started_at.getTime(),
      exitCode: 3,
      attempts: 1,
      error: 'exited with code 3',
      namespace: 'show-test',
      lockConnectionId: expect.any(Number),
      outputTail: failed.output_tail,
      params: null,
      actions: [],
    });
    expect(j.outputTail).toMatch(/to-stdout\n/);
    expect(j.outputTail).toMatch(/to-stderr\n/);

    const unknown = await cli(config, 'show', String(failed.id + 100_000));
    expect(unknown.code).toBe(64);
    expect(unknown.stderr).toContain(`no run with id ${failed.id + 100_000}`);
    const notANumber = await cli(config, 'show', 'abc');
    expect(notANumber.code).toBe(64);
    expect(notANumber.stderr).toContain('expected a positive whole number');
    expectQuiet([runner!]);
  });
});
