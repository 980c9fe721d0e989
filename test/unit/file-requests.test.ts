/**
 * A module host's wait, at its exit, for the file-system requests in flight
 * (src/execution/file-requests.ts): a write started and never awaited lands (tsx's cache writes
 * are such), what is not a file request is not waited for, and the wait never passes its bound.
 */
import { mkdtempSync, promises as fsp, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileRequestsSettled } from '../../src/execution/file-requests.js';

const dir = mkdtempSync(path.join(tmpdir(), 'baton-file-requests-'));

describe('fileRequestsSettled', () => {
  it('waits for a write that was started and not awaited', async () => {
    const file = path.join(dir, 'written.txt');
    const text = 'x'.repeat(4 << 20);
    void fsp.writeFile(file, text);
    expect(process.getActiveResourcesInfo()).toContain('FSReqPromise');
    await fileRequestsSettled(5_000);
    expect(readFileSync(file, 'utf8').length).toBe(text.length);
  });

  it('gives up at its bound when requests never end', async () => {
    const started = performance.now();
    await fileRequestsSettled(30, () => ['FSReqCallback', 'TTYWrap']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(29);
    // and does not wait at all for what is not a file request
    const at = performance.now();
    await fileRequestsSettled(10_000, () => ['Timeout', 'PipeWrap', 'ProcessWrap']);
    expect(performance.now() - at).toBeLessThan(1_000);
  });
});
