/**
 * Disk pressure for a scenario: a separate process that writes and fsyncs in a loop on the
 * filesystem of the database server's data dir, as a backup, a log shipper or a compaction on
 * the database host would. With `innodb_flush_log_at_trx_commit = 1` every commit flushes the
 * redo log, and on ext4 an fsync waits for the journal commit that the writer's own fsyncs keep
 * busy: the server's commits slow down, and with them every row baton writes (claims, verdicts).
 *
 * The writer appends `blockMiB` at a time to a file, fsyncs every `syncEveryMiB`, and starts the
 * file over (truncates it) every `fileMiB` — so each round allocates new blocks and the journal
 * has metadata to commit too, not only data. What hurts the server is the dirty data between the
 * writer's fsyncs: ext4 (data=ordered) writes a file's newly allocated blocks before the journal
 * commit that the server's redo-log fsync waits for. On the bench machine of 2026-12-02 (ext4 on
 * a virtio disk), autocommit INSERTs for 4 s: with no writer p50 / p99 0.3 / 1–5 ms (~10,000
 * commits); 1 MiB + fsync each 0.3 / 3.8 ms (7,200) — hardly a change; 1 MiB writes with an
 * fsync every 64 MiB 0.5 / 27 ms (2,200). disk-storm uses the latter. It runs on its own (a Node child, no shell), prints
 * one JSON line per second (blocks written, fsync times), and ends — removing its file — on
 * SIGTERM, when its stdin closes (the harness died), or when its parent is gone. The harness
 * also stops it and removes its folder in `stop()`, and kills it when the bench process exits.
 *
 * Where: beside the private server's data dir (`@@datadir`'s parent, a temp folder; checked to
 * be the same filesystem by device number). Against a server given by `--server-url`, whose data
 * dir may not be on this machine, the temp folder is used and a note says so.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BenchContext } from './index.js';
import { percentiles, round, type Distribution } from './stats.js';

export interface DiskPressureOptions {
  /** Size of one write (MiB). */
  blockMiB?: number;
  /** An fsync after this many MiB written. */
  syncEveryMiB?: number;
  /** The file is truncated and written again from the start after this many MiB. */
  fileMiB?: number;
}

export interface DiskPressureReport {
  /** Where the writer wrote. */
  dir: string;
  /** The writer's file is on the same filesystem as the server's data dir. */
  sameFilesystem: boolean | null;
  seconds: number;
  blocks: number;
  mibPerS: number;
  /** The writer's CPU, % of one core. */
  cpuPercent: number;
  /** One fsync, ms. */
  fsync: Distribution;
  notes: string[];
}

export interface DiskPressure {
  readonly pid: number;
  /** Stops the writer (SIGTERM, SIGKILL after 3 s), removes its folder; idempotent. */
  stop(): Promise<DiskPressureReport>;
}

