/**
 * Every run's whole output, kept in the database the fleet shares and readable from any host:
 * three runners, jobs that print a lot on both streams, and `baton logs` as another host would
 * run it (it only needs the database). Proven here:
 * - 10,000 numbered lines on each stream of a failing job come back from `baton logs` exactly
 *   once each, in order, with how the run ended;
 * - `--follow` started while a job runs prints lines before the job has ended, and stops when it
 *   has;
 * - a job over its `output.max` keeps its head and its tail, and `baton logs` says how much was
 *   dropped between them (the stored bytes stay within the bound);
 * - a job that floods its output does not grow the runner's or its spawner's memory past a small
 *   bound (their peak RSS, VmHWM, read from /proc), nor the database past `output.max`.
 */
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BATON_BIN,
  ROOT,
  baton,
  startRunner,
  writeSchedule,
  type RunnerProcess,
} from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

const HOSTS = ['out-a', 'out-b', 'out-c'];
/** How much the flood job prints. */
const FLOOD_BYTES = 400 * 1024 * 1024;
/**
 * Peak RSS the runner and its spawner (which reads the flood) may reach while a job prints 400
 * MiB. Measured on 2026-12-03 (2 cores): runner 121–123 MiB and spawner 104–109 MiB with the
 * whole output kept, 108 and 82 MiB with `output: {max: 0}` (the tail only). The bound is what
 * the peak must stay under however much the job prints: it does not grow with the output.
 */
const RUNNER_RSS_BOUND = 200 * 1024 * 1024;
const SPAWNER_RSS_BOUND = 160 * 1024 * 1024;

let db: TestDatabase;
const runners: RunnerProcess[] = [];
/** Where the jobs run (the schedules file's folder). */
let jobDir: string;

/** Each job runs once: its first run leaves a marker, later fires of it exit at once. */
const once = (name: string, script: string) =>
  `[ -e "${name}.ran" ] && exit 0\ntouch "${name}.ran"\n${script}\n`;

beforeAll(async () => {
  db = await createTestDatabase('run_output');
  const job = (name: string, extra = '') =>
    `  ${name}:\n    schedule: "* * * * * *"\n    command: ["sh", "${name}.sh"]\n${extra}`;
  const config = writeSchedule(
    `namespace: output\njobs:\n${job('numbered')}${job('slow')}${job('big', '    output: {max: 64KiB}\n')}${job('flood')}${job('logged', '    output: {log: true}\n')}${job('retried', '    retries: 1\n    retryDelay: 100ms\n')}${job('closer')}  modlog:\n    schedule: "* * * * * *"\n    module: modlog.mjs\n`,
    {
      'numbered.sh': once(
        'numbered',
        `awk 'BEGIN { for (i = 1; i <= 10000; i++) { print "out " i; print "err " i > "/dev/stderr" } }'\nexit 3`,
      ),
      // Its first line, then nothing until the test says go (slow.go): however late the
      // follower comes on a loaded machine, the run is still going when it prints.
      'slow.sh': once(
        'slow',
        'echo "slow 1"\nfor i in $(seq 1 600); do [ -e slow.go ] && break; sleep 0.1; done\n' +
          'for i in $(seq 2 20); do echo "slow $i"; sleep 0.3; done',
      ),
      'big.sh': once(
        'big',
        `awk 'BEGIN { for (i = 1; i <= 50000; i++) printf "line %06d\\n", i }'`,
      ),
      'logged.sh': once(
        'logged',
        'echo "first line"; printf "second" >&2; sleep 0.3; echo " half" >&2; printf "no newline"',
      ),
      'retried.sh': once('retried', 'echo "attempt $BATON_ATTEMPT"; exit 1').replace(
        '[ -e "retried.ran" ] && exit 0\ntouch "retried.ran"\n',
        '[ -e "retried.ran" ] && [ "$BATON_ATTEMPT" = 1 ] && exit 0\ntouch "retried.ran"\n',
      ),
      // Closes its stdout early and goes on printing on stderr.
      'closer.sh': once('closer', 'echo before; exec 1>&-; sleep 0.3; echo after >&2'),
      'modlog.mjs': [
        "import { existsSync, writeFileSync } from 'node:fs';",
        'export default async (ctx) => {',
        "  if (existsSync('modlog.ran')) return;",
        "  writeFileSync('modlog.ran', '');",
        "  ctx.log.info('from ctx.log');",
        "  console.error('from console.error');",
        '};',
      ].join('\n'),
      'flood.sh': once('flood', `yes flooding-the-output | head -c ${FLOOD_BYTES}`),
    },
  );
  jobDir = path.dirname(config);
  runners.push(...HOSTS.map((host) => startRunner({ config, databaseUrl: db.url, host })));
  await Promise.all(runners.map((r) => r.ready()));
}, 60_000);

