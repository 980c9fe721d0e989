/**
 * A private MariaDB server for fault-injection tests: tests that stop, kill or restart "the
 * database" must never do that to the shared server on 127.0.0.1:3306, which every other test
 * file is using at the same time. Each private server gets a fresh data dir in a temp folder, a
 * free port on 127.0.0.1 and the shared server's relevant settings (utf8mb4, skip-name-resolve),
 * and `root` with an empty password, so `url` works exactly like the shared server's URL.
 *
 * Cost (2-core VM): the first server in a test process takes ~1.1 s, nearly all of it
 * `mariadb-install-db`; later ones copy that installed data dir and take ~0.3 s. A restart (until
 * the server answers) takes ~0.12 s, also after `kill()`; a graceful stop ~25 ms.
 *
 * Clean-up is layered, because a test file that fails in `beforeAll` or times out never reaches
 * its `destroy()`, and vitest ends its worker processes with SIGTERM (then SIGKILL), which skips
 * `process.on('exit')`:
 *  - `destroy()` in the test's `afterAll`;
 *  - a process 'exit' handler that SIGKILLs the servers and removes their dirs;
 *  - a tiny janitor process that holds a pipe from this process: when the pipe closes, however
 *    this process died, it SIGKILLs the servers still registered and removes their dirs.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import mysql, { type RowDataPacket } from 'mysql2/promise';
import { libfaketime } from './cli.js';

const MARIADBD = process.env.BATON_TEST_MARIADBD ?? '/usr/sbin/mariadbd';
const INSTALL_DB = process.env.BATON_TEST_MARIADB_INSTALL_DB ?? 'mariadb-install-db';
const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 30_000;

export interface PrivateServer {
  /** The TCP port on 127.0.0.1; the same across restarts. */
  readonly port: number;
  /** `mysql://root@127.0.0.1:PORT` — append `/dbname` for a database. */
  readonly url: string;
  readonly dataDir: string;
  /** Whether the server process is alive (it may still be starting or shutting down). */
  readonly running: boolean;
  /** The server's process id while it runs (to SIGSTOP it, say). */
  readonly pid: number | undefined;
  /** Graceful shutdown (SIGTERM); resolves once the process has exited. */
  stop(): Promise<void>;
  /** SIGKILL, like a crash or an OOM kill; resolves once the process has exited. */
  kill(): Promise<void>;
  /** (Re)starts on the same port and data dir; resolves once it answers `SELECT`. No-op if running. */
  start(): Promise<void>;
  /** Kills the server if it runs and removes its data dir. */
  destroy(): Promise<void>;
  /**
   * With `steppableClock`: steps the server's wall clock to `seconds` off the real one (negative:
   * behind), at once, as NTP stepping the database host's clock would. NOW() follows it.
   */
  stepClock(seconds: number): void;
}

export interface PrivateServerOptions {
  /**
   * Extra mariadbd arguments, placed after the helper's own (so a later `--option=value` wins),
   * e.g. the `--wsrep-*` settings that make the server a one-node Galera cluster. They apply to
   * every (re)start.
   */
  args?: readonly string[];
  /**
   * Run the server under libfaketime with its offset read from a file at every clock read, so
   * that `stepClock()` can step the server's clock while it runs (its monotonic clock is left
   * alone). Needs Debian's `faketime` (installed by .ci/run).
   */
  steppableClock?: boolean;
  /**
   * Addresses to listen on besides 127.0.0.1 (which the helper and the tests use themselves),
   * e.g. the root side of a network namespace's link (netns.ts) — only those, never 0.0.0.0.
   * They must exist when the server starts.
   */
  bindAddresses?: readonly string[];
  /**
   * Client hosts outside loopback that may log in as `root` (empty password, like the loopback
   * accounts): an address or a pattern, `10.213.%`. Granted once, after the first start.
   */
  clientHosts?: readonly string[];
}

