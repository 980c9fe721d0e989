/**
 * Scoped write tokens (issue 42) and the run route's parameters, against two real runners of two
 * namespaces sharing one database, with one tokens file:
 *
 * - `team-a` may only run `report*` in namespace alpha: it runs report-daily (202, the run
 *   happens), is refused settle and a pause of report-daily (403 naming what the scope lacks), and
 *   the audit has both refusals and the allowed run, each with the scope.
 * - A token scoped to alpha cannot act in beta (asked of beta's runner: 403; a beta run's id
 *   asked of alpha's runner: 404), whatever the body, the query or the path says; a job name is
 *   taken literally (`report*` is no glob, nor a path, nor an option); case matters.
 * - `env` and `args` reach the job (its journal), the job's `secretEnv` values masked in the row
 *   and the audit and never in any log; bad parameters are 400 naming the field, and nothing
 *   runs or is recorded.
 * - A past fire again over HTTP: run once, refused 409 `already-ran` without `again`, a new
 *   generation with it; the `rerun` action governs it (`run` alone is refused it).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort } from '../helpers/private-server.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('write_scopes');

const TEAM_A = 'team-a-token-0123456789abcdef';
const OPS = 'ops-token-0123456789abcdef012';
const RERUNNER = 'rerunner-token-0123456789abcdef';
const LITERAL = 'literal-token-0123456789abcdef';
const FILLER = 'filler-token-0123456789abcdef';
const LOADER = 'loader-token-0123456789abcdef';
const SECRET = 'hunter2-not-for-logs';

/** Yesterday's 03:00 UTC: a past fire of `0 3 * * *`. */
const FIRE = new Date(
  Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000 + 3 * 3_600_000,
).toISOString();

let dir: string;
let runners: RunnerProcess[];
let ports: { alpha: number; beta: number };

const journal = (name: string) => path.join(dir, name);
const lines = (name: string): string[] => {
  try {
    return readFileSync(journal(name), 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
};

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'baton-scopes-'));
  const job = (file: string) => `
    command: ["sh", "-c", "echo \\"$MODE|$TOKEN|$*\\" >> ${journal(file)}", "sh"]
    secretEnv: [TOKEN]`;
  const alpha = writeSchedule(`
namespace: alpha
jobs:
  report-daily:
    schedule: "0 0 1 1 *"${job('alpha.txt')}
  settle:
    schedule: "0 0 1 1 *"${job('settle.txt')}
  nightly:
    schedule: "0 3 * * *"
    command: ["sh", "-c", "echo \\"$BATON_SCHEDULED_AT\\" >> ${journal('nightly.txt')}"]
  script:
    schedule: "0 0 1 1 *"
    shell: true
    command: "true"
  ledger:
    after: {jobs: [report-daily], on: always}
    command: ["sh", "-c", "echo ran >> ${journal('ledger.txt')}"]
`);
  const beta = writeSchedule(`
namespace: beta
jobs:
  report-daily:
    schedule: "0 0 1 1 *"${job('beta.txt')}
  slow:
    schedule: "0 0 1 1 *"
    command: ["sleep", "30"]
`);
  const tokens = path.join(dir, 'write-tokens');
  writeFileSync(
    tokens,
    [
      '# scoped tokens: issue 42',
      `team-a:${TEAM_A} jobs=report* actions=run namespaces=alpha  # team A's reports`,
      `ops:${OPS}`,
      `rerunner:${RERUNNER} jobs=nightly actions=re-run`,
      `literal:${LITERAL} jobs=report-daily actions=run,pause`,
      `filler:${FILLER} jobs=report* actions=backfill namespaces=alpha`,
      `loader:${LOADER}`,
    ].join('\n'),
    { mode: 0o600 },
  );
  ports = { alpha: await freePort(), beta: await freePort() };
  runners = await Promise.all(
    (['alpha', 'beta'] as const).map((ns) =>
      fleet
        .start([`${ns}-1`], {
          config: ns === 'alpha' ? alpha : beta,
          args: ['--http', `127.0.0.1:${ports[ns]}`, '--http-write-tokens-file', tokens],
        })
        .then(([r]) => r!),
    ),
  );
});

interface Answer {
  status: number;
  body: { error?: { code: string; message: string; missing?: string }; [key: string]: unknown };
}

