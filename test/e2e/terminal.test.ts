/**
 * The CLI in an operator's terminal (issue 17), measured on real pseudo-terminals:
 * - `baton history` shows one line per fire — every line at most 80 columns on an 80-column
 *   terminal, and at most 80 into a pipe — with the winner's host, "skipped by 2", the job's
 *   local time where it has a zone, and long job and host names cut with '…'; a wider terminal
 *   gets wider lines. `--attempts` / `-o wide` shows every row.
 * - Colour on a terminal only: present on the pty, absent with NO_COLOR=1 and into a pipe.
 * - `baton list` fits 80 columns too, with its flags (disabled, paused by, jitter).
 * - `--watch` redraws `history` and `status` until Ctrl-C (a real ^C typed into the terminal),
 *   which exits 0 and shows the cursor again.
 * - Shell completion offers the schedules file's job names without touching the database, and
 *   `baton show` the newest run ids from it — and answers quickly when the database does not.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';
import { byFire, dbNow, plantRun, runs } from '../helpers/db.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { batonOnPty, hasColour, runOnPty, stripAnsi } from '../helpers/pty.js';
import { waitFor } from '../helpers/wait.js';

const NAMESPACE = 'terminal-views';
const LONG_JOB = 'nightly-reconciliation-of-the-general-ledger-accounts';
const LONG_HOST = 'batch-runner-with-a-rather-long-name-03.eu-west-1.compute.internal';
const HOSTS = ['srv-01', 'srv-02', LONG_HOST];

const fleet = useFleet('terminal');
let config = '';
/** The instant of the planted fires nobody ran (beforeAll). */
let hourAgo = new Date(0);

/** The options every command of this file takes. */
const on = () => ['--config', config, '--database-url', fleet.db.url];

/** Every line of a view, colour codes removed, without the empty last one. */
function allLines(output: string): string[] {
  return stripAnsi(output).replace(/\n$/, '').split('\n');
}

/**
 * The lines of a view's table: on a terminal stderr shows too, and its notes (a paused job) are
 * left out, as is `history`'s first line, which names the namespace read.
 */
function lines(output: string): string[] {
  return allLines(output).filter(
    (l) => !l.startsWith('baton: note: ') && !l.startsWith('namespace "'),
  );
}

/**
 * New York's wall clock at `at` as LOCAL shows it, `22:30-05`: computed from the fire itself, so
 * that it is EDT's `-04` from March to November and EST's `-05` the rest of the year.
 */
function newYorkClock(at: Date): string {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: 'America/New_York',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
    timeZoneName: 'longOffset', // GMT-05:00
  }).formatToParts(at);
  const part = (type: string) => parts.find((p) => p.type === type)!.value;
  return `${part('hour')}:${part('minute')}${part('timeZoneName').slice(3, 6)}`;
}

/** Every line fits, the namespace line and the notes included. */
function expectFits(output: string, cols: number): void {
  for (const line of allLines(output)) expect([...line].length, line).toBeLessThanOrEqual(cols);
}

beforeAll(async () => {
  config = writeSchedule(`
namespace: ${NAMESPACE}
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["sleep", "0.03"]
  ${LONG_JOB}:
    schedule: "*/2 * * * * *"
    timezone: America/New_York
    command: ["sh", "-c", "exit 3"]
  settle:
    schedule: "0 3 * * *"
    timezone: Europe/Paris
    jitter: 5m
    command: ["true"]
  old-report:
    schedule: "*/15 9-17 * * 1-5"
    enabled: false
    command: ["true"]
`);
  const runners = await fleet.start(HOSTS, { config });
  const from = await dbNow(fleet.db);
  // Fires every runner took part in: one winner and two skips each.
  const fullFires = async (job: string) =>
    [...byFire((await runs(fleet.db, job)).filter((r) => r.scheduled_at > from)).values()].filter(
      (rows) => rows.length === 3,
    ).length;
  await waitFor(
    'six fires of tick and two of the long job with three rows each',
    async () => (await fullFires('tick')) >= 6 && (await fullFires(LONG_JOB)) >= 2,
    { timeoutMs: 30_000 },
  );
  expect(await Promise.all(runners.map((r) => r.stop('SIGTERM')))).toEqual([0, 0, 0]);
  expectQuiet(runners);
  // Two outcomes the runners above do not produce in seconds: a fire nobody attempted, and one
  // every runner skipped because the job was paused.
  hourAgo = new Date(Math.floor((Date.now() - 3_600_000) / 60_000) * 60_000);
  await plantRun(fleet.db, {
    namespace: NAMESPACE,
    job: 'settle',
    scheduledAt: hourAgo,
    status: 'missed',
    reasonKind: 'not-run',
    reason: 'nobody attempted this fire',
  });
  for (const host of HOSTS) {
    await plantRun(fleet.db, {
      namespace: NAMESPACE,
      job: 'old-report',
      scheduledAt: hourAgo,
      status: 'skipped',
      reasonKind: 'paused',
      reason: 'paused by ops-1 at 2026-12-01T00:00:00.000Z',
      host,
    });
  }
  const paused = await baton(['pause', 'settle', '--host', 'ops-1', ...on()]);
  expect(paused.code, paused.stderr).toBe(0);
}, 90_000);

