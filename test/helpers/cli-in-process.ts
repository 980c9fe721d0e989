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
 * (`run`, `backfill`, `start`, with their signal handlers and child processes), a working
 * directory of its own, and --help/--version (yargs prints those with console.log and exits).
 */
import { runCli } from '../../src/cli/program.js';
import { baton as batonProcess, cleanEnv, type CliResult, type CommandOptions } from './cli.js';

const NEEDS_A_PROCESS = new Set(['run', 'backfill', 'start', 'completion']);

let queue: Promise<unknown> = Promise.resolve();

/** `baton args…` in this process where it can be, else as a process (see above). */
export function baton(args: string[], options: CommandOptions = {}): Promise<CliResult> {
  const inProcess =
    !NEEDS_A_PROCESS.has(args[0] ?? '') &&
    options.cwd == null &&
    !args.some((a) => ['--help', '-h', '--version', '--get-yargs-completions'].includes(a));
  if (!inProcess) return batonProcess(args, options);
  const run = queue.then(() => invoke(args, options.env ?? {}));
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
    const usageExit = await runCli(args);
    const code = usageExit ?? Number(process.exitCode ?? 0);
    return { code, stdout, stderr };
  } finally {
    process.stdout.write = writes.out;
    process.stderr.write = writes.err;
    process.env = saved.env;
    process.exitCode = saved.exitCode;
  }
}