export async function startPrivateServer(
  options: PrivateServerOptions = {},
): Promise<PrivateServer> {
  const template = await installedTemplate();
  const dataDir = await mkdtemp(join(tmpdir(), 'baton-mariadb-'));
  janitor().track('dir', dataDir);
  await cp(template, dataDir, { recursive: true });

  let port = 0;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let stderrTail = '';
  const clockFile = join(dataDir, 'faketime-offset');
  if (options.steppableClock) writeFileSync(clockFile, '+0\n');
  const clockEnv = options.steppableClock
    ? {
        ...process.env,
        LD_PRELOAD: libfaketime(),
        FAKETIME_TIMESTAMP_FILE: clockFile,
        FAKETIME_NO_CACHE: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      }
    : process.env;

  const launch = async (): Promise<void> => {
    stderrTail = '';
    const bind = ['127.0.0.1', ...(options.bindAddresses ?? [])].join(',');
    const proc = spawn(MARIADBD, [...serverArgs(dataDir, port, bind), ...(options.args ?? [])], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: clockEnv,
    });
    child = proc;
    liveServers.add(proc);
    const pid = proc.pid;
    if (pid != null) janitor().track('pid', String(pid));
    proc.stderr?.setEncoding('utf8');
    proc.stderr?.on('data', (chunk: string) => {
      stderrTail = (stderrTail + chunk).slice(-8_000);
    });
    exited = new Promise((resolve) => {
      // 'close', not 'exit': by then stderr is fully read, so error messages include the reason.
      proc.once('close', () => {
        liveServers.delete(proc);
        if (pid != null) janitor().untrack('pid', String(pid));
        if (child === proc) child = undefined;
        resolve();
      });
    });
    proc.once('error', (err) => {
      stderrTail += `\nspawn ${MARIADBD}: ${err.message}`;
    });
    // A forgotten server must not keep a plain node script alive; the exit handler kills it.
    proc.unref();
    (proc.stderr as Socket | null)?.unref();
    await waitUntilReady(port, dataDir, exited, () => stderrTail);
  };

  const terminate = async (signal: NodeJS.Signals): Promise<void> => {
    const proc = child;
    if (!proc) return;
    proc.kill(signal);
    // A test may have SIGSTOPped the server (see `pid`); it handles SIGTERM only once continued.
    if (signal !== 'SIGKILL') proc.kill('SIGCONT');
    const timer = setTimeout(() => proc.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  };

  // The port is free when we pick it, but another process may take it before mariadbd binds it;
  // only the first start may move to another port (later starts must keep the port tests know).
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await launch();
      break;
    } catch (err) {
      await terminate('SIGKILL');
      if (attempt < 3 && /Address already in use|Bind on TCP\/IP port/i.test(stderrTail)) continue;
      await rm(dataDir, { recursive: true, force: true });
      janitor().untrack('dir', dataDir);
      throw err;
    }
  }
  if (options.clientHosts?.length) await grantRoot(port, options.clientHosts);

  return {
    get port() {
      return port;
    },
    get url() {
      return `mysql://root@127.0.0.1:${port}`;
    },
    dataDir,
    get running() {
      return child != null;
    },
    get pid() {
      return child?.pid;
    },
    stop: () => terminate('SIGTERM'),
    kill: () => terminate('SIGKILL'),
    async start() {
      if (child) return;
      try {
        await launch();
      } catch (err) {
        await terminate('SIGKILL');
        throw err;
      }
    },
    stepClock(seconds) {
      if (!options.steppableClock) throw new Error('started without steppableClock');
      // Written aside and renamed: libfaketime must never read a half-written offset.
      writeFileSync(`${clockFile}.new`, `${seconds >= 0 ? '+' : ''}${seconds}\n`);
      renameSync(`${clockFile}.new`, clockFile);
    },
    async destroy() {
      // SIGKILL rather than a graceful stop: the data dir is about to go anyway.
      await terminate('SIGKILL');
      await rm(dataDir, { recursive: true, force: true });
      janitor().untrack('dir', dataDir);
    },
  };
}

function serverArgs(dataDir: string, port: number, bindAddress: string): string[] {
  return [
    '--no-defaults', // must come first; never read /etc/mysql/my.cnf (the shared server's config)
    `--datadir=${dataDir}`,
    `--port=${port}`,
    // A list since MariaDB 10.11.
    `--bind-address=${bindAddress}`,
    `--socket=${join(dataDir, 'mysqld.sock')}`,
    `--pid-file=${join(dataDir, 'mysqld.pid')}`,
    // Like the shared server (/etc/mysql/my.cnf): accounts match by IP, tables default to utf8mb4.
    '--skip-name-resolve',
    '--character-set-server=utf8mb4',
    '--collation-server=utf8mb4_general_ci',
    // Small and fast: tests hold little data. Committed data is still in the OS page cache when
    // the process is killed, so `kill()` loses nothing with flush-at-commit = 2.
    '--innodb-buffer-pool-size=16M',
    '--innodb-log-file-size=8M',
    '--innodb-flush-log-at-trx-commit=2',
    '--skip-log-bin',
    ...userArgs(),
  ];
}

