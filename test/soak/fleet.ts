/**
 * The soak's world: a private MariaDB (the soak restarts and kills it; never the shared one), a
 * freezable proxy in front of it, the schedule with its journaled jobs, and the runners — one on
 * a skewed clock, one behind the proxy, the rest direct. A runner that a fault stopped is started
 * again under the same host name; every process it was (an "incarnation") keeps its log lines,
 * so the checks read the whole story of a host.
 */
import mysql, { type Pool, type RowDataPacket } from 'mysql2/promise';
import { startRunner, type LogLine, type RunnerProcess } from '../helpers/cli.js';
import { writeJournaledSchedule, type Journal } from '../helpers/ground-truth.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

export const NAMESPACE = 'soak';
const DATABASE = 'baton_soak';
/**
 * The jobs and how often they fire (their cron expressions below are these periods; every one
 * divides a minute, so the instants are multiples of the period since the epoch).
 */
export const JOB_PERIOD_MS: Record<string, number> = {
  tick: 1_000,
  tock: 1_000,
  long: 4_000,
  queued: 3_000,
  flaky: 2_000,
};
/** Jobs that fire every second: the soak's pulse (recovery is measured on them). */
export const EVERY_SECOND_JOBS = ['tick', 'tock'];
/** The job that runs 3–12 s, so that faults hit live runs. */
export const LONG_JOB = 'long';
export const LONG_SECONDS = { base: 3, spread: 10 };

/** How long a run of a job lasts, in s: `base` + 0…`spread`-1, from its fire and the seed. */
export function jobSeconds(
  { base, spread }: { base: number; spread: number },
  fire: number,
  seed: number,
): number {
  return base + ((Math.floor(fire / 1000) * 7 + (seed % 1000)) % spread);
}

/**
 * Runner settings. The heartbeat and its deadline are the defaults (the bound docs/design.md
 * states is made of them); the grace is short so that a SIGTERM fault, and the final stop, do not
 * wait out a whole long run: some runs end `interrupted`, which is a path worth soaking too.
 */
const RUNNER_ARGS = ['--grace', '5'];

/**
 * Every job journals its own starts and ends (test/helpers/ground-truth.ts: the machine's real
 * clock, a flock held while any of its processes lives), with `timeOverlap` so that an overlap's
 * length is measured even when the earlier run was SIGKILLed. Durations come from the fire's
 * instant and the seed: a seed gives the same runs.
 */
function scheduleYaml(j: Journal, seed: number): string {
  const cmd = (work: string) => j.yaml({ work, timeOverlap: true });
  // jobSeconds() in shell arithmetic.
  const pick = (base: number, spread: number) =>
    `$(( ${base} + ( $(fire) / 1000 * 7 + ${seed % 1000} ) % ${spread} ))`;
  return `
namespace: ${NAMESPACE}
jobs:
  tick:
    schedule: "* * * * * *"
    command: ${cmd('sleep 0.2')}
  tock:
    schedule: "* * * * * *"
    command: ${cmd('')}
  long:
    schedule: "*/4 * * * * *"
    overlap: skip
    command: ${cmd(`sleep ${pick(LONG_SECONDS.base, LONG_SECONDS.spread)}`)}
  queued:
    schedule: "*/3 * * * * *"
    overlap: queue
    command: ${cmd(`sleep ${pick(2, 4)}`)}
  flaky:
    schedule: "*/2 * * * * *"
    retries: 1
    retryDelay: 500ms
    command: ${cmd('if [ "$BATON_ATTEMPT" = 1 ] && [ $(( $(fire) / 2000 % 3 )) = 0 ]; then exit 3; fi; sleep 0.3')}
`;
}

export interface LoggedLine extends LogLine {
  /** The line's time on the machine's real clock (its `time` less the host's skew), ms. */
  realTime: number;
  /** Which process of the host wrote it (0: the first). */
  incarnation: number;
}

/** One host of the fleet, across the processes it was. */
export class SoakRunner {
  readonly incarnations: RunnerProcess[] = [];
  /** Exits nobody asked for (a runner that died by itself is a finding), as text. */
  readonly crashes: string[] = [];
  private stopping = false;

  constructor(
    readonly host: string,
    private readonly start: () => RunnerProcess,
    /** libfaketime's offset of this host's clock, in ms (0: the real clock). */
    readonly skewMs: number,
    readonly via: 'direct' | 'proxy' | 'skewed',
  ) {}

  get current(): RunnerProcess {
    return this.incarnations[this.incarnations.length - 1]!;
  }

  get alive(): boolean {
    const c = this.current.child;
    return c.exitCode == null && c.signalCode == null;
  }

