/**
 * `baton run JOB --on-host H` and a placed job's `baton run` (issue 38), against two real runners:
 * `a` without tags (serving the write API), `b` with `--tag sftp`. `settle` has `runOn: {tags:
 * [sftp]}`, `plain` none. Where a job ran is judged by the job's own journal (its host and pid,
 * test/helpers/ground-truth.ts), never by baton's word alone:
 *
 * - `--on-host b` runs `plain` on b, every time (a, which may run it too, never takes a request
 *   addressed to b);
 * - `--on-host a` for `settle` is refused (64, "a may not run settle: needs tag sftp"), as are
 *   an unknown host and an empty one; nothing is written (no request, no run, no audit row, no
 *   journal entry);
 * - an option-looking value (`--on-host '--database-url=mysql://…'`, both spellings) is a host
 *   name, refused as unknown: the CLI's database comes from BATON_DATABASE_URL here, so a value
 *   taken as an option would steer it to the listener below, which must see no connection;
 * - `baton run settle` without a host runs on b, not in the CLI (whose host id is `operator`);
 *   the write API of a (which may not run it) asks b too, and `onHost: "a"` is 409;
 * - `baton backfill settle` (which runs the fires in the CLI's own process) is refused (64),
 *   writing nothing; `baton run prep --with-dependents` runs `prep` in the CLI and leaves its
 *   child `upload` (placed on sftp) to b, which runs it: the CLI waits for it and says so;
 * - with b stopped, `baton run settle` is refused with 69, saying where it may run.
 */
import net from 'node:net';
import { writeFileSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, type CliResult, type RunnerProcess } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { writeJournaledSchedule, type Journal } from '../helpers/ground-truth.js';
import { freePort } from '../helpers/private-server.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('run_on_host');
const TOKEN = 'ops-token-0123456789abcdef012';

let config: string;
let journal: Journal;
let a: RunnerProcess;
let b: RunnerProcess;
let port: number;
/** A server where an option-looking host would steer the CLI: it must never be connected to. */
let decoy: net.Server;
let decoyConnections = 0;
let decoyUrl: string;

beforeAll(async () => {
  ({ config, journal } = writeJournaledSchedule(
    (j) => `
namespace: placed
jobs:
  settle:
    schedule: "0 0 1 1 *"
    runOn: {tags: [sftp]}
    command: ${j.yaml()}
  plain:
    schedule: "0 0 1 1 *"
    command: ${j.yaml()}
  prep:
    schedule: "0 0 1 1 *"
    command: ${j.yaml()}
  upload:
    after: {jobs: prep}
    runOn: {tags: [sftp]}
    command: ${j.yaml()}
`,
  ));
  decoy = net.createServer((socket) => {
    decoyConnections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => decoy.listen(0, '127.0.0.1', resolve));
  decoyUrl = `mysql://x@127.0.0.1:${(decoy.address() as net.AddressInfo).port}/y`;
  const tokens = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-tokens-')), 'write-tokens');
  writeFileSync(tokens, `ops:${TOKEN}\n`, { mode: 0o600 });
  port = await freePort();
  a = (
    await fleet.start(['a'], {
      config,
      args: ['--http', `127.0.0.1:${port}`, '--http-write-tokens-file', tokens],
    })
  )[0]!;
  b = (await fleet.start(['b'], { config, args: ['--tag', 'sftp'] }))[0]!;
});
afterAll(async () => {
  await new Promise((resolve) => decoy?.close(resolve));
});

/** `baton run …` as an operator's shell has it: the database from the environment, not a flag. */
function run(...args: string[]): Promise<CliResult> {
  return baton(['run', ...args, '--config', config], {
    env: { BATON_DATABASE_URL: fleet.db.url, BATON_HOST: 'operator' },
    timeoutMs: 45_000,
  });
}

/** What an action leaves: request rows, run rows, audit rows, journal entries. */
async function written() {
  const count = async (table: string) =>
    (await fleet.db.query<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))[0]!.n;
  return {
    requests: Number(await count('baton_run_requests')),
    runs: Number(await count('baton_runs')),
    audit: Number(await count('baton_audit')),
    journal: journal.entries().length,
  };
}

/** The runner that ran each attempt of `job`, by the job's own journal. */
const hostsOf = (job: string) => journal.attempts(job).map((x) => x.host);