/** A POST with the path sent as written (no client-side URL normalising). */
function post(
  rawPath: string,
  token: string,
  body: unknown = {},
  port: number = ports.alpha,
): Promise<Answer> {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: rawPath,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${token}`,
          'content-length': Buffer.byteLength(payload),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode!, body: JSON.parse(text) as Answer['body'] });
          } catch (err) {
            reject(err instanceof Error ? err : new Error(String(err)));
          }
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

interface AuditRow {
  id: number;
  namespace: string;
  action: string;
  job: string | null;
  run_id: number | null;
  operator: string;
  via: string;
  outcome: string | null;
  details: string | null;
}

/** The operator's audit rows, once none still waits for its run's verdict. */
async function audit(operator: string): Promise<AuditRow[]> {
  let rows: AuditRow[] = [];
  await waitFor(`${operator}'s audit outcomes`, async () => {
    rows = await fleet.db.query<AuditRow>(
      'SELECT * FROM baton_audit WHERE operator = ? ORDER BY id',
      [operator],
    );
    return rows.every((r) => r.outcome != null && !r.outcome.startsWith('started'));
  });
  return rows;
}

const count = async (sql: string, params: unknown[] = []) =>
  Number((await fleet.db.query<{ n: number }>(sql, params))[0]!.n);

async function finished(runId: number): Promise<{ status: string; params: string | null }> {
  let row: { status: string; params: string | null } | undefined;
  await waitFor(`run ${runId} to finish`, async () => {
    [row] = await fleet.db.query<{ status: string; params: string | null }>(
      'SELECT status, params FROM baton_runs WHERE id = ?',
      [runId],
    );
    return row != null && row.status !== 'running';
  });
  return row!;
}

const TEAM_A_SCOPE = { jobs: ['report*'], actions: ['run'], namespaces: ['alpha'] };