/** mariadbd refuses to run as root unless told to; as root, `--user=root` needs no chown. */
function userArgs(): string[] {
  return process.getuid?.() === 0 ? ['--user=root'] : [];
}

/** Polls until the server on `port` answers as the one on `dataDir`, or fails with its stderr. */
async function waitUntilReady(
  port: number,
  dataDir: string,
  exited: Promise<void>,
  stderr: () => string,
): Promise<void> {
  let hasExited = false;
  void exited.then(() => (hasExited = true));
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last: unknown;
  for (;;) {
    if (hasExited) {
      throw new Error(`private MariaDB on port ${port} exited while starting:\n${tail(stderr())}`);
    }
    try {
      const conn = await mysql.createConnection({
        host: '127.0.0.1',
        port,
        user: 'root',
        connectTimeout: 2_000,
      });
      try {
        // Make sure we reached our server and not whatever else may have taken the port.
        const [rows] = await conn.query<RowDataPacket[]>('SELECT @@datadir AS dir');
        const dir = String(rows[0]?.dir ?? '').replace(/\/$/, '');
        if (dir !== dataDir) throw new Error(`port ${port} is served from ${dir}, not ${dataDir}`);
        return;
      } finally {
        await conn.end().catch(() => undefined);
      }
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `private MariaDB on port ${port} did not answer within ${READY_TIMEOUT_MS} ms ` +
          `(${String(last)}):\n${tail(stderr())}`,
        { cause: last },
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `root` with an empty password from each of `hosts`, as the install made it for loopback. */
async function grantRoot(port: number, hosts: readonly string[]): Promise<void> {
  const conn = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root' });
  try {
    for (const host of hosts) {
      await conn.query("CREATE USER IF NOT EXISTS 'root'@?", [host]);
      await conn.query("GRANT ALL PRIVILEGES ON *.* TO 'root'@? WITH GRANT OPTION", [host]);
    }
  } finally {
    await conn.end();
  }
}

function tail(text: string): string {
  return text.trim().split('\n').slice(-20).join('\n') || '(no output)';
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago (for a server's extra listeners), below the
 * kernel's ephemeral range: a port the kernel handed out (`listen(0)`) is also one it hands out
 * as the source port of the suite's thousands of outgoing connections, and one of those could
 * take it before the server that is to listen on it does (a private mariadbd failed to bind so).
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  for (let tries = 0; ; tries++) {
    const port = PORT_FLOOR + Math.floor(Math.random() * (low - PORT_FLOOR));
    if (await canListen(port)) return port;
    if (tries >= 100) throw new Error(`no free port in [${PORT_FLOOR}, ${low})`);
  }
}

/** Where the ports `freePort` picks from begin (above the well-known and registered few). */
const PORT_FLOOR = 20_000;

/** The first port of the kernel's ephemeral range (32768 by default). */
function ephemeralLow(): number {
  try {
    const low = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0],
    );
    return Number.isInteger(low) && low > PORT_FLOOR + 1_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

let template: Promise<string> | undefined;

/**
 * A data dir installed once per process and copied for each server: the install costs ~1 s, a
 * copy of its ~25 MB a fraction of that. The InnoDB sizes must match `serverArgs`, or every
 * start resizes the redo log.
 */
function installedTemplate(): Promise<string> {
  template ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), 'baton-mariadb-template-'));
    janitor().track('dir', dir);
    const dataDir = join(dir, 'data');
    // The bootstrap's own temporary files: in the shared /tmp one was once removed under it
    // ("Could not remove temporary table … error: 2") while other servers started beside it.
    const scratch = join(dir, 'tmp');
    await mkdir(scratch);
    const args = [
      '--no-defaults',
      `--datadir=${dataDir}`,
      '--auth-root-authentication-method=normal', // root with an empty password, not unix_socket
      '--skip-test-db',
      '--skip-name-resolve', // grants for root@127.0.0.1 and root@::1 rather than a host name
      ...userArgs(),
      // Passed through to the bootstrap mariadbd:
      '--innodb-buffer-pool-size=16M',
      '--innodb-log-file-size=8M',
      '--skip-log-bin',
      `--tmpdir=${scratch}`,
    ];
    try {
      await installOnce(args, dataDir).catch(() => installOnce(args, dataDir));
    } catch (err) {
      template = undefined;
      const { stdout = '', stderr = '' } = err as { stdout?: string; stderr?: string };
      throw new Error(
        `${INSTALL_DB} failed: ${(err as Error).message}\n${tail(`${stdout}\n${stderr}`)}`,
        { cause: err },
      );
    }
    return dataDir;
  })();
  return template;
}