afterAll(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop('SIGKILL')));
  await db?.drop();
});

interface WinnerRow {
  id: number;
  host: string;
  status: string;
}

async function firstRun(job: string, finished = true): Promise<WinnerRow> {
  return waitFor(
    `the first run of ${job}${finished ? ' to finish' : ' to start'}`,
    async () => {
      const [row] = await db.query<WinnerRow>(
        `SELECT id, host, status FROM baton_runs
          WHERE job = ? AND winner = 1 ORDER BY scheduled_at LIMIT 1`,
        [job],
      );
      if (!row) return null;
      return !finished || row.status !== 'running' ? row : null;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
}

/** `baton logs` run as a host that did not run the job would: it only needs the database. */
function logs(args: string[]) {
  return baton(['logs', ...args, '--database-url', db.url], {
    cwd: os.tmpdir(),
    timeoutMs: 60_000,
  });
}

const numbered = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${prefix} ${i + 1}`);

describe('baton logs', () => {
  it('--follow prints lines while the run is running and stops when it ends', async () => {
    const run = await firstRun('slow', false);
    const child = spawn(
      process.execPath,
      [BATON_BIN, 'logs', String(run.id), '--follow', '--database-url', db.url],
      { cwd: ROOT },
    );
    let stdout = '';
    let stderr = '';
    let firstLineWhileRunning: boolean | null = null;
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (firstLineWhileRunning == null) {
        firstLineWhileRunning = false;
        void db
          .query<{ status: string }>('SELECT status FROM baton_runs WHERE id = ?', [run.id])
          .then(([row]) => (firstLineWhileRunning = row!.status === 'running'))
          .finally(() => writeFileSync(path.join(jobDir, 'slow.go'), ''));
      }
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, stderr).toBe(0);
    expect(firstLineWhileRunning).toBe(true);
    expect(stdout.split('\n').filter(Boolean)).toEqual(numbered('slow', 20));
    expect(stderr).toMatch(/of slow on .* done \(exit code 0\)/);
  });

  it('prints every line of a failed run once, in order, from a host that did not run it', async () => {
    const run = await firstRun('numbered');
    expect(run.status).toBe('failed');
    const r = await logs([String(run.id)]);
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    expect(r.stdout.split('\n').filter(Boolean)).toEqual(numbered('out', 10_000));
    const notes = r.stderr.split('\n').filter((l) => l.startsWith('baton: '));
    const errLines = r.stderr.split('\n').filter((l) => l && !l.startsWith('baton: '));
    expect(errLines).toEqual(numbered('err', 10_000));
    expect(notes.at(-1)).toMatch(
      new RegExp(`^baton: run ${run.id} of numbered on ${run.host} failed \\(exit code 3\\)`),
    );

    // --json: every chunk with its stream, in order, and the run's end.
    const json = await logs([String(run.id), '--json']);
    expect(json.code).toBe(0);
    const doc = JSON.parse(json.stdout) as {
      run: { status: string; exitCode: number };
      chunks: { stream: string; text: string; seq: number; droppedBefore: number }[];
    };
    expect(doc.run).toMatchObject({ status: 'failed', exitCode: 3 });
    const text = (stream: string) =>
      doc.chunks
        .filter((c) => c.stream === stream)
        .map((c) => c.text)
        .join('');
    expect(text('stdout')).toBe(`${numbered('out', 10_000).join('\n')}\n`);
    expect(text('stderr')).toBe(`${numbered('err', 10_000).join('\n')}\n`);
    expect(doc.chunks.map((c) => c.seq)).toEqual(doc.chunks.map((_, i) => i));
    expect(doc.chunks.every((c) => c.droppedBefore === 0)).toBe(true);

    // By job name: its latest run (the later fires of `numbered` exit at once, with no output;
    // the latest may be that of a fire this very second, still running).
    const byJob = await logs(['numbered', '--namespace', 'output']);
    expect(byJob.code, byJob.stderr).toBe(0);
    expect(byJob.stderr).toMatch(
      /of numbered on .* (done \(exit code 0\)|is still running \(--follow reads on)/,
    );
    expect(byJob.stderr).not.toMatch(/run \d+ of numbered on .* failed/);
  });

  it('keeps the head and the tail of a run over output.max, and says how much was dropped', async () => {
    const run = await firstRun('big');
    const [stored] = await db.query<{ bytes: number }>(
      'SELECT COALESCE(SUM(LENGTH(data)), 0) AS bytes FROM baton_run_output WHERE run_id = ?',
      [run.id],
    );
    expect(Number(stored!.bytes)).toBe(64 * 1024);
    const r = await logs([String(run.id)]);
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe('line 000001');
    expect(lines.at(-2)).toBe('line 050000');
    const total = 50_000 * 12;
    expect(r.stderr).toMatch(/output dropped here \(over output\.max\)/);
    const json = JSON.parse((await logs([String(run.id), '--json'])).stdout) as {
      chunks: { droppedBefore: number }[];
    };
    const dropped = json.chunks.reduce((sum, c) => sum + c.droppedBefore, 0);
    expect(dropped).toBe(total - 64 * 1024);
  });

  it('keeps every attempt apart, the output of a job that closes its stdout early, and ctx.log lines', async () => {
    const retried = await firstRun('retried');
    expect(retried.status).toBe('failed');
    const all = await logs([String(retried.id)]);
    expect(all.stdout).toBe('attempt 1\nattempt 2\n');
    expect(all.stderr).toMatch(/^baton: attempt 2$/m);
    const second = await logs([String(retried.id), '--attempt', '2']);
    expect(second.stdout).toBe('attempt 2\n');

    const closer = await firstRun('closer');
    const closed = await logs([String(closer.id)]);
    expect(closed.stdout).toBe('before\n');
    expect(closed.stderr).toMatch(/^after$/m);

    const modlog = await firstRun('modlog');
    const mod = await logs([String(modlog.id)]);
    expect(mod.stdout + mod.stderr).toContain('from ctx.log');
    expect(mod.stderr).toMatch(/^from console\.error$/m);
  });

  it('output: {log: true} passes each line to the log of the runner that ran it', async () => {
    const run = await firstRun('logged');
    const runner = runners.find((r) => r.host === run.host)!;
    const lines = await waitFor('the lines in the log', () => {
      const found = runner.lines
        .filter((l) => l.msg === 'job output' && l.runId === run.id)
        .map((l) => [l.stream, l.line]);
      return found.length >= 3 ? found : null;
    });
    expect(lines).toEqual([
      ['stdout', 'first line'],
      ['stderr', 'second half'],
      ['stdout', 'no newline'],
    ]);
    // Only there: the other runners did not run it.
    for (const other of runners.filter((r) => r !== runner)) {
      expect(other.lines.filter((l) => l.msg === 'job output')).toEqual([]);
    }
  });

  it('a flood of output keeps the runner and its spawner within a small memory bound', async () => {
    const run = await firstRun('flood');
    expect(run.status).toBe('done');
    const runner = runners.find((r) => r.host === run.host)!;
    const peak = (pid: number) => {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      return Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) * 1024;
    };
    const spawner = childrenOf(runner.child.pid!).find((pid) =>
      readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('spawner'),
    );
    expect(spawner, 'the runner has a spawner process').toBeDefined();
    expect(peak(runner.child.pid!)).toBeLessThan(RUNNER_RSS_BOUND);
    expect(peak(spawner!)).toBeLessThan(SPAWNER_RSS_BOUND);
    const [stored] = await db.query<{ bytes: number }>(
      'SELECT COALESCE(SUM(LENGTH(data)), 0) AS bytes FROM baton_run_output WHERE run_id = ?',
      [run.id],
    );
    expect(Number(stored!.bytes)).toBe(4 * 1024 * 1024);
  }, 120_000);
});

/** The pids whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}
