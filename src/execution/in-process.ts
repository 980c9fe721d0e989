/**
 * Library mode's runs: a job whose `target` is `handler` runs a function of the application, in
 * the application's process, as one attempt of the same pipeline as every other job
 * (fire/run-fire.ts). Only the launch differs: instead of a process there is a promise.
 *
 * What that changes, said plainly (docs/library-mode.md):
 *
 * - **Stopping.** A process can be killed; a function cannot. Every stop (a timeout, a lost lock
 *   session, `baton kill`, a shutdown) aborts `ctx.signal` with the reason, and the handler is
 *   expected to give up. It gets the grace a process would get before SIGKILL; a handler still
 *   going after it is reported — a warning in the log, and the run's `error` says that it ignored
 *   its signal and may still be running in this process — and the run ends there, with the stop's
 *   status, so the verdict is written and the lock released (a lost session's lock is gone anyway).
 * - **Isolation.** A handler that crashes the process, leaks memory or blocks the event loop
 *   does so to the application (and stalls its heartbeats: the session is then lost). A job that
 *   needs isolation is a `module:` job (loaded from a `schedules.yaml`), run in a child process.
 * - **The lease.** The runs' lease (run-lease.ts) exists to stop a run whose runner stalled; an
 *   in-process run stalls with its runner, so it takes no part in it.
 *
 * `ctx.log` writes JSON lines (pino) into the run's output — the history's output and tail, like
 * a module job's stdout — and `ctx.db` is a pool on the job's database, shared by the runs of
 * one scheduler and closed when it stops (`InProcessJobs.close`).
 *
 * A scheduler (library/scheduler.ts, its composition root) owns its `InProcessJobs`, and its
 * runner starts handler jobs through it (job-process.ts: `Launchers.inProcess`).
 */
import type { Connection, Pool } from 'mysql2/promise';
import { pino, type Logger } from 'pino';
import type { DatabaseTarget } from '../config/database-url.js';
import type { JobDefinition } from '../config/schema.js';
import { jobOfSubject, splitSubject } from '../schedule-keys.js';
import type { TransactionOptions } from '../sdk/connection.js';
import { fencedPool, type FencedPool, type RunFence } from '../sdk/fence.js';
import { openPool } from '../store/connect.js';
import { truncate } from '../text.js';
import type { FireInfo, JobContext } from './job-context.js';
import { OutputCapture } from './output-capture.js';
import { OUTPUT_FLUSH_MS } from './job-launch.js';
import type {
  InProcessLauncher,
  JobResult,
  RunningJob,
  StartOptions,
  StopStatus,
} from './job-process.js';
import { OutputTail } from './output-tail.js';
import { maskText, SecretMask } from './secret-mask.js';

/** The function of an in-process job; `ctx` as a module job's (job-context.ts). */
export type JobHandler = (ctx: JobContext) => unknown;

const ERROR_MAX = 2_000;
/** How long the stop waits for `ctx.db`'s pools to end before destroying their connections. */
const POOL_END_MS = 1_000;

/** Told when a handler ignored its signal past the grace (the scheduler logs it). */
export type IgnoredSignal = (job: string, runId: number, why: string) => void;

/**
 * Told when a handler given up past the grace has settled at last: how many of its fenced
 * transactions (sdk/fence.ts) were refused, and how many committed, after it was given up.
 */
export type IgnoredSettled = (
  job: string,
  runId: number,
  after: { refused: number; committed: number; error: string | null },
) => void;

/** One scheduler's handlers, by job name, and the pools behind their `ctx.db`. */
export class InProcessJobs implements InProcessLauncher {
  private readonly pools = new Map<string, Pool>();
  /** Each pool's connections, to destroy those a late query holds (see `close`). */
  private readonly connections = new Map<Pool, Set<{ destroy(): void }>>();
  private closed = false;

  constructor(
    private readonly handlers: ReadonlyMap<string, JobHandler>,
    private readonly onIgnored: IgnoredSignal = () => {},
    private readonly onIgnoredSettled: IgnoredSettled = () => {},
  ) {}

