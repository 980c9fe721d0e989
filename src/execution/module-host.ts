/**
 * Entry point of the child process that runs a module job: imports the module named by
 * BATON_MODULE, calls its default export with a `JobContext`, and exits 0 when it settles, 1 when
 * it throws. Running module jobs in a child (not in the daemon) means a crash, a leak or a
 * `process.exit` in batch code never takes the daemon down.
 *
 * The error of a failed job is sent to the parent over the IPC channel, so the history row says
 * what went wrong without parsing the output.
 *
 * Once the job has settled, the host exits at once, whatever the job left open (a timer, a socket),
 * but for the file-system requests still in flight, which get up to FILE_REQUESTS_MS to land
 * (file-requests.ts): tsx's cache writes among them, which an exit cut off in mid-write.
 *
 * Two ways a job can end without settling are caught here, because both would otherwise look like
 * success: calling `process.exit()` in the middle of its work, and returning a promise that never
 * settles while nothing else keeps the process alive (Node then simply exits with code 0).
 *
 * Two ways to start: cold (`module-host.js`, the run's environment set at spawn, BATON_MODULE
 * naming the module), or warm (`module-host.js --warm`, warm-hosts.ts): started ahead of need, with
 * Node, the loader and this file's imports loaded, it waits for its run — the `init` message
 * carries the module, the run's whole environment and its directory — and then goes on exactly
 * like a cold host. A warm host is one run's process: it serves that run and exits. It imports
 * nothing of the job before its run: the module (and all it imports) is read when the run starts,
 * so a file changed on disk runs as changed. A warm host whose runner goes away before its run
 * came (the channel closes) exits at once.
 *
 * While it waits, a warm host also does what a run would otherwise do first: it makes the root
 * logger (the run gets a child of it: pino() costs ~2 ms, a child a tenth of that), and, for a
 * kind of TypeScript jobs (`--tsx-warm-up`), it warms tsx up (tsx-warm-up.ts) before it says it
 * is warm — the runner logs what it did, at debug level.
 */
import { pathToFileURL } from 'node:url';
import mysql, { type ConnectionOptions, type Pool } from 'mysql2/promise';
import { pino } from 'pino';
import { fencedPool, type FencedPool } from '../sdk/fence.js';
import { fireFromEnvironment, type JobContext } from './job-context.js';
import { fileRequestsSettled } from './file-requests.js';
import { TSX_WARM_UP_FLAG, warmUpTsx, type WarmUpReport } from './tsx-warm-up.js';

/** Child → runner. */
export type HostMessage =
  | { kind: 'error'; message: string }
  | { kind: 'ready' }
  /**
   * A warm host has loaded all it loads before its run (warm-hosts.ts prefers such a host), and
   * warmed tsx up when asked to.
   */
  | { kind: 'warm'; warmUp?: WarmUpReport };

/**
 * Runner → child, in answer to `ready`: what the job may connect to (`ctx.db`). Sent over IPC,
 * never through the environment, so the password is not visible to the job's own children or in
 * /proc/<pid>/environ.
 */
export interface InitMessage {
  kind: 'init';
  database: { connection: ConnectionOptions; database: string } | null;
  /** To a warm host: the run it is for (a cold host has these from its spawn). */
  run?: WarmRun;
}

/** What a cold host gets at its spawn, a warm one in its `init`. */
export interface WarmRun {
  /** The whole environment of the run; it replaces the host's (BATON_MODULE included). */
  env: Record<string, string>;
  cwd: string;
}

/** Started ahead of need (warm-hosts.ts): the run comes in the init message. */
const WARM = process.argv.includes('--warm');
/** A warm host for TypeScript jobs: it warms tsx up before it says it is warm. */
const WARM_UP = process.argv.includes(TSX_WARM_UP_FLAG);

/** How long the host waits for the runner's init message (it comes at once). */
const INIT_TIMEOUT_MS = 5_000;

