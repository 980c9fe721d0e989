/**
 * The in-process runners started in this process and not yet stopped (in-process-fleet.ts adds
 * and removes them). A worker runs file after file in one process (vitest.config.ts
 * `isolate: false`), so a runner a file forgot would go on firing under the next files:
 * file-boundary.ts stops it and fails the file that left it. A module of its own so that the
 * setup file, run for every file, loads no runner.
 */
export interface LivingRunner {
  readonly host: string;
  stop(force: boolean, reason: string): Promise<void>;
}

const living = new Set<LivingRunner>();

export function runnerStarted(runner: LivingRunner): void {
  living.add(runner);
}

export function runnerStopped(runner: LivingRunner): void {
  living.delete(runner);
}

/** Stops the runners still running; returns their hosts. */
export async function stopRunnersLeftRunning(): Promise<string[]> {
  const left = [...living];
  await Promise.all(left.map((r) => r.stop(true, 'left running by its test file')));
  return left.map((r) => r.host);
}
