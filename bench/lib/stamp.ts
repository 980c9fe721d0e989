/**
 * The job side of a lag measurement: a command that writes the instant its process began to run
 * (`<run id> <epoch seconds with ns>` appended to a file), and the host-vs-database clock offset
 * that turns that instant into database time.
 *
 * The stamp is a 10-line C program compiled with the system's `cc` (it reads CLOCK_REALTIME as
 * its first instruction: the instant is the process start plus the dynamic loader's ~0.3 ms),
 * or, without a C compiler, `bash -c` reading `$EPOCHREALTIME` (a builtin, no fork; bash's own
 * start-up of ~1 ms is then part of the figure). `stamp.kind` says which.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { BenchDatabase } from './database.js';
import { makeTempDir } from './runners.js';
import { percentiles, type Distribution } from './stats.js';

const cSource = (clock: string) => `#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
  struct timespec t;
  clock_gettime(${clock}, &t);
  const char *run = getenv("BATON_RUN_ID");
  FILE *f = fopen(argv[1], "a");
  if (!f) return 2;
  fprintf(f, "%s %lld.%09ld\\n", run ? run : "-", (long long)t.tv_sec, t.tv_nsec);
  return fclose(f) == 0 ? 0 : 3;
}
`;

export interface Stamp {
  kind: 'c' | 'bash';
  /** The job's argv: appends `<BATON_RUN_ID> <epoch s.ns>` to `file`. */
  argv(file: string): string[];
}

/**
 * Builds the stamp command in `dir` (a temp folder if omitted). `monotonic: true` stamps
 * CLOCK_MONOTONIC instead (one clock for every process of the machine, which libfaketime leaves
 * alone with FAKETIME_DONT_FAKE_MONOTONIC: a job of a runner whose wall clock is faked still
 * stamps real time); it needs the C compiler (no bash fallback) and throws without it.
 */
export function buildStamp(
  dir = makeTempDir('baton-bench-stamp-'),
  { monotonic = false } = {},
): Stamp {
  try {
    const src = path.join(dir, 'stamp.c');
    const bin = path.join(dir, 'stamp');
    writeFileSync(src, cSource(monotonic ? 'CLOCK_MONOTONIC' : 'CLOCK_REALTIME'));
    execFileSync('cc', ['-O2', '-o', bin, src], { stdio: 'ignore' });
    return { kind: 'c', argv: (file) => [bin, file] };
  } catch (err) {
    if (monotonic) {
      throw new Error(`the monotonic stamp needs a C compiler (cc): ${String(err)}`, {
        cause: err,
      });
    }
    return {
      kind: 'bash',
      argv: (file) => [
        'bash',
        '-c',
        'printf "%s %s\\n" "${BATON_RUN_ID:--}" "${EPOCHREALTIME/,/.}" >> "$0"',
        file,
      ],
    };
  }
}

/** A stamp file's lines in order, each a run id and its stamp (host epoch ms, fractional). */
export function stampLines(file: string): { run: number; at: number }[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const lines: { run: number; at: number }[] = [];
  for (const line of text.split('\n')) {
    const [run, at] = line.trim().split(' ');
    if (!run || !at || run === '-') continue;
    lines.push({ run: Number(run), at: Number(at) * 1000 });
  }
  return lines;
}

/** Reads a stamp file: run id → host epoch in ms (fractional); a run stamped twice, its last. */
export function readStamps(file: string): Map<number, number> {
  return new Map(stampLines(file).map(({ run, at }) => [run, at]));
}

/** This host's clock now, in epoch ms with sub-ms precision. */
export function hostNowMs(): number {
  return performance.timeOrigin + performance.now();
}

export interface ClockOffset {
  /** Database time − host time, ms (from the sample with the shortest round trip). */
  offsetMs: number;
  /** That sample's round trip: the offset's uncertainty is about half of it. */
  rttMs: number;
}

/**
 * The database's clock minus this host's, from `samples` `SELECT NOW(6)` round trips: the
 * server's instant is compared with the midpoint of the round trip.
 */
export async function clockOffset(db: BenchDatabase, samples = 30): Promise<ClockOffset> {
  let best: ClockOffset = { offsetMs: NaN, rttMs: Infinity };
  for (let i = 0; i < samples; i++) {
    const t0 = hostNowMs();
    const [row] = await db.query<{ now: string }>(
      "SELECT DATE_FORMAT(NOW(6), '%Y-%m-%dT%H:%i:%s.%fZ') AS now",
    );
    const t1 = hostNowMs();
    const iso = row!.now;
    // Date parses ms only; add the µs by hand.
    const micros = Number(iso.slice(20, 26));
    const dbMs = Date.parse(`${iso.slice(0, 19)}Z`) + micros / 1000;
    const rtt = t1 - t0;
    if (rtt < best.rttMs) best = { offsetMs: dbMs - (t0 + t1) / 2, rttMs: rtt };
  }
  return best;
}

/**
 * The stamp's own cost: spawn it from here `n` times and take (its stamp − the instant just
 * before spawn()). That is the floor "process spawn until the command's first instruction".
 */
export async function stampSpawnFloor(stamp: Stamp, n = 40): Promise<Distribution> {
  const dir = makeTempDir('baton-bench-stampfloor-');
  const file = path.join(dir, 'stamps.txt');
  const before = new Map<number, number>();
  for (let i = 1; i <= n + 5; i++) {
    const argv = stamp.argv(file);
    const t = hostNowMs();
    await new Promise<void>((resolve, reject) => {
      const child = spawn(argv[0]!, argv.slice(1), {
        stdio: 'ignore',
        env: { ...process.env, BATON_RUN_ID: String(i) },
      });
      child.once('error', reject);
      child.once('exit', () => resolve());
    });
    if (i > 5) before.set(i, t);
  }
  const stamps = readStamps(file);
  const lags: number[] = [];
  for (const [i, t] of before) {
    const s = stamps.get(i);
    if (s != null) lags.push(s - t);
  }
  return percentiles(lags);
}
