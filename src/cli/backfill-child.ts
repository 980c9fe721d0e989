/**
 * `POST /api/jobs/{job}/backfill` runs the same `baton backfill` an operator would, as a child of
 * the runner that received the request: one implementation of the walk (its lock per fire, its
 * resumption, its audit rows), not two. The request is first checked by a `--dry-run` of the same
 * command (the range, the bound, the job), whose refusal becomes the HTTP answer; then the
 * backfill itself starts in the background and the answer is 202 with the fires it will look at.
 * Its progress is the history and the audit (`baton audit`, the backfill's `details`).
 *
 * Nothing of the request reaches the child's argv where the command's parser could take it for
 * an option: `from` and `to` go as the ISO form of the instants the API parsed, joined to their
 * options; the reason — free text, `"--database-url=…"` is a reason like any other — goes by the
 * environment (`BATON_AUDIT_REASON`), never argv; the job is one of the schedules file's names,
 * which start with a letter or digit.
 *
 * The child gets the runner's environment (its database URL, file or credential), the database
 * URL given on the command line through `BATON_DATABASE_URL` (never argv: `ps` shows argv), and
 * the token's name as `BATON_AUDIT_TOKEN`, so the audit says whose token asked, and why.
 *
 * The runner owns its backfills (`BackfillChildren`, made by `baton start`): a backfill never
 * outlives it. The runner's stop is theirs: SIGTERM at once (`baton backfill` starts no further
 * fire and lets the one going finish), a second SIGTERM when the runner's grace is over (that run
 * is stopped as any run is, recorded `interrupted`), and the runner waits for them to exit as it
 * waits for its own runs. A runner that dies without a stop (SIGKILL, a crash) closes the IPC
 * channel each child is given: `baton backfill` watches it, and stops its run and itself when it
 * closes (cli/commands/backfill.ts), as the spawner does (execution/spawner.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { delay } from '../delay.js';
import { KILL_GRACE_MS } from '../fire/run-control.js';
import type { BackfillRequest, BackfillStart } from '../http/write-actions.js';
import type { Logger } from '../log.js';

export interface BackfillChildOptions {
  configFile: string;
  host: string;
  /** `--database-url-file F` when the runner was given a file; [] otherwise. */
  databaseArgs: string[];
  /** `BATON_DATABASE_URL` when the runner was given the URL as an option. */
  databaseEnv: Record<string, string>;
  log: Logger;
}

/** How long the dry run may take (it reads the history of the range). */
const DRY_RUN_MS = 30_000;
/**
 * After the second SIGTERM a child stops its run (SIGKILL after KILL_GRACE_MS) and records it;
 * one that has not exited this much later is killed: a runner's stop is bounded.
 */
const CHILD_STOP_MS = KILL_GRACE_MS + 10_000;

/** The backfills one runner started, and stops with it (see the header). */
export class BackfillChildren {
  private readonly exits = new Map<ChildProcess, Promise<void>>();
  private stopping = false;
  private forced: () => void = () => {};

  constructor(private readonly o: BackfillChildOptions) {}