/** One mariadb-install-db into an empty `dataDir` (a failed attempt's leftovers removed first). */
async function installOnce(args: string[], dataDir: string): Promise<void> {
  await rm(dataDir, { recursive: true, force: true });
  await promisify(execFile)(INSTALL_DB, args, { maxBuffer: 10 * 1024 * 1024 });
}

// ---------------------------------------------------------------------------------------------
// Clean-up when the test process ends without destroying its servers.

const liveServers = new Set<ChildProcess>();

process.once('exit', () => {
  for (const proc of liveServers) proc.kill('SIGKILL');
  for (const dir of janitorDirs) rmSync(dir, { recursive: true, force: true });
});

const janitorDirs = new Set<string>();

/**
 * Runs in its own process and ignores the usual termination signals (Ctrl-C reaches the whole
 * process group); it acts only when its stdin closes, that is when the test process is gone.
 * It waits (up to 2 s) for each killed server to die before removing the dirs.
 */
const JANITOR_SOURCE = `
const { readFileSync, rmSync } = require('node:fs');
for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(s, () => {});
const items = { pid: new Set(), dir: new Set() };
let buffer = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffer += chunk;
  let nl;
  while ((nl = buffer.indexOf('\\n')) >= 0) {
    const line = buffer.slice(0, nl);
    buffer = buffer.slice(nl + 1);
    const [op, kind] = [line[0], line.slice(1, 4)];
    const value = line.slice(5);
    if (items[kind]) op === '+' ? items[kind].add(value) : items[kind].delete(value);
  }
});
process.stdin.on('close', () => {
  const pids = [...items.pid].map(Number);
  for (const pid of pids) { try { process.kill(pid, 'SIGKILL'); } catch {} }
  const deadline = Date.now() + 2000;
  const alive = (pid) => {
    try { process.kill(pid, 0); } catch { return false; }
    // A zombie is dead enough (its new parent may be slow to reap it, or never do).
    try { return !/^\\d+ \\(.*\\) Z/.test(readFileSync('/proc/' + pid + '/stat', 'utf8')); } catch { return true; }
  };
  while (pids.some(alive) && Date.now() < deadline) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
  for (const dir of items.dir) { try { rmSync(dir, { recursive: true, force: true }); } catch {} }
  process.exit(0);
});
`;

interface Janitor {
  track(kind: 'pid' | 'dir', value: string): void;
  untrack(kind: 'pid' | 'dir', value: string): void;
}

let janitorInstance: Janitor | undefined;

function janitor(): Janitor {
  if (janitorInstance) return janitorInstance;
  const proc = spawn(process.execPath, ['-e', JANITOR_SOURCE], {
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  // Neither the janitor nor its pipe may keep this process alive.
  proc.unref();
  const pipe = proc.stdin as Socket;
  pipe.unref();
  pipe.on('error', () => undefined); // a dead janitor must not crash the tests
  const send = (line: string) => {
    if (!pipe.destroyed) pipe.write(`${line}\n`);
  };
  janitorInstance = {
    track(kind, value) {
      if (kind === 'dir') janitorDirs.add(value);
      send(`+${kind} ${value}`);
    },
    untrack(kind, value) {
      if (kind === 'dir') janitorDirs.delete(value);
      send(`-${kind} ${value}`);
    },
  };
  return janitorInstance;
}
