/**
 * `baton backfill`: every fire of a past range, oldest first, one at a time through the job's
 * lock, while three real runners keep running the same every-second schedule; interrupted with
 * SIGINT midway and started again, it runs none twice. Ground truth: the job appends its
 * BATON_SCHEDULED_AT and BATON_TRIGGER to a file.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { baton, BATON_BIN, writeSchedule } from '../helpers/cli.js';
import { dbNow } from '../helpers/db.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';
import { jobLockName } from '../../src/lock-names.js';

const fleet = useFleet('backfill');

const FIRES = 30;

interface Line {
  fire?: string;
  action?: string;
  status?: string;
  summary?: { outcome: string; ran: number; skipped: number; failed: number };
}

function parseLines(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);
}

describe('baton backfill', () => {
  it('runs each fire of the range exactly once, in order, across an interruption, beside 3 runners', async () => {
    const config = writeSchedule(`
namespace: bf
jobs:
  tick:
    schedule: "*/1 * * * * *"
    command: ["sh", "-c", "echo \\"$BATON_SCHEDULED_AT $BATON_TRIGGER\\" >> ticks.txt; sleep 0.2"]
`);
    const dir = path.dirname(config);
    const runners = await fleet.start(['bf-1', 'bf-2', 'bf-3'], { config, cwd: dir });
    const now = (await dbNow(fleet.db)).getTime();
    // 30 fires that all came before the runners started: only the backfill runs them.
    const from = Math.floor(now / 1000) * 1000 - 60_000;
    const range = Array.from({ length: FIRES }, (_, i) => new Date(from + i * 1000).toISOString());
    const args = [
      'backfill',
      'tick',
      '--from',
      range[0]!,
      '--to',
      range[FIRES - 1]!,
      '--config',
      config,
      '--database-url',
      fleet.db.url,
      '--host',
      'ops-laptop',
      '--reason',
      'rebuild the ledger',
    ];

    // Over the bound without --yes: refused with the count, nothing run.
    const wide = await baton([
      ...args.slice(0, 3),
      new Date(from - 200_000).toISOString(),
      ...args.slice(4),
    ]);
    expect(wide.code).toBe(64);
    expect(wide.stderr).toContain(`has ${FIRES + 200} fires of tick, more than 100: add --yes`);

    // The first backfill, interrupted with SIGINT once ten fires are done.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('BATON_')),
    );
    const child = spawn(process.execPath, [BATON_BIN, ...args], { env });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    const ticks = () =>
      existsSync(path.join(dir, 'ticks.txt'))
        ? readFileSync(path.join(dir, 'ticks.txt'), 'utf8').trim().split('\n')
        : [];
    const started = () => ticks().filter((l) => l.endsWith(' rerun')).length;
    // Interrupted while a run goes on (it has written its line and sleeps): it must finish.
    const reported = await waitFor(
      'ten fires backfilled, and the next one running',
      () => {
        const runs = parseLines(out).filter((l) => l.action === 'run').length;
        return runs >= 10 && started() > runs ? runs : 0;
      },
      { timeoutMs: 20_000, intervalMs: 10 },
    );
    child.kill('SIGINT');
    expect(await exited, err).toBe(130);
    const first = parseLines(out);
    const done = first.filter((l) => l.action === 'run');
    expect(
      done.every((l) => l.status === 'done'),
      JSON.stringify(first),
    ).toBe(true);
    expect(done.length).toBe(reported + 1);
    expect(done.length).toBeLessThan(FIRES);
    expect(first.at(-1)?.summary?.outcome).toBe('interrupted by SIGINT');
    expect(err).toContain('stopping after the fire that is running');

    // Started again: it runs the rest, and skips what the first one did.
    const second = await baton(args);
    expect(second.code, second.stderr).toBe(0);
    const summary = parseLines(second.stdout).at(-1)?.summary;
    expect(summary).toMatchObject({
      outcome: 'completed',
      ran: FIRES - done.length,
      skipped: done.length,
      failed: 0,
    });

    // Ground truth: every fire of the range ran exactly once, oldest first, with its instant.
    const backfilled = ticks()
      .filter((l) => l.endsWith(' rerun'))
      .map((l) => l.split(' ')[0]);
    expect(backfilled).toEqual(range);
    // The runners kept running the schedule meanwhile (a fire that met the backfill's run skipped
    // it as an overlap), and go on once it is over: each scheduled fire once, none in the range.
    const scheduledLines = () =>
      ticks()
        .filter((l) => l.endsWith(' schedule'))
        .map((l) => l.split(' ')[0]);
    const before = scheduledLines().length;
    await waitFor('two more scheduled fires', () => scheduledLines().length >= before + 2, {
      timeoutMs: 10_000,
    });
    const scheduled = scheduledLines();
    expect(new Set(scheduled).size).toBe(scheduled.length);
    expect(scheduled.every((at) => at! > range[FIRES - 1]!)).toBe(true);

    // The audit has both backfills, who and why, and one entry per fire run.
    const audit = await fleet.db.query<{ action: string; reason: string; outcome: string | null }>(
      "SELECT action, reason, outcome FROM baton_audit WHERE job = 'tick' AND action = 'backfill' ORDER BY id",
    );
    expect(audit).toMatchObject([
      { reason: 'rebuild the ledger', outcome: expect.stringMatching(/^interrupted by SIGINT/) },
      { reason: 'rebuild the ledger', outcome: expect.stringMatching(/^completed/) },
    ]);
    // Each with its outcome, as `baton run --fire` records it (none left without one).
    const reruns = await fleet.db.query<{ outcome: string | null }>(
      "SELECT outcome FROM baton_audit WHERE job = 'tick' AND action = 'rerun'",
    );
    expect(reruns).toHaveLength(FIRES);
    expect(reruns.every((r) => r.outcome === 'done')).toBe(true);
    expectQuiet(runners);
  });
  // The job signals the backfill itself as its first act: the SIGINT comes while the spawner's
  // report of the job's pid may still be on its way. The job was started before the request, so
  // it is the run going, and the first Ctrl-C lets it finish.
  it('lets a job started just before the first Ctrl-C finish, even before its pid is reported', async () => {
    const config = writeSchedule(
      `
