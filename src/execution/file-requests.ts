/**
 * Waiting, briefly, for the file-system requests a process still has in flight.
 *
 * A module host exits as soon as its job has settled (module-host.ts): a job that left a timer
 * or a socket open must not keep its run "running". But a write started and not awaited is then
 * cut off half-done — and tsx writes its disk cache that way (`fs.promises.writeFile`, never
 * awaited): a short job in a CommonJS package scope, whose files tsx transforms on the main
 * thread, left each entry empty, so every run transformed every file again and paid esbuild's
 * start (~100 ms; `tsx job.ts` lets the process end by itself, and its writes land). So the
 * host gives those requests a moment to finish — they take a fraction of a millisecond — and a
 * bound, so that a job streaming a file when it settled still ends at once, as before.
 */

/** Node's names (process.getActiveResourcesInfo) of pending file-system requests. */
const FILE_REQUEST = /^(FSReq|FileHandleCloseReq)/;

/**
 * Resolves when no file-system request is in flight, or after `maxMs` at most. `active` lists
 * the process's pending resources (Node's own, but for tests).
 */
export function fileRequestsSettled(
  maxMs: number,
  active: () => string[] = () => process.getActiveResourcesInfo(),
): Promise<void> {
  const until = performance.now() + maxMs;
  return new Promise((resolve) => {
    const poll = () => {
      if (!active().some((name) => FILE_REQUEST.test(name)) || performance.now() >= until) {
        resolve();
      } else {
        setTimeout(poll, 1);
      }
    };
    poll();
  });
}