  /** What the write API calls: `baton backfill` for the request, after its dry run. */
  readonly start = async (r: BackfillRequest): Promise<BackfillStart> => {
    if (this.stopping) return stoppingRefusal();
    const dry = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = this.spawnOwned(argvOf(this.o, r, true), envOf(this.o, r), 'pipe');
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), DRY_RUN_MS);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code: code ?? 70, stdout, stderr });
      });
    });
    // A stop that began during the dry run: nothing starts any more.
    if (this.stopping) return stoppingRefusal();
    if (dry.code !== 0)
      return { status: 'refused', exitCode: dry.code, message: errorOf(dry.stderr) };
    const summary = dry.stdout
      .split('\n')
      .filter((l) => l.startsWith('{"summary"'))
      .map((l) => (JSON.parse(l) as { summary: { fires: number; wouldRun: number } }).summary)[0];
    const child = this.spawnOwned(argvOf(this.o, r, false), envOf(this.o, r), 'ignore');
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
    child.on('close', (code, signal) =>
      this.o.log.info(
        {
          job: r.job,
          from: r.from.toISOString(),
          to: r.to.toISOString(),
          by: r.operator,
          exitCode: code,
          ...(signal ? { signal } : {}),
          error: code ? errorOf(stderr) : null,
        },
        'backfill from the write API ended',
      ),
    );
    return {
      status: 'started',
      pid: child.pid ?? 0,
      fires: summary?.fires ?? 0,
      toRun: summary?.wouldRun ?? 0,
    };
  };

  /**
   * The runner stops: no backfill starts any more; those going are asked to stop (no further
   * fire; the run going may finish) and waited for up to `graceMs`, then their runs are stopped
   * and they are waited for again (killed after CHILD_STOP_MS). `stopNow` cuts the grace short.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    if (this.exits.size === 0) return;
    this.o.log.info({ backfills: this.exits.size, graceMs }, 'stopping: asking backfills to stop');
    this.signalAll('SIGTERM');
    const graceOver = new AbortController();
    await Promise.race([
      this.allExited(),
      delay(graceMs, graceOver.signal),
      new Promise<void>((resolve) => (this.forced = resolve)),
    ]);
    graceOver.abort();
    if (this.exits.size === 0) {
      this.o.log.info('backfills stopped');
      return;
    }
    this.o.log.warn({ backfills: this.exits.size }, 'stopping the runs of backfills');
    // The second SIGTERM: `baton backfill` stops the run it was letting finish.
    this.signalAll('SIGTERM');
    const stopOver = new AbortController();
    await Promise.race([this.allExited(), delay(CHILD_STOP_MS, stopOver.signal)]);
    stopOver.abort();
    this.signalAll('SIGKILL');
    await this.allExited();
    this.o.log.info('backfills stopped');
  }

  /** A second signal to the runner: the backfills' grace is over now. */
  stopNow(): void {
    this.stopping = true;
    this.forced();
  }

  /** A child the runner owns (dry runs too): stopped with the runner, gone when it dies. */
  private spawnOwned(argv: string[], env: NodeJS.ProcessEnv, stdout: 'pipe' | 'ignore') {
    const child = spawn(process.execPath, argv, {
      env,
      // Its own process group: only the runner signals it (a Ctrl-C at the runner's terminal
      // would otherwise reach it too, and count as a second signal).
      detached: true,
      // The IPC channel is the child's life line: it closes when the runner dies, however.
      stdio: ['ignore', stdout, 'pipe', 'ipc'],
    });
    this.exits.set(
      child,
      new Promise<void>((resolve) =>
        child.once('close', () => {
          this.exits.delete(child);
          resolve();
        }),
      ),
    );
    return child;
  }

  private signalAll(signal: NodeJS.Signals): void {
    for (const child of this.exits.keys()) child.kill(signal);
  }

  private async allExited(): Promise<void> {
    await Promise.all([...this.exits.values()]);
  }
}

function stoppingRefusal(): BackfillStart {
  return { status: 'refused', exitCode: 75, message: 'this runner is stopping; ask another one' };
}

function argvOf(o: BackfillChildOptions, r: BackfillRequest, dryRun: boolean): string[] {
  return [
    process.argv[1]!,
    'backfill',
    r.job,
    `--from=${r.from.toISOString()}`,
    `--to=${r.to.toISOString()}`,
    '--config',
    o.configFile,
    '--host',
    o.host,
    ...o.databaseArgs,
    '--json',
    ...(r.again ? ['--again'] : []),
    ...(r.yes ? ['--yes'] : []),
    ...(dryRun ? ['--dry-run'] : []),
  ];
}

function envOf(o: BackfillChildOptions, r: BackfillRequest): NodeJS.ProcessEnv {
  const inherited: NodeJS.ProcessEnv = { ...process.env };
  // Only this request's reason: never one the runner's own environment happened to carry.
  delete inherited.BATON_AUDIT_REASON;
  return {
    ...inherited,
    ...o.databaseEnv,
    BATON_AUDIT_TOKEN: r.operator,
    ...(r.reason ? { BATON_AUDIT_REASON: r.reason } : {}),
    BATON_LOG_LEVEL: 'warn',
  };
}

/** The message of a `--json` command's error (`{"error": {…, "message"}}` on stderr). */
function errorOf(stderr: string): string {
  for (const line of stderr.split('\n').reverse()) {
    try {
      const parsed = JSON.parse(line) as { error?: { message?: string } };
      if (parsed.error?.message) return parsed.error.message;
    } catch {
      // not the JSON line
    }
  }
  return stderr.trim().split('\n').at(-1) ?? 'the backfill could not start';
}
