/**
 * Runners in the test process: the daemon's own composition root (src/daemon/runner.ts, as
 * `baton start` builds it, without its HTTP endpoint and signal handling), one `Runner` per host,
 * each with its own pool, lock session, spawner and lease — the in-process tier of the suite
 * (test/README.md). The jobs are still real processes (each runner's spawner starts them), so the
 * ground-truth judges (ground-truth.ts: the jobs' journal and their flock) judge them as before.
 *
 * What a test waits for is an event the runner reports (`fire:won`, `run:finished`, `lock:lost`, …
 * : src/daemon/runner-events.ts), or a log line, never a sleep. What needs a process boundary —
 * kill -9, SIGSTOP, libfaketime, network namespaces, a runner's exit code — stays in the process
 * tier (fleet.ts, cli.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { parseDatabaseUrl } from '../../src/config/database-url.js';
import { loadConfig } from '../../src/config/load.js';
import type { RunnerEventMap } from '../../src/daemon/runner-events.js';
import { Runner, type RunnerOptions } from '../../src/daemon/runner.js';
import { waitForLogLine, type LogLine } from './cli.js';
import { createTestDatabase, type TestDatabase } from './db.js';
import { mustEnd } from './leftovers.js';
import { waitFor } from './wait.js';

/**
 * The host of the in-process runner whose code is running: what a runner does (its timers, its
 * pools' callbacks, its spawner's messages) runs inside it, the test's own code outside (undefined).
 * `traceStatements(() => runnerScope.getStore())` (statements.ts) tells each runner's statements
 * from the test's own, as a statement log per runner process did.
 */
export const runnerScope = new AsyncLocalStorage<string>();

export interface InProcessRunnerOptions {
  /** The schedules file (writeSchedule in cli.ts). */
  config: string;
  databaseUrl: string;
  host: string;
  /** `baton start --grace`, in ms; default 30 s as the daemon's. */
  graceMs?: number;
  /** What else a runner is given (its intervals: RunnerOptions). */
  runner?: Partial<Omit<RunnerOptions, 'config' | 'target' | 'host' | 'log' | 'graceMs'>>;
}

/** One runner of the fleet, and what it logged. */
export class InProcessRunner {
  readonly lines: LogLine[] = [];
  /**
   * What a runner process would have printed to stderr: the warnings Node emitted in this process
   * while the runner lived (a MaxListenersExceededWarning, a TimeoutOverflowWarning, …), which
   * are the process's, so every runner of the test sees them. expectQuiet (fleet.ts) reads it.
   */
  stderr = '';
  private readonly onWarning = (warning: Error) =>
    (this.stderr += `${warning.name}: ${warning.message}\n`);
  readonly runner: Runner;
  private stopped: Promise<void> | null = null;
  /** Tells file-boundary.ts that this runner was stopped (leftovers.ts). */
  private ended: () => void = () => {};
  /** Why start() failed, if it did: a wait for a log line ends with it. */
  private failed: string | null = null;

  constructor(
    readonly host: string,
    o: InProcessRunnerOptions,
  ) {
    const sink = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        for (const line of chunk.toString().split('\n').filter(Boolean)) {
          this.lines.push(JSON.parse(line) as LogLine);
        }
        done();
      },
    });
    // The daemon's log lines, as `baton start --log-level debug` writes them (log.ts).
    const log = pino({ level: 'debug', base: { pid: process.pid } }, sink).child({ host });
    this.runner = runnerScope.run(
      host,
      () =>
        new Runner({
          config: loadConfig(o.config),
          target: parseDatabaseUrl(o.databaseUrl),
          host,
          log,
          graceMs: o.graceMs ?? 30_000,
          ...o.runner,
        }),
    );
  }

  /** Connects and starts the loop; resolves once the runner has said `runner started`. */
  async start(): Promise<void> {
    process.on('warning', this.onWarning);
    this.ended = mustEnd(`in-process runner ${this.host}`, () =>
      this.stop(true, 'left running by its test file'),
    );
    const started = await runnerScope
      .run(this.host, () => this.runner.start())
      .catch((err: unknown) => {
        this.failed = err instanceof Error ? err.message : String(err);
        throw err;
      });
    if (!started) throw new Error(`${this.host}: the runner stopped before it started`);
  }

  /** The first event `name` (from now on) for which `where` holds. */
  nextEvent<K extends keyof RunnerEventMap>(
    name: K,
    where: (e: RunnerEventMap[K]) => boolean = () => true,
    timeoutMs = 20_000,
  ): Promise<RunnerEventMap[K]> {
    let seen: RunnerEventMap[K] | undefined;
    const off = this.runner.events.on(name, (e) => {
      if (seen === undefined && where(e)) seen = e;
    });
    return waitFor(`${this.host}: event ${String(name)}`, () => seen, { timeoutMs }).finally(off);
  }

  /** Resolves with the first log line matching `msg` (and `where`, if given). */
  waitForLog(
    msg: string,
    where: (l: LogLine) => boolean = () => true,
    timeoutMs = 20_000,
  ): Promise<LogLine> {
    return waitForLogLine(this.host, this.lines, msg, where, timeoutMs, () =>
      this.failed ? `${this.host} failed to start: ${this.failed}` : null,
    );
  }

  /** Log lines at error level or above (pino: 50 = error, 60 = fatal). */
  errors(): LogLine[] {
    return this.lines.filter((l) => l.level >= 50);
  }

  /**
   * As SIGTERM does to `baton start` (`force`: a second one); once, however often asked.
   * `reason` is what the daemon passes (the signal's name: `SIGTERM`), and what an interrupted
   * run's error names.
   */
  stop(
    force = false,
    reason = force ? 'forced by the test' : 'stopped by the test',
  ): Promise<void> {
    this.stopped ??= runnerScope
      .run(this.host, () => this.runner.stop(reason, force))
      .finally(() => {
        process.off('warning', this.onWarning);
        this.ended();
      });
    return this.stopped;
  }
}

export interface InProcessFleet {
  readonly db: TestDatabase;
  /**
   * Builds and starts one runner per host, each ready (connected, its loop armed), on the fleet's
   * database or on `databaseUrl` (a private server's, say).
   */
  start(
    hosts: readonly string[],
    options: Omit<InProcessRunnerOptions, 'host' | 'databaseUrl'> & { databaseUrl?: string },
  ): Promise<InProcessRunner[]>;
}

/**
 * As useFleet (fleet.ts), with runners in this process: a migrated database per file or per test,
 * every runner stopped (at once) and the database dropped afterwards.
 */
export function useInProcessFleet(
  label: string,
  { perTest = false, migrated = true } = {},
): InProcessFleet {
  let db: TestDatabase | undefined;
  const runners: InProcessRunner[] = [];
  (perTest ? beforeEach : beforeAll)(async () => {
    db = await createTestDatabase(label, { migrated });
  });
  (perTest ? afterEach : afterAll)(async () => {
    await Promise.all(runners.splice(0).map((r) => r.stop(true)));
    await db?.drop();
  });
  return {
    get db() {
      if (!db) throw new Error('the fleet database exists only inside tests');
      return db;
    },
    async start(hosts, options) {
      const started = hosts.map(
        (host) =>
          new InProcessRunner(host, {
            ...options,
            host,
            databaseUrl: options.databaseUrl ?? this.db.url,
          }),
      );
      runners.push(...started);
      await Promise.all(started.map((r) => r.start()));
      return started;
    },
  };
}
