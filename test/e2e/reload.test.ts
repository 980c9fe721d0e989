/**
 * SIGHUP reloads schedules.yaml, and bad input is refused whole (guarantee 5) also at reload:
 *
 * - An invalid file (a bad cron expression) is refused: the runner logs 'reload refused: the old
 *   schedule stays' with the very message `baton validate` prints for that file (file:line and
 *   the path inside it), and the old schedule goes on firing.
 * - A valid file replaces the schedule: 'schedule reloaded' lists what was added and removed, the
 *   new job fires, the removed job fires no more (no row after the reload), and a run of the
 *   removed job that started before the reload finishes normally (`done`, not interrupted).
 * - A file that changes the namespace is refused too (that needs a restart); a changed job is
 *   reported as changed and its later fires run the new definition.
 *
 * One real runner process; the test rewrites its schedules file and sends it SIGHUP.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { baton, startRunner, writeSchedule, type LogLine } from '../helpers/cli.js';
import { runs } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { blockedOnFifo } from '../helpers/procfs.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('reload');

const ORIGINAL = `
namespace: reload
jobs:
  a:
    schedule: "* * * * * *"
    command: ["sleep", "2"]
`;

// A file with one valid, changed job and one invalid job: refused whole, so `a` keeps its old
// command — a half-applied reload would run the new one.
const INVALID = `
namespace: reload
jobs:
  a:
    schedule: "* * * * * *"
    command: ["sh", "-c", "echo half-applied; sleep 2"]
  c:
    schedule: "61 * * * * *"
    command: ["true"]
`;

const REPLACED = `
namespace: reload
jobs:
  b:
    schedule: "* * * * * *"
    command: ["true"]
`;

const CHANGED = `
namespace: reload
jobs:
  b:
    schedule: "* * * * * *"
    command: ["sh", "-c", "echo v2"]
`;

const OTHER_NAMESPACE = `
namespace: elsewhere
jobs:
  b:
    schedule: "* * * * * *"
    command: ["true"]
`;

function logTime(line: LogLine): number {
  return Date.parse(String(line.time));
}

describe('SIGHUP', () => {
  it('refuses an invalid file (the old schedule stays), then swaps in a valid one without cutting a running run short', async () => {
    const config = writeSchedule(ORIGINAL);
    const db = fleet.db;
    const [runner] = await fleet.start(['solo'], { config });
    const runner0 = runner!;
    await waitFor(
      'a finished run of `a`',
      async () => (await runs(db, 'a')).some((r) => r.winner === 1 && r.status === 'done'),
      { timeoutMs: 20_000, intervalMs: 100 },
    );

    // 1. An invalid file: refused, with what `baton validate` says about it.
    writeFileSync(config, INVALID);
    const validate = await baton(['validate', '--config', config]);
    expect(validate.code).toBe(78);
    const validateMessage = validate.stderr.replace(/^baton: /, '').trimEnd();
    expect(validateMessage).toContain(`${config}:8:`);
    expect(validateMessage).toContain('jobs.c.schedule: invalid cron expression "61 * * * * *"');

    runner0.child.kill('SIGHUP');
    const refused = await runner0.waitForLog('reload refused: the old schedule stays');
    expect(refused.file).toBe(config);
    expect(refused.error).toBe(validateMessage);
    expect(runner0.lines.some((l) => l.msg === 'schedule reloaded')).toBe(false);

    // The old schedule goes on, whole: `a` wins fires after the refusal, with its old command.
    const refusedAt = logTime(refused);
    const after = await waitFor(
      'a run of `a` after the refused reload',
      async () =>
        (await runs(db, 'a')).find(
          (r) => r.winner === 1 && r.scheduled_at.getTime() > refusedAt && r.status === 'done',
        ),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(after.output_tail, 'the old command of `a`').toBe('');

    // 2. A valid file that removes `a` and adds `b`, sent while a run of `a` is going.
    const inFlight = await waitFor(
      'a run of `a` in progress',
      async () => (await runs(db, 'a')).find((r) => r.winner === 1 && r.status === 'running'),
      { timeoutMs: 20_000, intervalMs: 20 },
    );
    writeFileSync(config, REPLACED);
    runner0.child.kill('SIGHUP');
    const reloaded = await runner0.waitForLog('schedule reloaded');
    expect(reloaded).toMatchObject({ file: config, added: ['b'], removed: ['a'], changed: [] });
    const reloadedAt = logTime(reloaded);

    // `b` fires from its next instant on.
    await waitFor(
      'two finished runs of `b`',
      async () =>
        (await runs(db, 'b')).filter((r) => r.winner === 1 && r.status === 'done').length >= 2,
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    // Margin for anything `a` might still have done after the reload.
    const margin = reloadedAt + 1_500 - Date.now();
    if (margin > 0) await sleep(margin);

    // The run that was going finished normally, after the reload (it may still be finishing on
    // a loaded machine: wait for its verdict rather than read it once).
    const finished = await waitFor(
      'the in-flight run of `a` to finish',
      async () => (await runs(db, 'a')).find((r) => r.id === inFlight.id && r.status !== 'running'),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(finished).toMatchObject({ status: 'done', exit_code: 0, error: null });
    expect(finished!.finished_at!.getTime()).toBeGreaterThan(reloadedAt);

    // `a` fires no more: no fire after the reload, no row written after it (but that verdict).
    const aRows = await runs(db, 'a');
    for (const r of aRows) {
      expect(r.scheduled_at.getTime(), `a row ${r.id}`).toBeLessThanOrEqual(reloadedAt);
      expect(r.started_at.getTime(), `a row ${r.id}`).toBeLessThan(reloadedAt + 1_500);
    }
    const bRows = await runs(db, 'b');
    for (const r of bRows) {
      expect(r.scheduled_at.getTime(), `b row ${r.id}`).toBeGreaterThan(reloadedAt - 1_000);
      if (r.winner === 1) expect(r.status === 'done' || r.status === 'running').toBe(true);
    }

    // 3. A namespace change is refused: the schedule of `b` stays.
    writeFileSync(config, OTHER_NAMESPACE);
    runner0.child.kill('SIGHUP');
    const refusedNamespace = await runner0.waitForLog(
      'reload refused: the old schedule stays',
      (l) => l !== refused,
    );
    expect(refusedNamespace.error).toBe(
      'the namespace changed (reload → elsewhere); a namespace change needs a restart',
    );
    const refusedNamespaceAt = logTime(refusedNamespace);
    await waitFor(
      'a run of `b` after the refused namespace change',
      async () =>
        (await runs(db, 'b')).some(
          (r) =>
            r.winner === 1 && r.status === 'done' && r.scheduled_at.getTime() > refusedNamespaceAt,
        ),
      { timeoutMs: 20_000, intervalMs: 100 },
    );

    // 4. A changed job: reported as changed, and its next fires run the new definition.
    writeFileSync(config, CHANGED);
    runner0.child.kill('SIGHUP');
    const changed = await runner0.waitForLog('schedule reloaded', (l) => l !== reloaded);
    expect(changed).toMatchObject({ added: [], removed: [], changed: ['b'] });
    const changedAt = logTime(changed);
    const v2 = await waitFor(
      'a run of the new `b`',
      async () =>
        (await runs(db, 'b')).find(
          (r) => r.winner === 1 && r.status === 'done' && r.scheduled_at.getTime() > changedAt,
        ),
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    expect(v2.output_tail).toBe('v2\n');
    for (const r of await runs(db, 'b')) {
      if (r.winner !== 1 || r.status !== 'done') continue;
      expect(r.output_tail, `b run ${r.id}`).toBe(
        r.scheduled_at.getTime() > changedAt ? 'v2\n' : '',
      );
    }

    expect(await runner0.stop('SIGTERM')).toBe(0);
    expect(runner0.stderr).toBe('');
    // The refusals are the only errors the runner logged.
    expect(runner0.errors().map((l) => l.msg)).toEqual([
      'reload refused: the old schedule stays',
      'reload refused: the old schedule stays',
    ]);
    expect(runner0.lines.filter((l) => l.msg === 'schedule reloaded')).toHaveLength(2);
  });
});

describe('a signal while the schedules file is still being read', () => {
  it('is kept and handled once the runner exists, not left to end the process', async () => {
    // A FIFO as the schedules file: the loader (a worker thread) blocks until it is written,
    // so the signal surely arrives before the runner exists.
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-fifo-'));
    const fifo = path.join(dir, 'schedules.yaml');
    execFileSync('mkfifo', [fifo]);
    const runner = startRunner({ config: fifo, databaseUrl: fleet.db.url, host: 'early' });
    try {
      // Until the handler is installed, a signal's default action applies. It is installed
      // before the file is opened: wait until the loader blocks on the FIFO (/proc), not for a
      // time that a loaded machine may outlast.
      await waitFor('the loader to block on the FIFO', () => blockedOnFifo(runner.child.pid!));
      runner.child.kill('SIGTERM');
      // The loader still blocks on the FIFO: the runner neither ends nor starts.
      await sleep(300);
      expect(runner.child.exitCode).toBeNull();
      expect(runner.child.signalCode).toBeNull();
      expect(runner.lines.some((l) => l.msg === 'runner started')).toBe(false);
      writeFileSync(fifo, 'jobs:\n  quiet:\n    schedule: "0 0 1 1 *"\n    command: ["true"]\n');
      // The kept SIGTERM stops it as soon as it has started: a clean exit, 0.
      await waitFor('the runner to stop', () => runner.child.exitCode != null);
      expect(runner.child.exitCode).toBe(0);
      expect(runner.lines.some((l) => l.msg === 'stopping' && l.signal === 'SIGTERM')).toBe(true);
    } finally {
      await runner.stop('SIGKILL');
    }
  });
});
