/**
 * Library mode's `baton run <job>` requests (baton_run_requests) keep no parameter longer than
 * needed and no secret at all, and an interrupted CLI leaves no request behind (issue 34):
 *
 * - the take clears the request's `--env` in the statement that takes it;
 * - a value for one of the job's `secretEnv` variables is refused (exit 64) before anything is
 *   written: the replicas publish the names, and the table is no place for a secret;
 * - Ctrl-C (a real SIGINT to a real CLI) while no replica has taken the request yet cancels it,
 *   exit 130, and no replica runs it afterwards.
 *
 * The replica is test/fixtures/request-replica.mjs, a real process; SIGSTOP holds it (alive in
 * the registry, taking nothing) while the CLI waits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, BATON_BIN, ROOT, RunnerProcess } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

const REPLICA = path.join(ROOT, 'test/fixtures/request-replica.mjs');
const TOKEN = `deploy-token-${Math.random().toString(36).slice(2)}`;

let db: TestDatabase;
let replica: RunnerProcess;

/** The CLI where there is no schedules file: `deploy` is known only to the replica. */
const runArgs = (...extra: string[]) => [
  BATON_BIN,
  'run',
  'deploy',
  ...extra,
  '--database-url',
  db.url,
  '--namespace',
  'requests',
];
const cli = (...extra: string[]) =>
  baton(runArgs(...extra).slice(1), { timeoutMs: 60_000, cwd: os.tmpdir() });

interface RequestRow {
  id: number;
  taken_by: string | null;
  outcome: string | null;
  env: string | null;
  run_id: number | null;
}
const requests = () => db.query<RequestRow>('SELECT * FROM baton_run_requests ORDER BY id');
const deploys = () =>
  db
    .query<{ run_id: number; params: string }>('SELECT * FROM deploys ORDER BY run_id')
    .catch(() => []);

/** As the helpers' processes get it: no BATON_* of the developer's shell. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BATON_')) env[k] = v;
  return { ...env, ...extra };
}

beforeAll(async () => {
  db = await createTestDatabase('run_requests');
  const env = childEnv({ DATABASE_URL: db.url, BATON_HOST: 'replica-1', BATON_LOG_LEVEL: 'debug' });
  replica = new RunnerProcess('replica-1', spawn(process.execPath, [REPLICA], { cwd: ROOT, env }));
  await replica.ready();
});
afterAll(async () => {
  replica.child.kill('SIGCONT');
  await replica.stop('SIGKILL');
  await db?.drop();
});

describe('baton run against library-mode replicas', () => {
  it("clears the request's --env in the statement that takes it", async () => {
    const run = await cli('--env', 'PLAIN=visible-value');
    expect(run.code, run.stderr).toBe(0);
    // The value reached the handler …
    expect((await deploys()).map((d) => JSON.parse(d.params) as unknown)).toEqual([
      { PLAIN: 'visible-value' },
    ]);
    // … and is not kept with the request.
    const [request] = await requests();
    expect(request).toMatchObject({ taken_by: 'replica-1', outcome: 'started', env: null });
  });

  it('refuses a value for a secretEnv variable before writing anything', async () => {
    const before = (await requests()).length;
    const run = await cli('--env', `DEPLOY_TOKEN=${TOKEN}`, '--env', 'PLAIN=x');
    expect(run.code, run.stderr).toBe(64);
    expect(run.stderr).toContain('--env DEPLOY_TOKEN: the job keeps it secret (secretEnv)');
    expect(run.stdout + run.stderr).not.toContain(TOKEN);
    expect(await requests()).toHaveLength(before);
    const everything = JSON.stringify([
      await requests(),
      await db.query('SELECT * FROM baton_audit'),
      await db.query('SELECT * FROM baton_runs'),
    ]);
    expect(everything).not.toContain(TOKEN);
    expect(await deploys()).toHaveLength(1);
  });

  it('Ctrl-C before a replica took the request cancels it: exit 130, and no replica runs it', async () => {
    // Held: alive in the registry (a fresh heartbeat, its sessions open), taking nothing.
    replica.child.kill('SIGSTOP');
    let asked: ChildProcess | undefined;
    try {
      asked = spawn(process.execPath, runArgs('--env', 'PLAIN=interrupted'), {
        cwd: os.tmpdir(),
        env: childEnv(),
      });
      let stderr = '';
      asked.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) =>
        asked!.on('exit', (code) => resolve(code)),
      );
      const id = await waitFor('the request written', () => /\(request (\d+)\)/.exec(stderr)?.[1]);
      asked.kill('SIGINT');
      expect(await exited, stderr).toBe(130);
      expect(stderr).toContain('deploy not run: interrupted by SIGINT');
      const [row] = await db.query<RequestRow>('SELECT * FROM baton_run_requests WHERE id = ?', [
        Number(id),
      ]);
      expect(row).toMatchObject({
        taken_by: '',
        outcome: 'cancelled: interrupted by SIGINT',
        env: null,
        run_id: null,
      });
    } finally {
      asked?.kill('SIGKILL');
      replica.child.kill('SIGCONT');
    }
    // The replica looks again (it takes and runs a later request, which is newer than the
    // cancelled one: it lists them oldest first) and leaves the cancelled one alone.
    const later = await cli('--env', 'PLAIN=later');
    expect(later.code, later.stderr).toBe(0);
    expect((await deploys()).map((d) => JSON.parse(d.params) as unknown)).toEqual([
      { PLAIN: 'visible-value' },
      { PLAIN: 'later' },
    ]);
    expect((await requests()).map((r) => [r.taken_by, r.outcome])).toEqual([
      ['replica-1', 'started'],
      ['', 'cancelled: interrupted by SIGINT'],
      ['replica-1', 'started'],
    ]);
  });
});
