/**
 * Polls `check` until it returns a truthy value or `timeoutMs` passes (then throws `what`).
 *
 * A falsy value means "not yet". An error thrown by the check means "not yet" too (a file not
 * written yet, a server still restarting) and is reported if the wait times out — except an
 * assertion failure (`expect` inside the check) or a `FatalWait`, which end the wait at once: an
 * assertion that fails on one poll is a failed test, not something to retry until it happens to
 * pass.
 */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  { timeoutMs = 20_000, intervalMs = 50 } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (err) {
      if (err instanceof FatalWait || isAssertionError(err)) throw err;
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`,
      );
    }
    await sleep(intervalMs);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Thrown from a `waitFor` check to stop waiting at once (the awaited thing can no longer happen). */
export class FatalWait extends Error {}

/** vitest's `expect` (chai) and node:assert both throw errors named AssertionError. */
function isAssertionError(err: unknown): boolean {
  return err instanceof Error && err.name === 'AssertionError';
}