namespace: bf-early
jobs:
  tick:
    schedule: "0 0 * * * *"
    command: ["sh", "job.sh"]
`,
      {
        'job.sh':
          'kill -INT "$(cat cli.pid)"\necho "start $BATON_SCHEDULED_AT" >> ran.txt\nsleep 0.3\necho end >> ran.txt\n',
      },
    );
    const dir = path.dirname(config);
    const now = (await dbNow(fleet.db)).getTime();
    const from = new Date(Math.floor(now / 3_600_000) * 3_600_000 - 5 * 3_600_000);
    const to = new Date(from.getTime() + 2 * 3_600_000);
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('BATON_')),
    );
    const args = ['backfill', 'tick', '--from', from.toISOString(), '--to', to.toISOString()];
    const child = spawn(
      process.execPath,
      [BATON_BIN, ...args, '--config', config, '--database-url', fleet.db.url, '--json'],
      { env, cwd: dir },
    );
    writeFileSync(path.join(dir, 'cli.pid'), String(child.pid));
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code, err).toBe(130);
    const runs = parseLines(out).filter((l) => l.action === 'run');
    expect(runs.map((l) => l.status)).toEqual(['done']);
    expect(readFileSync(path.join(dir, 'ran.txt'), 'utf8')).toBe(
      `start ${from.toISOString()}\nend\n`,
    );
    // Said once, and right: not "stopping" (no run) and then that a run goes on.
    expect(err.match(/stopping/g), err).toHaveLength(1);
    expect(err).toContain('stopping after the fire that is running');
  });

  // Most of a blocked backfill's time is a 1 s GET_LOCK wait: a Ctrl-C lands there. Once, the
  // cancelled wait's rejection went unhandled and ended the command with a stack trace (exit 1)
  // before the backfill's audit row said anything.
  it('stops on Ctrl-C while a fire waits for its lock: exit 130, and the audit says so', async () => {
    const config = writeSchedule(`
namespace: bf-wait
jobs:
  tick:
    schedule: "0 0 * * * *"
    command: ["true"]
`);
    const lock = jobLockName(fleet.db.name, 'bf-wait', 'tick');
    // Held by this test's connection: a run of the job elsewhere.
    const [held] = await fleet.db.query<{ got: number }>('SELECT GET_LOCK(?, 0) AS got', [lock]);
    expect(Number(held!.got)).toBe(1);
    try {
      const now = (await dbNow(fleet.db)).getTime();
      const from = new Date(Math.floor(now / 3_600_000) * 3_600_000 - 5 * 3_600_000);
      const to = new Date(from.getTime() + 2 * 3_600_000);
      const env = Object.fromEntries(
        Object.entries(process.env).filter(([k]) => !k.startsWith('BATON_')),
      );
      const child = spawn(
        process.execPath,
        [
          BATON_BIN,
          ...['backfill', 'tick', '--from', from.toISOString(), '--to', to.toISOString()],
          ...['--config', config, '--database-url', fleet.db.url, '--json'],
        ],
        { env },
      );
      let err = '';
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      await waitFor('the backfill to wait for the lock', async () => {
        const [waiting] = await fleet.db.query<{ n: number }>(
          `SELECT COUNT(*) AS n FROM information_schema.processlist
            WHERE db = ? AND id <> CONNECTION_ID() AND info LIKE '%GET_LOCK%'`,
          [fleet.db.name],
        );
        return Number(waiting!.n) > 0;
      });
      child.kill('SIGINT');
      expect(await exited, err).toBe(130);
      expect(err).not.toMatch(/\n\s+at /);
      const [audit] = await fleet.db.query<{ outcome: string | null }>(
        "SELECT outcome FROM baton_audit WHERE namespace = 'bf-wait' AND action = 'backfill'",
      );
      expect(audit!.outcome).toMatch(/^interrupted by SIGINT: 0 run/);
    } finally {
      await fleet.db.query('SELECT RELEASE_LOCK(?)', [lock]);
    }
  });
});