  start(job: JobDefinition, fire: FireInfo, options: StartOptions): RunningJob {
    // The runner takes no fire once stopping; this says so if that ever changes.
    if (this.closed) throw new Error(`${job.name}: the scheduler has stopped`);
    // A schedule created at run time (`<job>:<key>`) runs its job's handler.
    return startInProcess(this.handlers.get(jobOfSubject(job.name)), job, fire, options, {
      pool: (target) => this.poolFor(target),
      ignored: this.onIgnored,
      ignoredSettled: this.onIgnoredSettled,
    });
  }

  /**
   * Ends the pools behind `ctx.db` (the scheduler's stop, after its runs). A query still going
   * now is a handler's that ignored its signal past the grace: the pool's end would wait for it,
   * and the application's stop with it. After POOL_END_MS its connections are destroyed.
   */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(
      all.map(async (pool) => {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<'late'>((resolve) => {
          timer = setTimeout(() => resolve('late'), POOL_END_MS);
        });
        const outcome = await Promise.race([pool.end().catch(() => 'ended'), late]);
        clearTimeout(timer);
        if (outcome === 'late') {
          for (const conn of this.connections.get(pool) ?? []) conn.destroy();
        }
      }),
    );
  }

  private poolFor(target: DatabaseTarget | null | undefined): Pool {
    if (!target) throw new Error('ctx.db is not available: no database for this job');
    // A handler still going after the stop (it ignored its signal) gets no new pool to hold the
    // process open with.
    if (this.closed) throw new Error('ctx.db is not available: the scheduler has stopped');
    const key = JSON.stringify([target.display, target.database]);
    let pool = this.pools.get(key);
    if (!pool) {
      // The handler's queries are the application's work: they hold the process whatever the
      // scheduler's keepAlive (keep-alive.ts: HOLDS_PROCESS, openPool's default).
      const opened = openPool(target, 8);
      const connections = new Set<{ destroy(): void }>();
      opened.pool.on('connection', (conn) => connections.add(conn));
      this.connections.set(opened, connections);
      this.pools.set(key, (pool = opened));
    }
    return pool;
  }
}

/** The run's output: ctx.log's lines, masked, into the tail and the kept output (as a process's). */
function runOutput(options: StartOptions) {
  const tail = new OutputTail(options.tailBytes);
  const sink = options.output;
  const whole = sink && new OutputCapture(sink.maxBytes);
  const mask = new SecretMask(options.secrets ?? []);
  const keep = (bytes: Buffer) => {
    if (bytes.length === 0) return;
    tail.push(bytes);
    whole?.push(1, bytes);
  };
  const flusher =
    whole &&
    setInterval(() => {
      const chunks = whole.takeLive();
      if (chunks.length > 0) sink.deliver(chunks, false);
    }, OUTPUT_FLUSH_MS);
  return {
    write: (line: string) => keep(mask.push(Buffer.from(line))),
    end(): string {
      clearInterval(flusher);
      keep(mask.end());
      if (whole) sink.deliver(whole.finish(), true);
      return tail.toString();
    },
  };
}