  /** Starts a new process for this host (the first, or after a stop). */
  launch(): RunnerProcess {
    const process = this.start();
    this.stopping = false;
    this.incarnations.push(process);
    process.child.once('exit', (code, signal) => {
      if (!this.stopping) {
        this.crashes.push(
          `${this.host} (incarnation ${this.incarnations.indexOf(process)}) exited ` +
            `${code ?? signal} by itself: ${process.stderr.trim().slice(-300)}`,
        );
      }
    });
    return process;
  }

  /** Stops the current process with `signal` (a fault, or the end); its exit code. */
  stop(signal: NodeJS.Signals): Promise<number | null> {
    this.stopping = true;
    // A stalled process handles no signal but SIGKILL until it runs again.
    if (signal !== 'SIGKILL') this.signal('SIGCONT');
    return this.current.stop(signal);
  }

  /** Every log line of every incarnation, with its real time, in order. */
  lines(): LoggedLine[] {
    return this.incarnations.flatMap((p, incarnation) =>
      p.lines.map((l) => ({
        ...l,
        incarnation,
        // baton logs ISO times (src/log.ts), from this host's (maybe skewed) clock.
        realTime: Date.parse(String(l.time)) - this.skewMs,
      })),
    );
  }

  /**
   * The current process's lock session, by its own log ('runner started', 'lock session
   * reopened'): null before it connected.
   */
  lockConnectionId(): number | null {
    const line = this.current.lines.findLast(
      (l) =>
        (l.msg === 'runner started' || l.msg === 'lock session reopened') && l.lockConnectionId,
    );
    return line ? Number(line.lockConnectionId) : null;
  }

  signal(signal: NodeJS.Signals): void {
    if (this.alive) this.current.child.kill(signal);
  }
}

export interface SoakFleet {
  seed: number;
  server: PrivateServer;
  proxy: TcpProxy;
  /** The harness's own connections to the soak database (a pool: it outlives server restarts). */
  pool: Pool;
  journal: Journal;
  config: string;
  runners: SoakRunner[];
  /** SIGKILLs whatever is left, closes the proxy and the pool, removes the server. */
  destroy(): Promise<void>;
}

export interface FleetOptions {
  seed: number;
  runners: number;
  /** The skewed runner's offset, in seconds ("+1.5", "-1.5"). */
  skew: string;
}

export async function startSoakFleet(o: FleetOptions): Promise<SoakFleet> {
  const server = await startPrivateServer();
  const admin = await mysql.createConnection({ uri: server.url });
  await admin.query('CREATE DATABASE ??', [DATABASE]);
  await admin.end();
  const url = `${server.url}/${DATABASE}`;
  // `timezone: 'Z'`: baton writes DATETIMEs in UTC, read them as such.
  const pool = mysql.createPool({ uri: url, timezone: 'Z', connectionLimit: 4 });
  const proxy = await startTcpProxy({ host: '127.0.0.1', port: server.port });
  const { config, journal } = writeJournaledSchedule((j) => scheduleYaml(j, o.seed));

  const runners: SoakRunner[] = [];
  for (let i = 0; i < o.runners; i++) {
    // r1 skewed, r2 behind the proxy, the rest direct.
    const via = i === 0 ? 'skewed' : i === 1 ? 'proxy' : 'direct';
    const host = `r${i + 1}`;
    const databaseUrl = via === 'proxy' ? proxy.url(DATABASE) : url;
    const skewMs = via === 'skewed' ? Number(o.skew) * 1000 : 0;
    const start = () =>
      startRunner({
        config,
        databaseUrl,
        host,
        args: RUNNER_ARGS,
        ...(via === 'skewed' ? { clockOffset: o.skew } : {}),
      });
    runners.push(new SoakRunner(host, start, skewMs, via));
  }
  // Ctrl-C or a kill of the soak: its runners must not live on (some may be SIGSTOPped), and
  // the private server goes with its janitor.
  const abandon = (signal: NodeJS.Signals) => {
    for (const r of runners) {
      for (const p of r.incarnations) {
        p.child.kill('SIGCONT');
        p.child.kill('SIGKILL');
      }
    }
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', abandon);
  process.once('SIGTERM', abandon);

  for (const r of runners) r.launch();
  await Promise.all(runners.map((r) => r.current.ready()));

  return {
    seed: o.seed,
    server,
    proxy,
    pool,
    journal,
    config,
    runners,
    async destroy() {
      process.off('SIGINT', abandon);
      process.off('SIGTERM', abandon);
      await Promise.all(runners.map((r) => r.stop('SIGKILL')));
      await proxy.close();
      await pool.end().catch(() => undefined);
      await server.destroy();
    },
  };
}

/** A query on the harness's pool; rows. */
export async function query<T>(pool: Pool, sql: string, params: unknown[] = []): Promise<T[]> {
  const [rows] = await pool.query<RowDataPacket[]>(sql, params);
  return rows as T[];
}
