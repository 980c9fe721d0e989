/** Builds a scenario's `ctx` (documented in index.ts) and cleans up after it. */
import type { RowDataPacket } from 'mysql2/promise';
import {
  countStatements,
  createDatabase,
  type BenchDatabase,
  type BenchServer,
} from './database.js';
import { measureFloors, type Floors } from './floors.js';
import { target, type BenchContext } from './index.js';
import { readProc, sampleProcess, type ProcSampler } from './proc.js';
import {
  removeTempDirs,
  spawnRunner,
  writeSchedule,
  type BenchRunner,
  type StartRunnersOptions,
} from './runners.js';
import { percentiles } from './stats.js';
import { FatalWait, sleep, waitFor } from './wait.js';

let floorsOnce: Promise<Floors> | undefined;

export interface ScenarioContext {
  ctx: BenchContext;
  cleanup(): Promise<void>;
}

export async function createContext(
  name: string,
  quick: boolean,
  server: BenchServer,
  pressure: 'io' | null = null,
): Promise<ScenarioContext> {
  const databases: BenchDatabase[] = [];
  const runners: BenchRunner[] = [];
  const samplers: ProcSampler[] = [];
  const cleanups: Array<() => unknown> = [];
  const db = await createDatabase(server.url, name);
  databases.push(db);
  const log = (...args: unknown[]) => {
    const t = new Date().toISOString().slice(11, 23);
    console.error(`[${t} ${name}]`, ...args);
  };

  const ctx: BenchContext = {
    name,
    quick,
    pressure,
    log,
    db,
    server,
    async createDatabase(label) {
      const extra = await createDatabase(server.url, `${name}_${label}`);
      databases.push(extra);
      return extra;
    },
    writeSchedule,
    async startRunners(n, options) {
      const o: StartRunnersOptions = { databaseUrl: db.url, ...options };
      const prefix = o.hostPrefix ?? 'bench';
      const started = Array.from({ length: n }, (_, i) => spawnRunner(`${prefix}-${i + 1}`, o));
      runners.push(...started);
      const level = o.logLevel ?? 'info';
      const logsReady = ['trace', 'debug', 'info'].includes(level) && o.keepLines !== false;
      const timeoutMs = o.readyTimeoutMs ?? 60_000;
      // Ready = registered: the 'runner started' line, or (quieter log levels) its registry row.
      // (any of the scenario's databases: ctx.createDatabase's too)
      const targetDb = databases.find((d) => d.url === o.databaseUrl) ?? null;
      await Promise.all(
        started.map((r) =>
          logsReady || !targetDb
            ? r.waitForLog('runner started', () => true, timeoutMs)
            : waitFor(
                `${r.host} registered`,
                async () => {
                  if (!r.running)
                    throw new FatalWait(`${r.host} exited with ${r.child.exitCode}: ${r.stderr}`);
                  const rows = await targetDb
                    .query(
                      'SELECT 1 FROM baton_runners WHERE host = ? AND pid = ? AND stopped_at IS NULL',
                      [r.host, r.pid],
                    )
                    .catch(() => []);
                  return rows.length > 0;
                },
                { timeoutMs, intervalMs: 200 },
              ),
        ),
      );
      return started;
    },
    waitFor,
    sleep,
    async waitForRows<T>(sql: string, params: unknown[], count: number, timeoutMs = 60_000) {
      let rows: T[] = [];
      await waitFor(
        `${count} rows of ${sql}`,
        async () => {
          rows = await db.query<T>(sql, params);
          const first = rows[0] as (RowDataPacket & { n?: unknown }) | undefined;
          const n = rows.length === 1 && first?.n != null ? Number(first.n) : rows.length;
          return n >= count;
        },
        { timeoutMs, intervalMs: 200 },
      );
      return rows;
    },
    statements: () =>
      countStatements(
        server.url,
        databases.map((d) => d.name),
        server.generalLog,
      ),
    sampleProcess(pid, intervalMs) {
      const s = sampleProcess(pid, intervalMs);
      samplers.push(s);
      return s;
    },
    readProc,
    floors() {
      floorsOnce ??= measureFloors(db.url).catch((err: unknown) => {
        floorsOnce = undefined;
        throw err;
      });
      return floorsOnce;
    },
    percentiles,
    target,
    onCleanup(fn) {
      cleanups.push(fn);
    },
  };

  return {
    ctx,
    async cleanup() {
      for (const s of samplers) s.stop();
      for (const fn of cleanups.reverse()) {
        try {
          await fn();
        } catch (err) {
          log('cleanup failed:', err);
        }
      }
      await Promise.all(runners.map((r) => r.stop('SIGTERM', 15_000)));
      for (const d of databases) await d.drop();
      removeTempDirs();
    },
  };
}
