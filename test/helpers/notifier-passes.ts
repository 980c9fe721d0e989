/**
 * The passes of in-process runners' notifiers (src/daemon/notifier.ts), counted as they end, for
 * the negative checks of notification tests ("told once", "no repeat"): such a check waits for a
 * few more passes of every live notifier — each of which would have delivered a repeat — instead
 * of a sleep. `Notifier.prototype.pass` and its evaluation are observed (called through,
 * unchanged) for the file that calls `useNotifierPasses`.
 */
import { afterAll, beforeAll, vi } from 'vitest';
import { Notifier } from '../../src/daemon/notifier.js';
import type { InProcessRunner } from './in-process-fleet.js';
import { waitFor } from './wait.js';

interface Count {
  /** Passes ended. */
  ended: number;
  /** Passes ended that evaluated the fleet events (`no-success`, `runner-gone`, …). */
  evaluated: number;
  evaluating: boolean;
}

type Evaluating = { evaluate(...args: unknown[]): Promise<void> };

/**
 * Observes every notifier's passes while the file runs; the function it returns resolves once
 * every runner's notifier has ended `count` more passes from now (`evaluated`: passes that
 * evaluated the fleet events, and delivered what they found). The notifier's loop runs one pass
 * at a time, so a pass counted ended after the call and started after it too, or is the one
 * under way (hence `count` + 1 of them: every counted pass but the first began after the call).
 */
export function useNotifierPasses(): (
  runners: readonly InProcessRunner[],
  count: number,
  options?: { evaluated?: boolean },
) => Promise<void> {
  const counts = new WeakMap<Notifier, Count>();
  const countOf = (n: Notifier): Count => {
    let c = counts.get(n);
    if (!c) counts.set(n, (c = { ended: 0, evaluated: 0, evaluating: false }));
    return c;
  };
  const spies: { mockRestore(): void }[] = [];
  beforeAll(() => {
    const pass = Notifier.prototype.pass;
    spies.push(
      vi.spyOn(Notifier.prototype, 'pass').mockImplementation(async function (this: Notifier) {
        const c = countOf(this);
        c.evaluating = false;
        try {
          return await pass.call(this);
        } finally {
          c.ended += 1;
          if (c.evaluating) c.evaluated += 1;
        }
      }),
    );
    const evaluate = (Notifier.prototype as unknown as Evaluating).evaluate;
    spies.push(
      vi
        .spyOn(Notifier.prototype as unknown as Evaluating, 'evaluate')
        .mockImplementation(async function (this: Notifier, ...args: unknown[]) {
          countOf(this).evaluating = true;
          return evaluate.apply(this, args);
        }),
    );
  });
  afterAll(() => spies.splice(0).forEach((s) => s.mockRestore()));

  // The runner's notifier, built at its start (Runner.notifier, private).
  const notifierOf = (r: InProcessRunner): Notifier => {
    const n = (r.runner as unknown as { notifier: Notifier | null }).notifier;
    if (!n) throw new Error(`${r.host}: no notifier (not started?)`);
    return n;
  };
  return async (runners, count, { evaluated = false } = {}) => {
    const read = (r: InProcessRunner) => {
      const c = countOf(notifierOf(r));
      return evaluated ? c.evaluated : c.ended;
    };
    const from = new Map(runners.map((r) => [r, read(r)]));
    const hosts = runners.map((r) => r.host).join(', ');
    await waitFor(
      `${count} more ${evaluated ? 'evaluating ' : ''}notifier passes of ${hosts}`,
      () => runners.every((r) => read(r) - from.get(r)! >= count + 1),
    );
  };
}
