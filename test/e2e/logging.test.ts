/**
 * The daemon's logs: readable lines on a terminal (pino-pretty), JSON lines otherwise (journald,
 * log shippers), and `--log-level` deciding what is written. The terminal is a real
 * pseudo-terminal (util-linux `script`), not a flag.
 */
import { spawn } from 'node:child_process';
import { closeSync, fstatSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BATON_BIN, ROOT, startRunner, writeSchedule } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('logging');

const QUIET = 'jobs:\n  quiet:\n    schedule: "0 0 1 1 *"\n    command: ["true"]\n';

/**
 * Runs `baton start` against a database that does not answer, with its stdout on a file and
 * JOURNAL_STREAM naming that file (as systemd names the journal's stream) or another one;
 * resolves with what it wrote once it says it waits for the database.
 */
async function startWithJournalStream(config: string, sameStream: boolean): Promise<string[]> {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'baton-journal-')), 'stdout');
  const fd = openSync(file, 'w');
  const { dev, ino } = fstatSync(fd);
  const child = spawn(
    process.execPath,
    [BATON_BIN, 'start', '--config', config, '--database-url', 'mysql://root@127.0.0.1:1/none'],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        BATON_HOST: 'log-journal',
        JOURNAL_STREAM: sameStream ? `${dev}:${ino}` : `${dev}:${ino + 1}`,
      },
      stdio: ['ignore', fd, 'ignore'],
    },
  );
  closeSync(fd);
  try {
    await waitFor('the runner waits for its database', () =>
      readFileSync(file, 'utf8').includes('database unavailable'),
    );
    return readFileSync(file, 'utf8').split('\n').filter(Boolean);
  } finally {
    const closed = new Promise((resolve) => child.on('close', resolve));
    child.kill('SIGKILL');
    await closed;
  }
}

/** Runs `baton start` with its stdout on a pseudo-terminal; resolves with what it printed. */
async function startOnTerminal(args: string[]): Promise<string> {
  const command = [process.execPath, BATON_BIN, 'start', ...args].map(shellQuote).join(' ');
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TERM: 'dumb' },
    // A group of its own: the runner under `script` is stopped with it.
    detached: true,
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  try {
    await waitFor('the runner started, on the terminal', () => output.includes('runner started'));
    return output;
  } finally {
    const closed = new Promise((resolve) => child.on('close', resolve));
    process.kill(-child.pid!, 'SIGTERM');
    await closed;
  }
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

describe('logs', () => {
  it('are readable lines on a terminal', async () => {
    const config = writeSchedule(QUIET);
    const output = await startOnTerminal([
      '--config',
      config,
      '--database-url',
      fleet.db.url,
      '--host',
      'log-tty',
    ]);
    const line = output.split(/\r?\n/).find((l) => l.includes('runner started'))!;
    expect(line).toMatch(/INFO/);
    expect(line.trimStart().startsWith('{')).toBe(false);
  });

  it('are JSON lines otherwise, at the level --log-level asks for', async () => {
    const config = writeSchedule(QUIET);
    const info = startRunner({ config, databaseUrl: fleet.db.url, host: 'log-json' });
    const started = await info.ready();
    expect(started).toMatchObject({ level: 30, host: 'log-json', msg: 'runner started' });
    await info.stop();

    // At warn, the same start writes no info line; a database that cannot be reached is a
    // warning, and it is written (as JSON).
    const warn = startRunner({
      config,
      databaseUrl: 'mysql://root@127.0.0.1:1/nowhere',
      host: 'log-warn',
      args: ['--log-level', 'warn'],
    });
    try {
      const waiting = await warn.waitForLog('database unavailable: waiting for it');
      expect(waiting.level).toBe(40);
      expect(warn.lines.every((l) => l.level >= 40)).toBe(true);
    } finally {
      await warn.stop('SIGKILL');
    }
  });

  it('carry their syslog level as a prefix when stdout is the journal, for journalctl -p', async () => {
    const config = writeSchedule(QUIET);
    const journal = await startWithJournalStream(config, true);
    const waiting = journal.find((l) => l.includes('database unavailable'))!;
    expect(waiting).toMatch(/^<4>\{"level":40,/);
    for (const line of journal) {
      const level = Number(/"level":(\d+)/.exec(line)?.[1]);
      expect(line.slice(0, 3), line).toBe(level >= 50 ? '<3>' : level >= 40 ? '<4>' : '<6>');
    }
    // JOURNAL_STREAM inherited by a process whose stdout went elsewhere: plain JSON lines.
    const elsewhere = await startWithJournalStream(config, false);
    expect(elsewhere.every((l) => l.startsWith('{'))).toBe(true);
  });
});
