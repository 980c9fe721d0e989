/** The machine a run happened on, as recorded in the results file. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import type { BenchServer } from './database.js';

export interface Machine {
  cpus: number;
  model: string;
  memGiB: number;
  node: string;
  mariadb: string;
  os: string;
  /** 1-minute load average when the run started: other work on the machine skews figures. */
  loadAvgAtStart: number;
  /** `private` (a mariadbd the harness started) or the server URL used. */
  server: string;
  serverSettings: Record<string, string>;
  /** The commit the run measured (`git rev-parse --short HEAD`), `+dirty` with local changes. */
  commit?: string;
}

/** The checked-out commit, with `+dirty` when src/ or bench/ differ from it; '' outside git. */
export function currentCommit(): string {
  try {
    const git = (...args: string[]) =>
      execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const head = git('rev-parse', '--short', 'HEAD');
    const dirty = git('status', '--porcelain', '--', 'src', 'bench/scenarios', 'bench/lib');
    return dirty ? `${head}+dirty` : head;
  } catch {
    return '';
  }
}

export function describeMachine(server: BenchServer): Machine {
  let distro = '';
  try {
    distro = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? '';
  } catch {
    // not Linux, or no os-release
  }
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    model: cpus[0]?.model.trim() ?? 'unknown',
    memGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    mariadb: server.version,
    os: `${distro ? `${distro}, ` : ''}${os.type()} ${os.release()} ${os.arch()}`,
    loadAvgAtStart: Math.round(os.loadavg()[0]! * 100) / 100,
    server: server.private ? 'private mariadbd started by the harness' : server.url,
    serverSettings: server.settings,
    commit: currentCommit(),
  };
}

/** `uptime`'s load averages now (1, 5, 15 minutes), as "1.20 / 0.80 / 0.40". */
export function loadAverages(): string {
  return os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');
}