describe('scoped write tokens', () => {
  it('team-a runs report-daily, is refused settle and a pause (403); the audit shows all three with the scope', async () => {
    const ran = await post('/api/jobs/report-daily/run', TEAM_A, { reason: 'month end' });
    expect(ran.status, JSON.stringify(ran.body)).toBe(202);
    const runId = ran.body.runId as number;
    expect((await finished(runId)).status).toBe('done');
    expect(lines('alpha.txt')).toHaveLength(1);

    const settle = await post('/api/jobs/settle/run', TEAM_A);
    expect(settle.status).toBe(403);
    expect(settle.body.error).toEqual({
      code: 'out-of-scope',
      message: 'token "team-a" may not run "settle" (its jobs: report*)',
      missing: 'job',
    });
    const pause = await post('/api/jobs/report-daily/pause', TEAM_A, { reason: 'try' });
    expect(pause.status).toBe(403);
    expect(pause.body.error?.message).toBe('token "team-a" may not pause (its actions: run)');

    // Nothing of either happened.
    expect(lines('settle.txt')).toEqual([]);
    expect(await count("SELECT COUNT(*) AS n FROM baton_runs WHERE job = 'settle'")).toBe(0);
    expect(await count('SELECT COUNT(*) AS n FROM baton_pauses')).toBe(0);

    const rows = await audit('team-a');
    expect(rows.map((r) => [r.namespace, r.action, r.job, r.via])).toEqual([
      ['alpha', 'run', 'report-daily', 'api'],
      ['alpha', 'run', 'settle', 'api'],
      ['alpha', 'pause', 'report-daily', 'api'],
    ]);
    expect(rows[0]).toMatchObject({ run_id: runId, outcome: 'done' });
    expect(JSON.parse(rows[0]!.details!)).toEqual({ scope: TEAM_A_SCOPE });
    expect(rows[1]!.outcome).toBe(
      'refused: token "team-a" may not run "settle" (its jobs: report*)',
    );
    expect(JSON.parse(rows[1]!.details!)).toEqual({ scope: TEAM_A_SCOPE, refused: 'job' });
    expect(rows[2]!.outcome).toBe('refused: token "team-a" may not pause (its actions: run)');
    expect(JSON.parse(rows[2]!.details!)).toEqual({ scope: TEAM_A_SCOPE, refused: 'action' });
  });

  it('a token of namespace alpha cannot act in beta: not by beta runner, body, query or path', async () => {
    const before = await count('SELECT COUNT(*) AS n FROM baton_runs');
    const other = await post('/api/jobs/report-daily/run', TEAM_A, {}, ports.beta);
    expect(other.status).toBe(403);
    expect(other.body.error?.message).toBe(
      'token "team-a" may not act in namespace "beta" (its namespaces: alpha)',
    );
    // The namespace is the runner's: none given elsewhere is taken.
    expect(
      (await post('/api/jobs/report-daily/run?namespace=alpha', TEAM_A, {}, ports.beta)).status,
    ).toBe(403);
    const inBody = await post(
      '/api/jobs/report-daily/run',
      TEAM_A,
      { namespace: 'alpha' },
      ports.beta,
    );
    expect(inBody.status).toBe(400);
    expect(inBody.body.error?.message).toContain('namespace');
    expect(lines('beta.txt')).toEqual([]);

    // A beta run, started by an unscoped token on beta's runner.
    const slow = await post('/api/jobs/slow/run', OPS, {}, ports.beta);
    expect(slow.status).toBe(202);
    const runId = slow.body.runId as number;
    // Asked of beta's runner: out of the scope's namespaces. Of alpha's: no such run in alpha.
    const kill = await post(`/api/runs/${runId}/kill`, TEAM_A, { grace: '1s' }, ports.beta);
    expect(kill.status).toBe(403);
    expect(kill.body.error?.missing).toBe('namespace');
    expect((await post(`/api/runs/${runId}/kill`, TEAM_A, { grace: '1s' })).status).toBe(404);
    const [row] = await fleet.db.query<{ status: string; kill_requested_at: Date | null }>(
      'SELECT status, kill_requested_at FROM baton_runs WHERE id = ?',
      [runId],
    );
    expect(row).toEqual({ status: 'running', kill_requested_at: null });
    // Only the beta run of ops was added.
    expect(await count('SELECT COUNT(*) AS n FROM baton_runs')).toBe(before + 1);
    const refusals = (await audit('team-a')).filter((r) => r.namespace === 'beta');
    expect(refusals.map((r) => [r.action, r.job, r.run_id])).toEqual([
      ['run', 'report-daily', null],
      ['run', 'report-daily', null],
      ['kill', 'slow', runId],
    ]);
    for (const r of refusals) expect(r.outcome).toMatch(/^refused: .*namespace "beta"/);
    expect((await post(`/api/runs/${runId}/kill`, OPS, { grace: '1s' }, ports.beta)).status).toBe(
      200,
    );
  });

  it('takes a job name literally: no glob, path, option or other case gets past the scope', async () => {
    const runs = await count('SELECT COUNT(*) AS n FROM baton_runs');
    const audits = await count('SELECT COUNT(*) AS n FROM baton_audit');
    // Names no job can have: 404, nothing read or written.
    for (const p of [
      '/api/jobs/report*/run',
      '/api/jobs/report%2A/pause',
      '/api/jobs/report%2F..%2Fsettle/run',
      '/api/jobs/--all/run',
      '/api/jobs/report-daily%00/run',
      '/api/jobs/r%C3%A9port/run',
    ]) {
      const answer = await post(p, LITERAL);
      expect(answer.status, p).toBe(404);
    }
    expect(await count('SELECT COUNT(*) AS n FROM baton_audit')).toBe(audits);
    // Dot segments are resolved before routing: the job asked for is settle, out of scope.
    for (const p of [
      '/api/jobs/report-daily/../settle/run',
      '/api/jobs/report-daily/%2e%2e/settle/run',
    ]) {
      const answer = await post(p, LITERAL);
      expect(answer.status, p).toBe(403);
      expect(answer.body.error?.message).toContain('"settle"');
    }
    // Case matters: REPORT-DAILY is not report-daily, and not in a scope of report*.
    expect((await post('/api/jobs/REPORT-DAILY/run', TEAM_A)).status).toBe(403);
    expect((await post('/api/jobs/Report-daily/pause', LITERAL)).status).toBe(403);
    expect(await count('SELECT COUNT(*) AS n FROM baton_runs')).toBe(runs);
    expect(await count('SELECT COUNT(*) AS n FROM baton_pauses')).toBe(0);
    // A scope's job that does not exist in the file is still 404 for it.
    expect((await post('/api/jobs/report-weekly/run', TEAM_A)).status).toBe(404);
  });
});

