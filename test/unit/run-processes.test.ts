/**
 * The watch of a root's runs' processes (src/execution/run-processes.ts) is an object its root
 * builds, not the module's: two in one process keep their own waits, and one whose runs have
 * ended has no timer left, closed or not.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { RunProcesses } from '../../src/execution/run-processes.js';

/** A wrapper whose child outlives it by `ms`: the run is over when the child is gone. */
function wrapper(ms: number): number {
  const child = spawn('sh', ['-c', `sleep ${ms / 1000} & exit 0`], {
    detached: true,
    stdio: 'ignore',
  });
  return child.pid!;
}

describe('RunProcesses', () => {
  it('two watches wait for their own runs, and leave no timer once they are over', async () => {
    const a = new RunProcesses();
    const b = new RunProcesses();
    const started = performance.now();
    const short = a.whenRunGone(wrapper(200));
    // b's run lasts until the test ends it (its group is the wrapper's pid): however slow the
    // machine, it is still going when a's run is over.
    const longPid = wrapper(600_000);
    const long = b.whenRunGone(longPid);
    expect(a.waitingFor).toBe(1);
    expect(b.waitingFor).toBe(1);
    await short;
    expect(performance.now() - started).toBeGreaterThan(150);
    expect(a.waitingFor).toBe(0);
    // b's run goes on: a's end does not touch b's wait.
    expect(b.waitingFor).toBe(1);
    expect(b.polling).toBe(true);
    process.kill(-longPid, 'SIGKILL');
    await long;
    expect(a.polling).toBe(false);
    expect(b.polling).toBe(false);
    a.close();
    b.close();
  });

  it('close() gives no wait up: a run still going is waited for, then the poll stops', async () => {
    const watch = new RunProcesses();
    const gone = watch.whenRunGone(wrapper(300));
    watch.close();
    expect(watch.waitingFor).toBe(1);
    await gone;
    expect(watch.waitingFor).toBe(0);
    expect(watch.polling).toBe(false);
  });

  it('endRun stops a run whose child ignores SIGTERM, with the SIGKILL after the grace', async () => {
    const watch = new RunProcesses();
    const child = spawn('sh', ['-c', "trap '' TERM; sleep 30 & wait"], {
      detached: true,
      stdio: 'ignore',
    });
    await new Promise((r) => setTimeout(r, 100));
    const started = performance.now();
    await watch.endRun(child.pid!, 200);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(watch.polling).toBe(false);
    watch.close();
  });
});