describe('baton history on an 80-column terminal', () => {
  it('one line per fire, every line at most 80 columns, in colour', async () => {
    const { code, output } = await runOnPty(['history', '--limit', '8', ...on()]);
    expect(code, output).toBe(0);
    expectFits(output, 80);
    expect(hasColour(output)).toBe(true);
    expect(allLines(output)[0]).toMatch(/^namespace "terminal-views" \(from the schedules file /);
    const [head, ...rows] = lines(output);
    // LOCAL (the New York job's own clock) is the first column to go when the others need the
    // room (an AGO of "1m ago" on a slow machine): a wider terminal shows it, below.
    expect(head).toMatch(/^FIRE \(UTC\)\s+AGO\s+(LOCAL\s+)?JOB\s+OUTCOME\s+HOST\s+TOOK\s+NOTE$/);
    expect(rows).toHaveLength(8);

    // The eight newest fires, newest first, one line each — the database says which.
    const all = await fleet.db.query<{ job: string; scheduled_at: Date }>(
      `SELECT job, scheduled_at FROM baton_runs GROUP BY job, scheduled_at
        ORDER BY scheduled_at DESC, MAX(id) DESC LIMIT 8`,
    );
    rows.forEach((line, i) => {
      const fire = all[i]!;
      const iso = fire.scheduled_at.toISOString();
      const at = iso.slice(5, 19).replace('T', ' ');
      // The year shows when some fire is not in this year: fires of 31 December read just after
      // midnight UTC on New Year's Day.
      const dated = line.startsWith(at) || line.startsWith(`${iso.slice(0, 5)}${at}`);
      expect(dated, `${line} is the fire of ${fire.job} at ${at}`).toBe(true);
      // Long names are cut, never wrapped.
      expect(line).toContain(fire.job === 'tick' ? ' tick ' : ' nightly-');
      // The job's own clock (when LOCAL kept its place), New York's offset at that fire.
      if (fire.job === LONG_JOB && / LOCAL /.test(head!)) {
        expect(line).toContain(` ${newYorkClock(fire.scheduled_at)} `);
      }
    });
    const tick = rows.filter((l) => / tick /.test(l));
    const long = rows.filter((l) => / nightly-/.test(l));
    expect(tick.length).toBeGreaterThan(0);
    expect(long.length).toBeGreaterThan(0);
    for (const l of tick) expect(l).toMatch(/ done +\S+ +\S+ +skipped by 2$/);
    for (const l of long) {
      expect(l).toMatch(/nightly-\S*… +failed /);
      expect(l).toMatch(/skipped by 2$/);
    }
    // The long host, when it won, is cut too.
    expect(rows.every((l) => !l.includes(LONG_HOST))).toBe(true);
    // Colour says how it ended: done green, failed red.
    expect(output).toContain('\x1b[32mdone\x1b[39m');
    expect(output).toContain('\x1b[31mfailed\x1b[39m');
  });

  it('no colour with NO_COLOR=1, nor into a pipe (where it still fits 80 columns)', async () => {
    const plain = await runOnPty(['history', '--limit', '5', ...on()], { env: { NO_COLOR: '1' } });
    expect(plain.code).toBe(0);
    expect(hasColour(plain.output)).toBe(false);
    expect(lines(plain.output)).toHaveLength(6);

    const piped = await baton(['history', '--limit', '5', ...on()]);
    expect(piped.code).toBe(0);
    expect(hasColour(piped.stdout)).toBe(false);
    expectFits(piped.stdout, 80);
    expect(lines(piped.stdout)).toHaveLength(6);
    // FORCE_COLOR asks for colour even into a pipe.
    const forced = await baton(['history', '--limit', '5', ...on()], {
      env: { FORCE_COLOR: '1' },
    });
    expect(hasColour(forced.stdout)).toBe(true);
  });

  it('a wider terminal gets wider lines, up to its width', async () => {
    const { output } = await runOnPty(['history', '--limit', '12', ...on()], { cols: 132 });
    expectFits(output, 132);
    expect(Math.max(...lines(output).map((l) => l.length))).toBeGreaterThan(80);
    expect(lines(output)[0]).toMatch(/^FIRE \(UTC\)\s+AGO\s+LOCAL\s+JOB\s/);
  });

  it('a fire nobody ran: missed, or skipped by every runner with why', async () => {
    const missed = await runOnPty(['history', 'settle', ...on()]);
    expectFits(missed.output, 80);
    // The planted fire's row, by its minute (a year may precede it): runners up at settle's own
    // fire (03:00 in Paris, plus its jitter) ran that one too, and it is the newer row.
    const planted = hourAgo.toISOString().slice(5, 16).replace('T', ' ');
    expect(lines(missed.output).find((l) => l.includes(planted))).toMatch(/ settle +missed\s*$/);
    const skipped = await runOnPty(['history', 'old-report', ...on()]);
    expectFits(skipped.output, 80);
    expect(lines(skipped.output)[1]).toMatch(/ old-report +skipped +\(paused\) +skipped by 3$/);
  });

  it('--attempts and -o wide show every row', async () => {
    const rows = await fleet.db.query<{ id: number }>(
      'SELECT id FROM baton_runs WHERE job = ? ORDER BY scheduled_at DESC, winner DESC LIMIT 9',
      ['tick'],
    );
    for (const flag of [['--attempts'], ['-o', 'wide']]) {
      const wide = await baton(['history', 'tick', '--limit', '9', ...flag, ...on()]);
      expect(wide.code).toBe(0);
      const [head, ...body] = lines(wide.stdout);
      expect(head).toMatch(/^ID\s+JOB\s+SCHEDULED \(UTC\)\s+HOST\s+WINNER/);
      // Within a fire the skips come in no particular order.
      const ids = (list: number[]) => [...list].sort((a, b) => a - b);
      expect(ids(body.map((l) => Number(l.split(/\s+/)[0])))).toEqual(ids(rows.map((r) => r.id)));
      expect(body.filter((l) => / skipped /.test(l)).length).toBeGreaterThanOrEqual(6);
    }
    const bad = await baton(['history', '-o', 'tall', ...on()]);
    expect(bad.code).toBe(64);
  });
});

describe('baton list on an 80-column terminal', () => {
  it('fits, with the next fire, how soon, and the flags', async () => {
    const { code, output } = await runOnPty(['list', ...on()]);
    expect(code, output).toBe(0);
    expectFits(output, 80);
    expect(hasColour(output)).toBe(true);
    const [head, ...rows] = lines(output);
    // LOCAL gives way first when the names and flags would be cut too short for it.
    expect(head).toMatch(/^JOB\s+SCHEDULE\s+TIME ZONE\s+NEXT \(UTC\)\s+(LOCAL\s+)?IN\s+FLAGS$/);
    expect(rows).toHaveLength(4);
    const row = (job: string) => rows.find((l) => l.startsWith(job)) ?? '';
    expect(row('tick')).toMatch(/^tick +\* \* \* \* \* \* /);
    // Schedules are never cut; names and zones are.
    expect(row('nightly-')).toMatch(/^nightly-\S*… +\*\/2 \* \* \* \* \* /);
    // The seconds show only when some next fire has them: at hh:mm:59 the next tick and the next
    // nightly fire are both on the minute. The year shows when a next fire is in another year.
    expect(row('settle')).toMatch(
      /^settle +0 3 \* \* \* +Europe\/\S+ +(\d{4}-)?\d\d-\d\d 0[12]:00(:00)? /,
    );
    // How soon: "now" when `list` ran in the second before the fire (02:00:00 UTC in winter).
    // The flags give way last, and may be cut: a two-digit IN ("17h") or the seconds in NEXT
    // leave them less than the 17 columns of "paused, jitter 5m" (never less than 9).
    expect(row('settle')).toMatch(/ (\d+[smhd]|now) +(paused, jitter 5m|paused, [\w ]*…)$/);
    expect(row('old-report')).toMatch(/ \*\/15 9-17 \* \* 1-5 .*disabled$/);

    const plain = await runOnPty(['list', ...on()], { env: { NO_COLOR: '1' } });
    expect(hasColour(plain.output)).toBe(false);
    // The same table without the colour (the next fire of tick may have moved on since).
    const jobColumn = (text: string) => lines(text).map((l) => l.split(' ')[0]);
    expect(jobColumn(plain.output)).toEqual(jobColumn(output));
    const piped = await baton(['list', ...on()]);
    expect(hasColour(piped.stdout)).toBe(false);
    expectFits(piped.stdout, 80);
    // -o wide: the full table, far wider than 80.
    const wide = await baton(['list', '-o', 'wide', ...on()]);
    expect(lines(wide.stdout)[0]).toMatch(/IN WORDS\s+ENABLED\s+RUNS ON\s+PAUSED\s+NEXT FIRES/);
  });
});

describe('--watch', () => {
  for (const command of [['history', '--limit', '3'], ['status']]) {
    it(`${command[0]} --watch redraws until Ctrl-C, then exits 0 with the cursor shown`, async () => {
      const p = batonOnPty([...command, '--watch', '0.5', ...on()]);
      try {
        const headers = () => p.output.split(`Every 0.5s: baton ${command[0]}`).length - 1;
        await p.waitForOutput('two redraws', () => headers() >= 2);
        expect(p.output).toContain('\x1b[?25l'); // the cursor hidden while watching
        p.write('\x03');
        expect(await p.exit).toBe(0);
        expect(p.output.endsWith('\x1b[?25h')).toBe(true);
        expect(stripAnsi(p.output)).toContain(command[0] === 'status' ? 'RUNNERS:' : ' tick ');
      } finally {
        p.kill();
      }
    });
  }

  it('shows what fits the screen: a frame taller than the terminal would scroll it', async () => {
    const p = batonOnPty(['history', '--limit', '20', '--watch', '0.5', ...on()], { rows: 8 });
    try {
      await p.waitForOutput('three redraws', () => p.output.split('Every 0.5s').length > 3);
      p.write('\x03');
      expect(await p.exit).toBe(0);
      // Each frame is drawn from the top of the screen (ESC [ H): at most 7 lines, the 8th
      // left for the cursor.
      const frames = p.output.split('\x1b[H').slice(1);
      expect(frames.length).toBeGreaterThanOrEqual(3);
      for (const f of frames) expect(f.split('\n').length - 1).toBeLessThanOrEqual(7);
      expect(stripAnsi(frames[1]!).split('\n')).toHaveLength(8);
    } finally {
      p.kill();
    }
  });

  it('refuses a word that is not seconds (the job goes before --watch): 64', async () => {
    const r = await baton(['history', '--watch', 'tick', ...on()]);
    expect(r.code).toBe(64);
    expect(r.stderr).toContain('--watch "tick": expected seconds');
  });
});

describe('shell completion', () => {
  /** A database server that accepts connections and never answers; counts them. */
  let silent: net.Server;
  let connections = 0;
  /** How long each connection to the silent server lived, in ms, once closed. */
  const lifetimes: number[] = [];
  beforeAll(async () => {
    silent = net.createServer((socket) => {
      connections += 1;
      const opened = performance.now();
      socket.on('error', () => {});
      socket.on('close', () => lifetimes.push(performance.now() - opened));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  });
  afterAll(() => new Promise<void>((resolve) => silent.close(() => resolve())));
  const silentUrl = () => `mysql://root@127.0.0.1:${(silent.address() as net.AddressInfo).port}/x`;

  // Without the database is what makes it fast (asking the silent server would hang for
  // mysql2's connect timeout, 10 s): the proof is that the server saw no connection, not a
  // stopwatch, which a busy machine would fail.
  it('completes job names from the schedules file, without the database', async () => {
    for (const command of ['pause', 'resume', 'run', 'history', 'explain']) {
      const r = await baton([
        '--get-yargs-completions',
        'baton',
        command,
        '--config',
        config,
        '--database-url',
        silentUrl(),
        '',
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.split('\n').filter(Boolean)).toEqual([
        'tick',
        LONG_JOB,
        'settle',
        'old-report',
      ]);
      expect(connections, command).toBe(0);
    }
    // An option's value is not a job; the options still complete.
    const options = await baton(['--get-yargs-completions', 'baton', 'pause', '--rea']);
    expect(options.stdout).toContain('--reason');
  });

  it('completes run ids for baton show from the database, and gives up quickly without one', async () => {
    // The newest twenty runs of the namespace: winners and missed marks, no skip rows.
    const newest = await fleet.db.query<{ id: number }>(
      `SELECT id FROM baton_runs WHERE namespace = ? AND status <> 'skipped'
        ORDER BY scheduled_at DESC, id DESC LIMIT 20`,
      [NAMESPACE],
    );
    expect(newest.length).toBeGreaterThanOrEqual(8);
    const r = await baton(['--get-yargs-completions', 'baton', 'show', ...on(), '']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n').filter(Boolean)).toEqual(newest.map((n) => String(n.id)));

    const closedBefore = lifetimes.length;
    const slow = await baton([
      '--get-yargs-completions',
      'baton',
      'show',
      '--config',
      config,
      '--database-url',
      silentUrl(),
      '',
    ]);
    expect(slow.code).toBe(0);
    expect(slow.stdout).not.toMatch(/^\d+$/m);
    // It gave the silent server a second, not mysql2's 10 s connect timeout: timed on the
    // server's side, from the connection to its end, so that the command's own start (seconds
    // on a busy machine) does not count.
    const lived = await waitFor('the connection to end', () =>
      lifetimes.length > closedBefore ? lifetimes.slice(closedBefore) : undefined,
    );
    for (const ms of lived) expect(ms).toBeLessThan(5_000);
  });
});
