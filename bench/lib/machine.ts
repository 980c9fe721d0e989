/** The machine a run happened on, as recorded in the results file. */
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
  };
}