function receiveInit(): Promise<InitMessage | null> {
  if (!process.send || !process.connected) return Promise.resolve(null);
  return new Promise((resolve) => {
    const onMessage = (msg: InitMessage) => {
      clearTimeout(timer);
      resolve(msg?.kind === 'init' ? msg : null);
    };
    // Without an answer, the listener must go too: it would keep the IPC channel, and with it
    // the process, alive (and hide a job that never settles).
    const timer = setTimeout(() => {
      process.off('message', onMessage);
      resolve(null);
    }, INIT_TIMEOUT_MS);
    process.once('message', onMessage);
    const ready: HostMessage = { kind: 'ready' };
    process.send!(ready);
  });
}

/** How long a finished job waits for its pool to close (a query still running is cut off). */
const POOL_END_MS = 1_000;

/**
 * `ctx.db`: a pool created on first use, in UTC like every baton connection. Its idle
 * connections do not keep the process alive (their sockets are unref'd between uses), so a job
 * that never settles is still noticed once nothing else is pending.
 */
function lazyPool(init: InitMessage | null): { get(): Pool; end(): Promise<void> } {
  let pool: Pool | undefined;
  return {
    get() {
      if (!init?.database) {
        throw new Error('ctx.db is not available: the runner sent no database for this job');
      }
      if (!pool) {
        pool = mysql.createPool({
          ...init.database.connection,
          database: init.database.database,
          timezone: 'Z',
          connectionLimit: 8,
        });
        type Pooled = { stream?: { ref(): void; unref(): void } };
        pool.pool.on('connection', (conn) => conn.query("SET time_zone = '+00:00'", () => {}));
        pool.pool.on('acquire', (conn) => (conn as unknown as Pooled).stream?.ref());
        pool.pool.on('release', (conn) => (conn as unknown as Pooled).stream?.unref());
      }
      return pool;
    },
    async end() {
      if (!pool) return;
      // end() waits for queries still in flight; a job that is over must not be held by one.
      await Promise.race([
        pool.end().catch(() => {}),
        new Promise((r) => setTimeout(r, POOL_END_MS).unref()),
      ]);
    },
  };
}

/** Sends the error to the runner (for the history row) and prints the details to the output. */
function report(message: string, details = message): void {
  const msg: HostMessage = { kind: 'error', message };
  process.send?.(msg);
  process.stderr.write(`${details}\n`);
}

/** Set once the job's promise settled; before that, an exit is the job's doing. */
let settled = false;
const realExit = process.exit.bind(process);

/** Sends the error, then exits. */
function failAndExit(message: string, code = 1): never {
  process.stderr.write(`${message}\n`);
  const msg: HostMessage = { kind: 'error', message };
  // Exit at once, like the real process.exit: the job's code after the call must not run. The
  // IPC message is written synchronously enough to arrive first (a pipe to the parent).
  if (process.send && process.connected) process.send(msg);
  return realExit(code);
}

process.exit = ((code?: number | string | null) => {
  if (settled) return realExit(code ?? undefined);
  const n = Number(code ?? process.exitCode ?? 0);
  // A non-zero exit is a failure with the job's own code; exit(0) before the work is done is not
  // a success, whatever the code says.
  if (n !== 0) return failAndExit(`the job called process.exit(${n}) before it finished`, n);
  return failAndExit('the job called process.exit(0) before its promise settled');
}) as typeof process.exit;

process.on('beforeExit', () => {
  if (!settled) {
    failAndExit(
      'the job never settled: its promise was still pending when nothing was left to wait for ' +
        '(a missing await or resolve?)',
    );
  }
});

/**
 * A warm host's wait for its run: no timeout (the runner sends it when a fire is won); the
 * channel is kept open by the listeners until then, and a runner gone before it closes it. It
 * listens before it warms up: a fire that found no host done warming sends its run to one still
 * at it, and that run must wait for the warm-up, not be missed.
 */