describe('a scope and the jobs below a job (withDependents)', () => {
  // The alpha file's `ledger` runs after report-daily: a run of report-daily with its dependents
  // starts ledger too, which team-a's `report*` does not cover. (Found by an attacker: 202, and
  // the child ran.)
  const ledgerRuns = () =>
    count("SELECT COUNT(*) AS n FROM baton_runs WHERE job = 'ledger' AND winner >= 1");

  it('refuses a run or a backfill with dependents outside the scope (403 naming the child); nothing runs', async () => {
    const ran = await post('/api/jobs/report-daily/run', TEAM_A, { withDependents: true });
    expect(ran.status, JSON.stringify(ran.body)).toBe(403);
    expect(ran.body.error).toMatchObject({ code: 'out-of-scope', missing: 'job' });
    expect(ran.body.error!.message).toContain('"ledger"');
    const filled = await post('/api/jobs/report-daily/backfill', FILLER, {
      from: '2025-12-31T23:59:00Z',
      to: '2026-01-01T00:01:00Z',
      withDependents: true,
    });
    expect(filled.status, JSON.stringify(filled.body)).toBe(403);
    expect(filled.body.error!.message).toContain('"ledger"');
    // Refused before anything was planned or fired: no run of either job, and the refusals are
    // the audit's.
    expect(await ledgerRuns()).toBe(0);
    expect(lines('ledger.txt')).toEqual([]);
    const refused = (await audit('filler')).concat(
      (await audit('team-a')).filter((r) => r.job === 'ledger'),
    );
    expect(refused.map((r) => [r.action, r.job, r.outcome?.split(':')[0]])).toEqual([
      ['backfill', 'ledger', 'refused'],
      ['run', 'ledger', 'refused'],
    ]);
  });

  it('runs the child with a token whose scope covers it', async () => {
    const ran = await post('/api/jobs/report-daily/run', LOADER, { withDependents: true });
    expect(ran.status, JSON.stringify(ran.body)).toBe(202);
    expect(ran.body.dependents).toEqual(['ledger']);
    await waitFor('ledger to run after report-daily', () => lines('ledger.txt').length === 1);
  });
});

