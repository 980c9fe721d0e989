/**
 * The daemon parses its schedules file in a worker thread (config/load-isolated.ts): same config,
 * same errors as loading it in-process. Imported from dist/: the worker runs the built
 * load-worker.js (`npm test` builds first).
 */
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfigIsolated } from '../../dist/config/load-isolated.js';
import { loadConfig } from '../../dist/config/load.js';
import { ConfigError } from '../../dist/errors.js';

function schedule(text: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'baton-isolated-'));
  const file = path.join(dir, 'schedules.yaml');
  writeFileSync(file, text);
  return file;
}

describe('loadConfigIsolated', () => {
  it('gives the same config as loading in-process', async () => {
    const file = schedule(
      'namespace: iso\ndefaults:\n  timezone: Asia/Seoul\njobs:\n' +
        '  a:\n    schedule: "*/5 * * * *"\n    command: ["true"]\n    retries: 2\n    retryDelay: 3s\n' +
        '  b:\n    schedule: "0 3 * * *"\n    command: "echo hi"\n    shell: true\n    overlap: queue\n',
    );
    expect(await loadConfigIsolated(file)).toEqual(loadConfig(file));
  });

  it('rejects an invalid file with the same ConfigError: its problems, file:line, exit 78', async () => {
    const file = schedule(
      'jobs:\n  a:\n    schedule: "not cron"\n    command: ["true"]\n  b:\n    command: ["true"]\n',
    );
    const inProcess = (() => {
      try {
        loadConfig(file);
      } catch (err) {
        return err as ConfigError;
      }
      throw new Error('the file should be invalid');
    })();
    const isolated = await loadConfigIsolated(file).catch((err: unknown) => err);
    expect(isolated).toBeInstanceOf(ConfigError);
    expect((isolated as ConfigError).message).toBe(inProcess.message);
    expect((isolated as ConfigError).exitCode).toBe(78);
    expect((isolated as ConfigError).problems).toEqual(inProcess.problems);
    expect((isolated as ConfigError).message).toMatch(/schedules\.yaml:\d+/);
  });

  it('rejects a missing file as in-process loading does', async () => {
    const missing = path.join(tmpdir(), 'baton-no-such-dir', 'schedules.yaml');
    const isolated = await loadConfigIsolated(missing).catch((err: unknown) => err);
    expect(isolated).toBeInstanceOf(ConfigError);
    expect((isolated as ConfigError).message).toMatch(/cannot read: file not found/);
  });

  it('gives up on a file that is never read to the end (a FIFO), as a ConfigError', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-isolated-'));
    const fifo = path.join(dir, 'schedules.yaml');
    execFileSync('mkfifo', [fifo]);
    const isolated = await loadConfigIsolated(fifo, {}, 300).catch((err: unknown) => err);
    // Unblock the worker's read so that it can end — if it got as far as opening the FIFO: on a
    // busy machine it may not have, and a blocking open for writing would then wait forever.
    try {
      closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENXIO') throw err; // ENXIO: no reader
    }
    expect(isolated).toBeInstanceOf(ConfigError);
    expect((isolated as ConfigError).message).toMatch(/cannot read: no answer within 0\.3 s/);
    expect((isolated as ConfigError).exitCode).toBe(78);
  });
});