async function receiveRun(): Promise<InitMessage | null> {
  if (!process.send || !process.connected) return null;
  const run = new Promise<InitMessage | null>((resolve) => {
    const onGone = () => realExit(0);
    process.once('disconnect', onGone);
    process.once('message', (msg: InitMessage) => {
      process.off('disconnect', onGone);
      resolve(msg?.kind === 'init' && msg.run ? msg : null);
    });
  });
  const warm: HostMessage = { kind: 'warm' };
  if (WARM_UP) warm.warmUp = await warmUpTsx();
  process.send(warm);
  return run;
}

/** The run's environment replaces the host's (Node passes process.env on to its children). */
function becomeRun(run: WarmRun): void {
  for (const key of Object.keys(process.env)) if (!(key in run.env)) delete process.env[key];
  Object.assign(process.env, run.env);
  process.chdir(run.cwd);
}

async function main(): Promise<number> {
  // Before the wait, in a warm host: the run only binds its child (the lines are the same).
  const rootLog = pino({ base: null });
  let init: InitMessage | null = null;
  if (WARM) {
    init = await receiveRun();
    if (!init?.run) {
      report('a warm module host got no run (this file is run by baton)');
      return 1;
    }
    becomeRun(init.run);
  }
  const modulePath = process.env.BATON_MODULE;
  if (!modulePath) {
    report('BATON_MODULE is not set (this file is run by baton)');
    return 1;
  }
  const fire = fireFromEnvironment(process.env);
  const mod = (await import(pathToFileURL(modulePath).href)) as { default?: unknown };
  if (typeof mod.default !== 'function') {
    report(`${modulePath} has no default export function (export default async (ctx) => { … })`);
    return 1;
  }

  const controller = new AbortController();
  // The runner sends SIGTERM when the run must stop; the job sees it as an aborted signal and
  // gets the runner's kill grace to wind down before SIGKILL.
  const onTerm = (signal: NodeJS.Signals) =>
    controller.abort(new Error(`run stopped by the runner (${signal})`));
  process.once('SIGTERM', onTerm);
  process.once('SIGINT', onTerm);

  init ??= await receiveInit();
  const db = lazyPool(init);
  const log = rootLog.child({
    job: fire.job,
    runId: fire.runId,
    host: fire.host,
    worker: fire.worker.slot,
  });
  const ctx = { ...fire, fire, log, signal: controller.signal } as JobContext;
  // Not enumerable: logging or spreading ctx must neither serialise the pool (its config holds
  // the password) nor create one.
  // `ctx.db` carries the run's fence (sdk/fence.ts): `ctx.db.fenced`, `ctx.db.fence`.
  const fence = { fence: fire.fence, database: process.env.BATON_FENCE_DATABASE ?? '' };
  let fencedDb: FencedPool | undefined;
  Object.defineProperty(ctx, 'db', {
    get: () => (fencedDb ??= fencedPool(db.get(), fence)),
    enumerable: false,
  });
  try {
    await (mod.default as (ctx: JobContext) => unknown)(ctx);
  } finally {
    await db.end();
  }
  log.flush();
  return 0;
}

/** How long a settled job's process waits at most for its file-system requests in flight. */
const FILE_REQUESTS_MS = 50;

/**
 * Exits after a turn of the event loop and the file writes in flight (see the header). A job
 * that resolved but left a timer or socket open must not keep the run "running".
 */
function exitSoon(code: number): void {
  setImmediate(() => void fileRequestsSettled(FILE_REQUESTS_MS).then(() => realExit(code)));
}

main().then(
  (code) => {
    settled = true;
    process.exitCode = code;
    exitSoon(code);
  },
  (err: unknown) => {
    settled = true;
    if (err instanceof Error) report(err.message || err.name, err.stack ?? err.message);
    else report(`job threw: ${String(err)}`);
    exitSoon(1);
  },
);