describe('the run route with parameters', () => {
  it('env and args reach the job; secretEnv values are masked in the row and the audit, and in no log', async () => {
    const ran = await post('/api/jobs/report-daily/run', OPS, {
      env: { MODE: 'full', TOKEN: SECRET },
      args: ['--day', '2026-12-01'],
    });
    expect(ran.status, JSON.stringify(ran.body)).toBe(202);
    const row = await finished(ran.body.runId as number);
    expect(row.status).toBe('done');
    expect(lines('alpha.txt').at(-1)).toBe(`full|${SECRET}|--day 2026-12-01`);
    const recorded = { env: { MODE: 'full', TOKEN: '***' }, args: ['--day', '2026-12-01'] };
    expect(JSON.parse(row.params!)).toEqual(recorded);
    const [entry] = (await audit('ops')).filter((r) => r.run_id === ran.body.runId);
    expect(JSON.parse(entry!.details!)).toEqual({ params: recorded });
    const leaks = await fleet.db.query(
      `SELECT id FROM baton_runs WHERE CONCAT_WS('|', params, output_tail, error) LIKE ?
       UNION ALL SELECT id FROM baton_audit WHERE CONCAT_WS('|', details, outcome) LIKE ?`,
      [`%${SECRET}%`, `%${SECRET}%`],
    );
    expect(leaks).toEqual([]);
    for (const r of runners) {
      expect(JSON.stringify(r.lines)).not.toContain(SECRET);
      for (const t of [TEAM_A, OPS, RERUNNER, LITERAL]) {
        expect(JSON.stringify(r.lines) + r.stderr).not.toContain(t);
      }
    }
  });

  it('refuses bad parameters with 400 naming the field; nothing runs or is recorded', async () => {
    const runs = await count('SELECT COUNT(*) AS n FROM baton_runs');
    const audits = await count('SELECT COUNT(*) AS n FROM baton_audit');
    const cases: [string, unknown, RegExp][] = [
      ['report-daily', { env: { '1BAD': 'x' } }, /^the body: env\.1BAD: not a variable name/],
      ['report-daily', { env: { 'A-B': 'x' } }, /^the body: env\.A-B: not a variable name/],
      [
        'report-daily',
        { env: { BATON_JOB: 'x' } },
        /^the body: env\.BATON_JOB: BATON_\* variables/,
      ],
      [
        'report-daily',
        { env: { MODE: 'a\nb' } },
        /^the body: env\.MODE: the value contains a control character$/,
      ],
      [
        'report-daily',
        { args: ['ok', 'x\u0000y'] },
        /^the body: args\[1\]: contains a control character$/,
      ],
      ['report-daily', { env: { MODE: 3 } }, /^the body: env\.MODE: /],
      ['report-daily', { args: 'x' }, /^the body: args: /],
      ['script', { args: ['x'] }, /^the body: args: script is a shell job/],
    ];
    for (const [job, body, message] of cases) {
      const answer = await post(`/api/jobs/${job}/run`, OPS, body);
      expect(answer.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(answer.body.error?.message).toMatch(message);
      expect(answer.body.error?.message).not.toContain('a\nb');
    }
    // Over the recorded bound (32 KiB), inside the body's (16 KiB) is not reachable: the body's
    // limit refuses first (413); the bound is the CLI's, and the same.
    const big = await post('/api/jobs/report-daily/run', OPS, {
      env: { MODE: 'x'.repeat(17_000) },
    });
    expect(big.status).toBe(413);
    expect(await count('SELECT COUNT(*) AS n FROM baton_runs')).toBe(runs);
    expect(await count('SELECT COUNT(*) AS n FROM baton_audit')).toBe(audits);
  });
});

describe('a variable that decides what code a job loads', () => {
  it('is no parameter over HTTP: 400 naming it, for any token; nothing runs', async () => {
    // An attacker's find: with these, "may run report-daily" was "may run any code as its user"
    // (a library or a script of the caller's, preloaded or found first).
    const runs = await count('SELECT COUNT(*) AS n FROM baton_runs');
    for (const [name, token] of [
      ['LD_PRELOAD', TEAM_A],
      ['NODE_OPTIONS', TEAM_A],
      ['PATH', LOADER],
      ['BASH_ENV', LOADER],
      ['PYTHONPATH', LOADER],
    ] as const) {
      const answer = await post('/api/jobs/report-daily/run', token, {
        env: { [name]: '/tmp/attacker' },
      });
      expect(answer.status, name).toBe(400);
      expect(answer.body.error?.message).toMatch(
        new RegExp(`^the body: env\\.${name}: decides what code the job loads`),
      );
      expect(answer.body.error?.message).not.toContain('/tmp/attacker');
    }
    expect(await count('SELECT COUNT(*) AS n FROM baton_runs')).toBe(runs);
    expect(lines('alpha.txt').some((l) => l.includes('attacker'))).toBe(false);
  });
});

describe('a past fire again over HTTP', () => {
  it('runs it, refuses it 409 without again, runs a new generation with again; rerun is its own action', async () => {
    const first = await post('/api/jobs/nightly/run', RERUNNER, { fire: FIRE });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    expect(first.body).toMatchObject({ scheduledAt: FIRE, rerun: 0 });
    expect((await finished(first.body.runId as number)).status).toBe('done');

    const refused = await post('/api/jobs/nightly/run', RERUNNER, { fire: FIRE });
    expect(refused.status).toBe(409);
    expect(refused.body.error?.code).toBe('already-ran');
    expect(refused.body.error?.message).toContain('add --again');

    const again = await post('/api/jobs/nightly/run', RERUNNER, { fire: FIRE, again: true });
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toMatchObject({ scheduledAt: FIRE, rerun: 1 });
    expect((await finished(again.body.runId as number)).status).toBe('done');
    expect(lines('nightly.txt')).toHaveLength(2);
    const generations = await fleet.db.query<{ rerun: number; triggered_by: string }>(
      "SELECT rerun, triggered_by FROM baton_runs WHERE job = 'nightly' ORDER BY rerun",
    );
    expect(generations).toEqual([
      { rerun: 0, triggered_by: 'rerun' },
      { rerun: 1, triggered_by: 'rerun' },
    ]);

    // rerun grants no run now; run grants no re-run.
    const now = await post('/api/jobs/nightly/run', RERUNNER);
    expect(now.status).toBe(403);
    expect(now.body.error?.message).toBe('token "rerunner" may not run (its actions: rerun)');
    // Nor backfill, which walks the same fires.
    const walk = await post('/api/jobs/nightly/backfill', RERUNNER, { from: FIRE, to: FIRE });
    expect(walk.status).toBe(403);
    expect(walk.body.error?.message).toBe('token "rerunner" may not backfill (its actions: rerun)');
    const teamA = await post('/api/jobs/report-daily/run', TEAM_A, { fire: FIRE });
    expect(teamA.status).toBe(403);
    expect(teamA.body.error?.message).toBe('token "team-a" may not rerun (its actions: run)');

    const rows = await audit('rerunner');
    expect(rows.map((r) => [r.action, r.outcome?.replace(/\(.*/, '').trim()])).toEqual([
      ['rerun', 'done'],
      ['rerun', 'refused: already ran'],
      ['rerun', 'done'],
      ['run', 'refused: token "rerunner" may not run'],
      ['backfill', 'refused: token "rerunner" may not backfill'],
    ]);
    expect(JSON.parse(rows[2]!.details!)).toMatchObject({
      again: true,
      rerun: 1,
      scope: { jobs: ['nightly'], actions: ['rerun'] },
    });
  });
});