/** The writer, run as `node -e`: argv = file, block bytes, bytes per fsync, file bytes. */
const WRITER = `
const fs = require('node:fs');
const [file, blockArg, syncArg, fileArg] = process.argv.slice(1);
const block = Buffer.alloc(Number(blockArg), 0x5a);
const syncEvery = Math.max(1, Math.round(Number(syncArg) / block.length));
const limit = Number(fileArg);
const parent = process.ppid;
let offset = 0, blocks = 0, stopping = false, fsyncs = [];
const end = () => {
  if (stopping) return;
  stopping = true;
  try { fs.rmSync(file, { force: true }); } catch {}
  process.exit(0);
};
process.on('SIGTERM', end);
process.on('SIGINT', end);
process.stdin.on('end', end);
process.stdin.on('error', end);
process.stdin.resume();
setInterval(() => {
  if (process.ppid !== parent) end();
  process.stdout.write(JSON.stringify({ blocks, fsyncs }) + '\\n');
  fsyncs = [];
}, 1000);
(async () => {
  const fh = await fs.promises.open(file, 'w');
  while (!stopping) {
    if (offset >= limit) { await fh.truncate(0); offset = 0; }
    await fh.write(block, 0, block.length, offset);
    offset += block.length;
    blocks++;
    if (blocks % syncEvery === 0) {
      const t = process.hrtime.bigint();
      await fh.sync();
      fsyncs.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  }
})().catch((err) => { if (!stopping) { console.error(String(err)); end(); } });
`;

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** The folder to write in: beside the server's data dir when it is on this machine. */
async function pressureDir(
  ctx: BenchContext,
): Promise<{ dir: string; sameFilesystem: boolean | null; note: string }> {
  let dataDir: string | null = null;
  if (ctx.server.private) {
    const [row] = await ctx.db.query<{ dir: string }>('SELECT @@datadir AS dir');
    dataDir = row?.dir ?? null;
  }
  if (dataDir && existsSync(dataDir)) {
    const parent = path.dirname(path.resolve(dataDir));
    const dir = mkdtempSync(path.join(parent, 'baton-bench-pressure-'));
    const same = statSync(dir).dev === statSync(dataDir).dev;
    return {
      dir,
      sameFilesystem: same,
      note: `beside the server's data dir ${dataDir}${same ? ' (same filesystem)' : ' (NOT the same filesystem!)'}`,
    };
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-bench-pressure-'));
  return {
    dir,
    sameFilesystem: null,
    note: `in ${os.tmpdir()}: the server's data dir is not on this machine (or not known), so the pressure may not reach it`,
  };
}

/** Starts the writer; `stop()` it in a finally (it is also killed if the bench process exits). */
export async function startDiskPressure(
  ctx: BenchContext,
  { blockMiB = 1, syncEveryMiB = 1, fileMiB = 256 }: DiskPressureOptions = {},
): Promise<DiskPressure> {
  const { dir, sameFilesystem, note } = await pressureDir(ctx);
  const file = path.join(dir, 'pressure.bin');
  const child = spawn(
    process.execPath,
    [
      '-e',
      WRITER,
      file,
      String(blockMiB * 2 ** 20),
      String(syncEveryMiB * 2 ** 20),
      String(fileMiB * 2 ** 20),
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  live.add(child);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // An interrupted bench exits without running the scenario's finally: kill the writer here
    // (its own checks — stdin closed, parent gone — would end it within a second anyway).
    process.once('exit', () => {
      for (const c of live) c.kill('SIGKILL');
    });
  }
  const started = performance.now();
  let blocks = 0;
  const fsyncs: number[] = [];
  let stderr = '';
  let buffered = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      try {
        const s = JSON.parse(line) as { blocks: number; fsyncs: number[] };
        blocks = s.blocks;
        fsyncs.push(...s.fsyncs);
      } catch {
        // not a stats line
      }
    }
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-2_000);
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      live.delete(child);
      resolve(code);
    });
  });
  const what = `${blockMiB} MiB writes, an fsync every ${syncEveryMiB} MiB`;
  ctx.log(`disk pressure: pid ${child.pid}, ${what} in a loop, ${note}`);
  // The writer's CPU: on a machine of 2 cores it competes with the runners as well as the disk.
  const cpu = ctx.sampleProcess(child.pid!, 500);

  let report: Promise<DiskPressureReport> | undefined;
  const stop = async (): Promise<DiskPressureReport> => {
    const seconds = (performance.now() - started) / 1000;
    const usage = cpu.stop();
    try {
      if (child.exitCode == null && child.signalCode == null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 3_000);
        await exited;
        clearTimeout(t);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const notes = [
      `Disk pressure writer ${note}: ${what}; it used ${round(usage.cpuPercent, 0)} % of one core.`,
    ];
    if (stderr.trim()) notes.push(`Disk pressure writer stderr: ${stderr.trim().slice(0, 400)}`);
    if (existsSync(dir)) notes.push(`Disk pressure folder ${dir} could not be removed.`);
    return {
      dir,
      sameFilesystem,
      seconds: round(seconds, 1),
      blocks,
      mibPerS: round((blocks * blockMiB) / seconds, 1),
      cpuPercent: round(usage.cpuPercent, 1),
      fsync: percentiles(fsyncs),
      notes,
    };
  };
  return {
    pid: child.pid!,
    stop: () => (report ??= stop()),
  };
}

/**
 * The cost of one commit now: `samples` autocommit INSERTs into a scratch table on ctx.db (as
 * the floors measure it; the harness's own statements, not counted as the runners').
 */
export async function measureCommits(ctx: BenchContext, samples = 200): Promise<Distribution> {
  const table = `bench_commit_${Math.random().toString(36).slice(2, 8)}`;
  await ctx.db.query(
    `CREATE TABLE ${table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`,
  );
  const ms: number[] = [];
  try {
    for (let i = 0; i < samples + 10; i++) {
      const t = process.hrtime.bigint();
      await ctx.db.query(`INSERT INTO ${table} (v) VALUES (?)`, [i]);
      if (i >= 10) ms.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
  } finally {
    await ctx.db.query(`DROP TABLE ${table}`);
  }
  return percentiles(ms);
}
