/**
 * `baton status` as the tests of both tiers read it: the command run in the test process
 * (cli-in-process.ts; its output and exit code are what is judged), its JSON report, and the
 * lookups the tests make in it.
 */
import { expect } from 'vitest';
import { baton } from './cli-in-process.js';
import type { TestDatabase } from './db.js';

export interface StatusJson {
  namespace: string;
  namespaceSource: { kind: string; file?: string };
  now: string;
  state: string;
  exitCode: number;
  healthy: boolean;
  runners: {
    host: string;
    pid: number;
    version: string;
    state: string;
    alive: boolean;
    clockOffsetMs: number | null;
    startedAt: string;
    lastSeenAt: string;
    stoppedAt: string | null;
  }[];
  running: {
    runId: number;
    job: string;
    host: string;
    scheduledAt: string;
    startedAt: string;
    runningForMs: number;
  }[];
  jobs: {
    name: string;
    inConfig: boolean;
    nextFire: string | null;
    paused: boolean;
    lastSuccessAt: string | null;
    failuresSinceSuccess: number;
    lastFailure: { status: string; scheduledAt: string } | null;
    loadedBy: string[];
  }[];
  warnings: { kind: string; severity: string; message: string; job?: string; hosts?: string[] }[];
}

export async function status(db: TestDatabase, args: string[], cwd?: string) {
  const res = await baton(
    ['status', '--json', '--database-url', db.url, ...args],
    cwd ? { cwd } : {},
  );
  if (res.code == null || res.code > 2) throw new Error(`status exited ${res.code}: ${res.stderr}`);
  const json = JSON.parse(res.stdout) as StatusJson;
  // The JSON says the exit code it came with.
  expect(json.exitCode).toBe(res.code);
  return { code: res.code, json, stderr: res.stderr };
}

/** The human output, whose first line is the one a monitor shows. */
export async function statusText(db: TestDatabase, args: string[], cwd?: string) {
  const res = await baton(['status', '--database-url', db.url, ...args], cwd ? { cwd } : {});
  return { ...res, first: res.stdout.split('\n')[0]! };
}

export const job = (s: StatusJson, name: string) => s.jobs.find((j) => j.name === name);
export const runnerOf = (s: StatusJson, host: string) => s.runners.find((r) => r.host === host);
export const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
export const kinds = (s: StatusJson) =>
  s.warnings.map((w) => [w.kind, w.job ?? null, w.hosts ?? null]);