async function post(body: Record<string, unknown>) {
  const res = await fetch(`http://127.0.0.1:${port}/api/jobs/settle/run`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('baton run --on-host', () => {
  it('runs the job on the runner named, and only there', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await run('plain', '--on-host', 'b');
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain('plain started on b');
    }
    expect(hostsOf('plain')).toEqual(['b', 'b', 'b']);
    const requests = await fleet.db.query<{ target_host: string; taken_by: string }>(
      'SELECT target_host, taken_by FROM baton_run_requests ORDER BY id',
    );
    expect(requests).toEqual(Array(3).fill({ target_host: 'b', taken_by: 'b' }));
    const audit = await fleet.db.query<{ host: string; details: string }>(
      "SELECT host, details FROM baton_audit WHERE job = 'plain'",
    );
    expect(audit.map((x) => [x.host, JSON.parse(x.details) as unknown])).toEqual(
      Array(3).fill(['operator', { via: 'run-request', onHost: 'b' }]),
    );
  });

  it('refuses a runner that may not run the job, an unknown one and an empty one, writing nothing', async () => {
    const before = await written();
    const ineligible = await run('settle', '--on-host', 'a');
    expect(ineligible.code, ineligible.stderr).toBe(64);
    expect(ineligible.stderr).toContain('a may not run settle: needs tag sftp');
    expect(ineligible.stderr).toContain('live runners that may: b');
    const unknown = await run('settle', '--on-host', 'nosuch');
    expect(unknown.code, unknown.stderr).toBe(64);
    expect(unknown.stderr).toContain('no runner "nosuch" in namespace placed');
    const empty = await run('settle', '--on-host', '');
    expect(empty.code, empty.stderr).toBe(64);
    expect(empty.stderr).toContain('--on-host needs the host id of a live runner');
    const noJob = await run('nosuchjob', '--on-host', 'b');
    expect(noJob.code, noJob.stderr).toBe(64);
    expect(noJob.stderr).toContain('b has no job nosuchjob');
    for (const r of [ineligible, unknown, empty, noJob]) expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(await written()).toEqual(before);
  });

  it('takes an option-looking value as a host name: refused as unknown, never connecting elsewhere', async () => {
    const before = await written();
    const evil = `--database-url=${decoyUrl}`;
    for (const args of [
      ['settle', '--on-host', evil],
      ['settle', `--on-host=${evil}`],
    ]) {
      const r = await run(...args);
      expect(r.code, r.stderr).toBe(64);
      expect(r.stderr).toContain(`no runner ${JSON.stringify(evil)} in namespace placed`);
    }
    expect(decoyConnections).toBe(0);
    expect(await written()).toEqual(before);
  });
});

describe('a placed job asked for without a host', () => {
  it('runs on a runner that may run it, not in the CLI', async () => {
    const r = await run('settle');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('settle runs only on runners that match its runOn (needs tag sftp)');
    expect(hostsOf('settle')).toEqual(['b']);
  });

  it('the write API of a runner that may not run it asks one that may; onHost naming it is 409', async () => {
    const asked = await post({ reason: 'by hand' });
    expect(asked.status, JSON.stringify(asked.body)).toBe(202);
    expect(asked.body).toMatchObject({ job: 'settle', host: 'b' });
    const refused = await post({ onHost: 'a' });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      error: { code: 'ineligible', message: expect.stringContaining('a may not run settle') },
    });
    const unknown = await post({ onHost: 'nosuch' });
    expect(unknown.status).toBe(404);
    // The run asked of b over HTTP, by its journal: 202 comes once it started, its journal
    // entry a moment later.
    await waitFor('the second settle journaled', () => journal.attempts('settle').length === 2);
    expect(hostsOf('settle')).toEqual(['b', 'b']);
  });

  it('a backfill, which would run the fires in the CLI, is refused (64), writing nothing', async () => {
    const before = await written();
    const r = await baton(
      [
        'backfill',
        'settle',
        '--from',
        '2026-01-01T00:00:00Z',
        '--to',
        '2026-01-01T00:00:00Z',
        '--config',
        config,
      ],
      { env: { BATON_DATABASE_URL: fleet.db.url, BATON_HOST: 'operator' } },
    );
    expect(r.code, r.stderr).toBe(64);
    expect(r.stderr).toContain('settle may not run on operator (needs tag sftp)');
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(await written()).toEqual(before);
  });

  it('--with-dependents leaves a child placed elsewhere to a runner that may run it', async () => {
    const r = await run('prep', '--with-dependents');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/upload done \(run \d+/);
    expect(hostsOf('prep')).toEqual(['operator']);
    expect(hostsOf('upload')).toEqual(['b']);
  });

  it('with no runner alive that may run it, is refused (69) saying where it may run', async () => {
    expect(await b.stop('SIGTERM')).toBe(0);
    const before = await written();
    const r = await run('settle');
    expect(r.code, r.stderr).toBe(69);
    expect(r.stderr).toContain('no live runner of namespace placed may run it (needs tag sftp');
    expect(await written()).toEqual(before);
    expect(hostsOf('settle')).toEqual(['b', 'b']);
    expect(a.errors()).toEqual([]);
  });
});
