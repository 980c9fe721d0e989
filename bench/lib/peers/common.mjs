/**
 * Shared by the peer worker programs of the peers-cron scenario (plain JavaScript, run by a bare
 * `node`: a worker's footprint is the peer's, not a TypeScript loader's). The protocol is
 * b-procs.ts's: the task is argv[2] as JSON, `ready` on stdout once connected, then one JSON line
 * per job run, and a clean exit on SIGTERM.
 *
 * A run's start is stamped with the MONOTONIC clock (process.hrtime), not the wall clock: one of
 * the three workers runs with libfaketime's wall clock 0.4 s behind (FAKETIME_DONT_FAKE_MONOTONIC
 * leaves the monotonic clock alone, and it is one clock for every process of the machine), and the
 * harness turns it into real time with its own, unfaked, reading of both clocks.
 */
export const task = JSON.parse(process.argv[2] ?? '{}');

/** The monotonic clock, ms (fractional). */
export const mono = () => Number(process.hrtime.bigint()) / 1e6;

export function print(value) {
  process.stdout.write(`${typeof value === 'string' ? value : JSON.stringify(value)}\n`);
}

/** Calls `stop` on SIGTERM or SIGINT (once), then exits 0. */
export function onStop(stop) {
  let stopping = false;
  const end = () => {
    if (stopping) return;
    stopping = true;
    Promise.resolve()
      .then(stop)
      .catch((err) => process.stderr.write(`stop: ${String(err)}\n`))
      .finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 10_000).unref();
  };
  process.on('SIGTERM', end);
  process.on('SIGINT', end);
}

export function fail(err) {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
}
