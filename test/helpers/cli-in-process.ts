/**
 * The `baton` command line run in the test process (src/cli/program.ts `runCli`), for the
 * in-process tier: the same commands, options, output and exit codes as the built CLI, without
 * a Node process per command — each cost some 0.4 s of CPU, and the tier's files ran about a
 * hundred and fifty of them (2026-12-06).
 *
 * An invocation sees what a child process would: the clean environment of cli.ts `baton` with
 * the test's additions (and nothing of the developer's BATON_* or npm's settings), its own
 * stdout and stderr (captured), its own exit code. Invocations run one at a time, since they
 * share the process's streams, environment and exit code.
 *
 * What needs a process stays one (`baton` of cli.ts): the commands that run jobs or a runner
 * (`run`, `backfill`, `start`, with their signal handlers and child processes), `--watch` (it
 * runs until a signal), a working directory of its own, --help/--version and a `help` word
 * (yargs prints those with console.log), and an environment that sets TZ (Node reads it once).
 *
 * While a command runs, `process.env` is its environment for the whole test process: a job an
 * in-process runner starts meanwhile inherits it too (the test's SUDO_USER, say). Harmless for
 * the tests here, which pass no BATON_* to a command; keep it so.
 */
import { runCli } from '../../src/cli/program.js';
import { baton as batonProcess, cleanEnv, type CliResult, type CommandOptions } from './cli.js';
import { runningTestFile } from './leftovers.js';

const NEEDS_A_PROCESS = new Set(['run', 'backfill', 'start', 'completion', 'help']);
const PROCESS_OPTIONS = ['--help', '-h', '--version', '--watch', '--get-yargs-completions'];

let queue: Promise<unknown> = Promise.resolve();

/** Set once an in-process command outlived its timeout: it may still hold the streams. */
let hung: string | null = null;

function needsAProcess(args: readonly string[], options: CommandOptions): boolean {
  // Any word, not only the first: `baton --config f.yaml run x` runs `run` (an option's value
  // that happens to be such a word only costs a process).
  const words = args.includes('--') ? args.slice(0, args.indexOf('--')) : args;
  return (
    words.some((a) => NEEDS_A_PROCESS.has(a)) ||
    args.some((a) => PROCESS_OPTIONS.includes(a) || a.startsWith('--watch=')) ||
    options.cwd != null ||
    options.env?.TZ != null
  );
}

/** `baton args…` in this process where it can be, else as a process (see above). */
export function baton(args: string[], options: CommandOptions = {}): Promise<CliResult> {
  if (needsAProcess(args, options)) return batonProcess(args, options);
  const { env = {}, timeoutMs = 30_000 } = options;
  // A command that never ends fails its test after timeoutMs, as a process would be killed. It
  // cannot be stopped, only left — still holding the process's streams and environment — so the
  // in-process commands after it fail at once rather than capture into its buffers: in this file
  // and in the files after it in this worker (vitest.config.ts `isolate: false`), which the
  // message sends back to the file that hung.
  const run = queue.then(() => {
    if (hung) throw new Error(`not run: an earlier command (${hung}) is still running in-process`);
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      invoke(args, env),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          hung = `baton ${args.join(' ')}, in ${runningTestFile()}`;
          reject(new Error(`${hung} did not end within ${timeoutMs} ms`));
        }, timeoutMs);
        timer.unref();
      }),
    ]).finally(() => clearTimeout(timer));
  });
  queue = run.catch(() => {});
  return run;
}

type Write = typeof process.stdout.write;

async function invoke(args: string[], extraEnv: Record<string, string>): Promise<CliResult> {
  const saved = { env: process.env, exitCode: process.exitCode };
  const writes = { out: process.stdout.write, err: process.stderr.write };
  let stdout = '';
  let stderr = '';
  const capture =
    (append: (text: string) => void): Write =>
    (chunk: unknown, encoding?: unknown, done?: unknown) => {
      append(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString());
      const callback = typeof encoding === 'function' ? encoding : done;
      if (typeof callback === 'function') queueMicrotask(() => (callback as () => void)());
      return true;
    };
  process.env = cleanEnv(extraEnv);
  process.exitCode = undefined;
  process.stdout.write = capture((t) => (stdout += t));
  process.stderr.write = capture((t) => (stderr += t));
  try {
    const usageExit = await runCli(args, { exitProcess: false });
    const code = usageExit ?? Number(process.exitCode ?? 0);
    return { code, stdout, stderr };
  } finally {
    process.stdout.write = writes.out;
    process.stderr.write = writes.err;
    process.env = saved.env;
    process.exitCode = saved.exitCode;
  }
}