function startInProcess(
  handler: JobHandler | undefined,
  job: JobDefinition,
  fire: FireInfo,
  options: StartOptions,
  scheduler: {
    pool: (target: DatabaseTarget | null | undefined) => Pool;
    ignored: IgnoredSignal;
    ignoredSettled: IgnoredSettled;
  },
): RunningJob {
  const controller = new AbortController();
  const output = runOutput(options);
  const key = splitSubject(fire.job)?.key;
  const ctx = {
    ...fire,
    fire,
    params: fire.params ?? {},
    ...(key != null ? { key } : {}),
    signal: controller.signal,
  } as JobContext;
  // Made when first used: a logger takes longer to build than a short handler takes to run, and
  // a fire of many jobs calls its handlers one after another.
  let log: Logger | undefined;
  Object.defineProperty(ctx, 'log', {
    get: () =>
      (log ??= pino(
        { base: { job: fire.job, runId: fire.runId, host: fire.host, attempt: fire.attempt } },
        { write: output.write },
      )),
    // A handler may replace it (`ctx.log = ctx.log.child({...})`), as it could a plain property.
    set: (replacement: Logger) => (log = replacement),
    enumerable: true,
    configurable: true,
  });
  // Not enumerable: logging or spreading ctx must not serialise a pool (its config holds the
  // password), nor create one.
  // With the run's fence (sdk/fence.ts): its refusals are counted, for the report of a handler
  // that ignored its signal (`ignoredSettled`). A view of its own per run: the pool is shared.
  const fenceTally = { refused: 0, committed: 0 };
  let givenUp = false;
  const fence: RunFence = {
    fence: fire.fence,
    database: options.batonDatabase ?? '',
    onRefused: () => void fenceTally.refused++,
  };
  let db: FencedPool | undefined;
  Object.defineProperty(ctx, 'db', {
    get: () => (db ??= countCommits(fencedPool(scheduler.pool(options.database), fence))),
    enumerable: false,
  });
  /** Counts the fenced transactions that commit after the run was given up (there should be none). */
  const countCommits = (pool: FencedPool): FencedPool =>
    new Proxy(pool, {
      get(target, name) {
        if (name !== 'fenced') return Reflect.get(target, name, target) as unknown;
        return async <T>(fn: (tx: Connection) => Promise<T>, o?: TransactionOptions) => {
          const value = await target.fenced(fn, o);
          if (givenUp) fenceTally.committed++;
          return value;
        };
      },
    });

  let stopReason: { why: string; status: StopStatus } | null = null;
  let settle!: (result: JobResult) => void;
  const result = new Promise<JobResult>((resolve) => (settle = resolve));
  let over = false;
  const end = (status: JobResult['status'], error: string | null, mayStillRun = false) => {
    if (over) return;
    over = true;
    const outputTail = output.end();
    const masked =
      error == null ? null : truncate(maskText(error, options.secrets ?? []), ERROR_MAX);
    settle({
      status,
      exitCode: status === 'done' ? 0 : null,
      signal: null,
      error: masked,
      outputTail,
      endedAt: new Date(),
      ...(mayStillRun ? { mayStillRun } : {}),
    });
  };
  const message = (err: unknown) =>
    err instanceof Error ? err.message || err.name : `threw ${String(err)}`;
  void (async () => {
    if (!handler) throw new Error(`no handler is registered for ${job.name} in this process`);
    await handler(ctx);
  })().then(
    () => {
      if (givenUp) scheduler.ignoredSettled(job.name, fire.runId, { ...fenceTally, error: null });
      end(stopReason?.status ?? 'done', stopReason?.why ?? null);
    },
    (err: unknown) => {
      if (givenUp) {
        scheduler.ignoredSettled(job.name, fire.runId, { ...fenceTally, error: message(err) });
      }
      end(stopReason?.status ?? 'failed', stopReason?.why ?? message(err));
    },
  );

  return {
    pid: process.pid,
    started: Promise.resolve(),
    result,
    async stop(why, graceMs, status) {
      stopReason ??= { why, status };
      if (!controller.signal.aborted) controller.abort(new Error(why));
      // What SIGKILL is to a process: past the grace the run is over for baton, reported.
      const timer = setTimeout(() => {
        if (over) return;
        const refused = fenceTally.refused;
        const ignored =
          `${stopReason!.why}; the handler ignored ctx.signal for ${graceMs} ms and may still be ` +
          'running in this process (an in-process handler cannot be killed); its fenced writes ' +
          `(ctx.db.fenced, the helpers given ctx.db.fence: fence ${fire.fence}) are refused ` +
          `from its verdict on${refused > 0 ? ` (${refused} refused already)` : ''}, ` +
          'its other writes are not';
        givenUp = true;
        scheduler.ignored(job.name, fire.runId, ignored);
        end(stopReason!.status, ignored, true);
      }, graceMs);
      try {
        return await result;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
