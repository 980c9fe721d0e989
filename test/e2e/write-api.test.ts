/**
 * The write API (`baton start --http … --http-write-tokens-file FILE`) against two real runners
 * with a read token and named write tokens:
 *
 * - Refusals, each a JSON `{error: {code, message}}` and none leaving an audit row: 401 without a
 *   token or with a wrong one, 401 for Basic (even with a write token: a browser resends Basic by
 *   itself, which would be CSRF), 403 for the read token, 405 for GET, 404 for an unknown job or
 *   route, 415 without `Content-Type: application/json`, 413 over 16 KiB, 400 for a bad body, 404
 *   to kill a run that does not exist.
 * - Backfill: `baton backfill` started by the runner asked (202 with the fires), each fire of the
 *   range run once as a re-run, the audit naming the token; a range over the bound is 400.
 * - With a write token the action happens: run now answers 202 with a run id whose row is a
 *   `manual` run on the runner asked; asked of the other runner while it runs, 409 naming the
 *   holder; pause and resume write and lift the `baton_pauses` row. Each action has its
 *   `baton_audit` row naming the token (`via` api, the runner's host, the reason, the outcome).
 * - Per-token rate limit: the 11th request within 10 s is 429 with Retry-After; another token is
 *   not affected; after Retry-After the token is served again. A write token also reads.
 * - A bad tokens file stops `start` with 64 naming file:line and not the token; no token is ever
 *   in a runner's log.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { baton, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { operatorName } from '../../src/operator.js';
import { createTestDatabase } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort } from '../helpers/private-server.js';
import { pidFile } from '../helpers/procfs.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('write_api');

const READ = 'read-token-0123456789abcdef';
const ALICE = 'alice-token-0123456789abcdef';
const FLOOD = 'flood-token-0123456789abcdef';
const CALM = 'calm-token-0123456789abcdef0';
const PROBE = 'probe-token-0123456789abcdef';
const STEER = 'steer-token-0123456789abcdef';
const DRILL = 'drill-token-0123456789abcdef';
const KILLER = 'killer-token-0123456789abcdef';
const TOKENS = [READ, ALICE, FLOOD, CALM, PROBE, STEER, DRILL, KILLER];

function tokensFile(text: string): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-tokens-')), 'write-tokens');
  writeFileSync(file, text, { mode: 0o600 });
  return file;
}

let runners: RunnerProcess[];
let ports: number[];
let tokens: string;

beforeAll(async () => {
  const config = writeSchedule(`
namespace: api
jobs:
  slow:
    schedule: "0 0 1 1 *"
    command: ["sleep", "3"]
  quick:
    schedule: "0 0 1 1 *"
    command: ["true"]
  minutely:
    schedule: "* * * * *"
    enabled: false
    command: ["true"]
  sheet:
    schedule: "* * * * *"
    enabled: false
    command: ["sleep", "0.3"]
  lag:
    schedule: "* * * * *"
    enabled: false
    command: ["sleep", "3"]
  doomed:
    schedule: "* * * * *"
    enabled: false
    command: ["sleep", "30"]
`);
  const file = tokensFile(
    `# who may write\nalice:${ALICE}\n\nflood:${FLOOD}\ncalm:${CALM}\nprobe:${PROBE}\n` +
      `steer:${STEER}\ndrill:${DRILL}\nkiller:${KILLER}\n`,
  );
  tokens = file;
  ports = [await freePort(), await freePort()];
  runners = await Promise.all(
    ['api-a', 'api-b'].map((host, i) =>
      fleet
        .start([host], {
          config,
          args: ['--http', `127.0.0.1:${ports[i]}`, '--http-write-tokens-file', file],
          env: { BATON_HTTP_TOKEN: READ },
        })
        .then(([r]) => r!),
    ),
  );
});

interface Answer {
  status: number;
  headers: Headers;
  body: { error?: { code: string; message: string }; [key: string]: unknown };
}

async function post(
  path: string,
  {
    token,
    body = {},
    port = ports[0]!,
    headers = {},
  }: { token?: string; body?: unknown; port?: number; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Answer['body'] };
}

async function auditRows() {
  return fleet.db.query<{
    action: string;
    job: string;
    run_id: number | null;
    operator: string;
    via: string;
    host: string;
    reason: string | null;
    outcome: string | null;
    fire: Date | null;
  }>('SELECT * FROM baton_audit ORDER BY id');
}

describe('the write API', () => {
  it('refuses without a write token, with the read token, with Basic; every error is JSON', async () => {
    const none = await post('/api/jobs/quick/run');
    expect(none.status).toBe(401);
    expect(none.body.error?.code).toBe('unauthorized');
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer /);
    expect((await post('/api/jobs/quick/run', { token: `${ALICE}x` })).status).toBe(401);

    const read = await post('/api/jobs/quick/run', { token: READ });
    expect(read.status).toBe(403);
    expect(read.body.error?.code).toBe('forbidden');

    // A write token as Basic password: refused, a browser would send it on a cross-site post.
    const basic = await post('/api/jobs/quick/run', {
      headers: { authorization: `Basic ${Buffer.from(`alice:${ALICE}`).toString('base64')}` },
    });
    expect(basic.status).toBe(401);
    expect(basic.body.error?.code).toBe('bearer-required');

    const get = await fetch(`http://127.0.0.1:${ports[0]}/api/jobs/quick/run`, {
      headers: { authorization: `Bearer ${PROBE}` },
    });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(((await get.json()) as Answer['body']).error?.code).toBe('method-not-allowed');

    // A cross-site script's preflight gets no CORS grant.
    const preflight = await fetch(`http://127.0.0.1:${ports[0]}/api/jobs/quick/run`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(401);
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();

    const unknownJob = await post('/api/jobs/nosuch/run', { token: PROBE });
    expect(unknownJob.status).toBe(404);
    expect(unknownJob.body.error?.message).toContain('nosuch');
    expect((await post('/api/jobs/quick/explode', { token: PROBE })).status).toBe(404);
    expect((await post('/api/runs/abc/kill', { token: PROBE })).status).toBe(404);

    const plain = await post('/api/jobs/quick/run', {
      token: PROBE,
      headers: { 'content-type': 'text/plain' },
    });
    expect(plain.status).toBe(415);
    const big = await post('/api/jobs/quick/pause', {
      token: PROBE,
      body: { reason: 'x'.repeat(20_000) },
    });
    expect(big.status).toBe(413);
    expect(big.body.error?.code).toBe('payload-too-large');
    expect((await post('/api/jobs/quick/pause', { token: PROBE, body: '{"reason"' })).status).toBe(
      400,
    );
    const extra = await post('/api/jobs/quick/pause', { token: PROBE, body: { force: true } });
    expect(extra.status).toBe(400);
    expect(extra.body.error?.message).toContain('force');

    const noRun = await post('/api/runs/999999/kill', { token: PROBE, body: {} });
    expect(noRun.status).toBe(404);
    expect(noRun.body.error?.code).toBe('not-found');

    // Nothing was done, so nothing was recorded.
    expect(await auditRows()).toEqual([]);
    const [{ n }] = (await fleet.db.query<{ n: number }>(
      'SELECT COUNT(*) AS n FROM baton_runs',
    )) as [{ n: number }];
    expect(Number(n)).toBe(0);
  });

  it('runs a job now on the runner asked: 202 with the run; 409 from the other runner naming the holder', async () => {
    const started = await post('/api/jobs/slow/run', {
      token: ALICE,
      body: { reason: 'month end' },
    });
    expect(started.status).toBe(202);
    expect(started.body).toMatchObject({ job: 'slow', host: 'api-a', paused: null });
    const runId = started.body.runId as number;
    const [run] = await fleet.db.query<{ host: string; trigger: string; status: string }>(
      'SELECT host, triggered_by AS `trigger`, status FROM baton_runs WHERE id = ?',
      [runId],
    );
    expect(run).toEqual({ host: 'api-a', trigger: 'manual', status: 'running' });

    // On the same runner too: the job's lock (and this runner's own run of it) is one.
    const again = await post('/api/jobs/slow/run', { token: ALICE });
    expect(again.status).toBe(409);
    expect(again.body.error?.code).toBe('busy');

    const busy = await post('/api/jobs/slow/run', { token: ALICE, port: ports[1] });
    expect(busy.status).toBe(409);
    expect(busy.body.error?.code).toBe('busy');
    expect(busy.body.error?.message).toContain('api-a');

    const audit = await auditRows();
    expect(audit).toHaveLength(3);
    expect(audit[0]).toMatchObject({
      action: 'run',
      job: 'slow',
      run_id: runId,
      operator: 'alice',
      via: 'api',
      host: 'api-a',
      reason: 'month end',
      outcome: `started (run ${runId})`,
    });
    // A refusal names the skip row the lock's holder was recorded in (as `baton run`'s does).
    expect(audit[1]).toMatchObject({ action: 'run', host: 'api-a' });
    expect(audit[1]!.outcome).toMatch(/^not run: /);
    expect(audit[2]).toMatchObject({
      action: 'run',
      operator: 'alice',
      host: 'api-b',
    });
    expect(audit[2]!.outcome).toMatch(/^not run: .*api-a/);

    await waitFor('the run to finish', async () => {
      const [row] = await fleet.db.query<{ status: string }>(
        'SELECT status FROM baton_runs WHERE id = ?',
        [runId],
      );
      return row!.status === 'done';
    });

    // The dashboard's data and `baton show --json` describe the run with one document
    // (actions/documents.ts), but for its params; show adds what only a single run shows, and
    // who acted on it.
    const page = await fetch(`http://127.0.0.1:${ports[1]}/api/run?id=${runId}`, {
      headers: { authorization: `Bearer ${READ}` },
    });
    const fromApi = ((await page.json()) as { run: Record<string, unknown> }).run;
    const show = await baton(['show', String(runId), '--json', '--database-url', fleet.db.url]);
    expect(show.code, show.stderr).toBe(0);
    const fromCli = JSON.parse(show.stdout) as Record<string, unknown>;
    expect(fromApi).toMatchObject({ id: runId, status: 'done', host: 'api-a', trigger: 'manual' });
    expect(fromApi.durationMs).toBeGreaterThanOrEqual(3_000);
    expect(fromApi).toEqual(
      Object.fromEntries(Object.keys(fromApi).map((key) => [key, fromCli[key]])),
    );
    // A manual run's --env values are the database's readers' only (documents.ts).
    expect(Object.keys(fromCli).sort()).toEqual(
      [
        ...Object.keys(fromApi),
        'params',
        'namespace',
        'lockConnectionId',
        'outputTail',
        'actions',
      ].sort(),
    );
  });

  it('pauses and resumes a job, recording who and why', async () => {
    const paused = await post('/api/jobs/quick/pause', {
      token: ALICE,
      port: ports[1],
      body: { reason: 'provider maintenance' },
    });
    expect(paused.status).toBe(200);
    expect(paused.body).toEqual({
      job: 'quick',
      namespace: 'api',
      paused: true,
      renewed: false,
      forced: false,
      // Signed token@runner, as a command's pause is user@host: a skip row says whom to ask.
      pause: {
        pausedBy: 'alice@api-b',
        pausedAt: expect.stringMatching(/Z$/),
        reason: 'provider maintenance',
      },
      auditId: expect.any(Number),
    });
    const pauses = await fleet.db.query('SELECT job, paused_by, reason FROM baton_pauses');
    // Every runner honours it: the other runner's dashboard shows it.
    const page = await fetch(`http://127.0.0.1:${ports[0]}/api/job?name=quick`, {
      headers: { authorization: `Bearer ${READ}` },
    });
    expect(((await page.json()) as { pause: unknown }).pause).toEqual(paused.body.pause);
    expect(pauses).toEqual([
      { job: 'quick', paused_by: 'alice@api-b', reason: 'provider maintenance' },
    ]);

    // The command is the same action: it renews the pause and answers with the same document.
    const cli = await baton([
      'pause',
      'quick',
      '--json',
      '--reason',
      'still down',
      '--namespace',
      'api',
      '--host',
      'ops-1',
      '--database-url',
      fleet.db.url,
    ]);
    expect(cli.code, cli.stderr).toBe(0);
    const renewed = JSON.parse(cli.stdout) as Record<string, unknown>;
    expect(Object.keys(renewed)).toEqual(Object.keys(paused.body));
    const cliBy = `${operatorName()}@ops-1`;
    expect(renewed).toMatchObject({
      renewed: true,
      forced: false,
      pause: { pausedBy: cliBy, reason: 'still down' },
    });

    const resumed = await post('/api/jobs/quick/resume', { token: ALICE });
    expect(resumed.status).toBe(200);
    expect(resumed.body).toEqual({
      job: 'quick',
      namespace: 'api',
      resumed: true,
      wasPaused: renewed.pause,
      auditId: expect.any(Number),
    });
    expect(await fleet.db.query('SELECT * FROM baton_pauses')).toEqual([]);

    const audit = (await auditRows()).filter((a) => a.action !== 'run');
    expect(audit).toEqual([
      expect.objectContaining({
        action: 'pause',
        job: 'quick',
        operator: 'alice',
        via: 'api',
        host: 'api-b',
        reason: 'provider maintenance',
        outcome: 'paused',
      }),
      expect.objectContaining({
        action: 'pause',
        operator: operatorName(),
        via: 'cli',
        host: 'ops-1',
        reason: 'still down',
        outcome: 'renewed the pause',
      }),
      expect.objectContaining({
        action: 'resume',
        operator: 'alice',
        via: 'api',
        host: 'api-a',
        outcome: expect.stringMatching(/^resumed \(it was paused by .*@ops-1 at .*: still down\)$/),
      }),
    ]);
  });

  it('limits each token to 10 requests in 10 s (429 with Retry-After); a write token also reads', async () => {
    for (let i = 0; i < 10; i++) {
      expect((await post('/api/jobs/quick/resume', { token: FLOOD })).status).toBe(200);
    }
    const limited = await post('/api/jobs/quick/resume', { token: FLOOD });
    expect(limited.status).toBe(429);
    expect(limited.body.error?.code).toBe('rate-limited');
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(10);
    // Another token has a bucket of its own.
    expect((await post('/api/jobs/quick/resume', { token: CALM })).status).toBe(200);
    await sleep(retryAfter * 1000);
    expect((await post('/api/jobs/quick/resume', { token: FLOOD })).status).toBe(200);

    const overview = await fetch(`http://127.0.0.1:${ports[0]}/api/overview`, {
      headers: { authorization: `Bearer ${CALM}` },
    });
    expect(overview.status).toBe(200);
    const operators = (await auditRows()).map((a) => a.operator);
    expect(operators.filter((o) => o === 'flood')).toHaveLength(11);
  });

  it('answers 409 at once while a queued fire of the job waits its turn on the runner', async () => {
    const config = writeSchedule(`
namespace: api-queue
jobs:
  queued:
    schedule: "* * * * * *"
    overlap: queue
    command: ["sleep", "4"]
`);
    const port = await freePort();
    await fleet.start(['api-q'], {
      config,
      args: ['--http', `127.0.0.1:${port}`, '--http-write-tokens-file', tokensFile(`q:${ALICE}\n`)],
    });
    await waitFor('a run of queued', async () => {
      const rows = await fleet.db.query(
        "SELECT id FROM baton_runs WHERE job = 'queued' AND status = 'running'",
      );
      return rows.length > 0;
    });
    // The next second's fire is queued behind the run now.
    await sleep(1_200);
    const asked = performance.now();
    const busy = await post('/api/jobs/queued/run', { token: ALICE, port });
    expect(busy.status).toBe(409);
    expect(busy.body.error?.message).toContain('being contended on this runner');
    expect(performance.now() - asked).toBeLessThan(1_500);
  });

  it('refuses a bad tokens file with 64, naming the line and not the token', async () => {
    const config = writeSchedule('jobs:\n  q:\n    schedule: "0 0 1 1 *"\n    command: ["true"]\n');
    const secret = 'shorty-secret';
    const cases: [string, RegExp][] = [
      [`ok:${ALICE}\nbad ${ALICE}x\n`, /write-tokens:2: expected name:token/],
      [`# none\nalice:${secret}\n`, /write-tokens:2: the token of "alice" is shorter than 16/],
      [`a:${ALICE}\nb:${ALICE}\n`, /write-tokens:2: .*another name's/],
      [`reader:${READ}\n`, /write-tokens:1: .*is the read token/],
      // A scope that is not one: refused whole, as a bad token (issue 42).
      [
        `ok:${ALICE}\nteam:${STEER} actions=run,explode\n`,
        /write-tokens:2: .*unknown action "explode"/,
      ],
      [`team:${STEER} jobs=\n`, /write-tokens:1: .*jobs=: an empty job name or glob/],
      [`team:${STEER} namespaces=a/b\n`, /write-tokens:1: .*the namespace "a\/b" is no namespace/],
    ];
    const results = await Promise.all(
      cases.map(([text]) =>
        baton(
          [
            'start',
            '--config',
            config,
            '--database-url',
            fleet.db.url,
            '--http',
            '127.0.0.1:1',
            '--http-write-tokens-file',
            tokensFile(text),
          ],
          { env: { BATON_HTTP_TOKEN: READ } },
        ),
      ),
    );
    for (const [i, [text, message]] of cases.entries()) {
      const result = results[i]!;
      expect(result.code, text).toBe(64);
      expect(result.stderr).toMatch(message);
      for (const t of [...TOKENS, secret]) expect(result.stderr).not.toContain(t);
    }
    // Never a token in a runner's log.
    for (const runner of runners) {
      const log = runner.lines.map((l) => JSON.stringify(l)).join('\n');
      for (const t of TOKENS) expect(log).not.toContain(t);
    }
  });
});

describe('backfill through the API', () => {
  it('runs every fire of the range once on the runner asked, audited under the token', async () => {
    const now = Date.now();
    const from = new Date(now - 4 * 60_000 + 1_000).toISOString();
    const to = new Date(now - 1_000).toISOString();
    const asked = await post('/api/jobs/minutely/backfill', {
      token: ALICE,
      body: { from, to, reason: 'catch up the outage' },
    });
    expect(asked.status, JSON.stringify(asked.body)).toBe(202);
    expect(asked.body).toMatchObject({ job: 'minutely', host: 'api-a' });
    const fires = Number(asked.body.fires);
    expect(fires).toBeGreaterThanOrEqual(3);
    const ran = await waitFor(
      'every fire of the range run',
      async () => {
        const rows = await fleet.db.query<{ scheduled_at: Date; status: string }>(
          `SELECT scheduled_at, status FROM baton_runs
            WHERE job = 'minutely' AND triggered_by = 'rerun' AND winner >= 1`,
        );
        return rows.length >= fires && rows.every((r) => r.status === 'done') ? rows : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(new Set(ran.map((r) => r.scheduled_at.getTime())).size).toBe(fires);
    // Each fire's audit row says what came of its run (as `baton run --fire`'s does).
    const reruns = await waitFor('the audit rows of the fires', async () => {
      const rows = (await auditRows()).filter((a) => a.action === 'rerun' && a.job === 'minutely');
      return rows.length >= fires ? rows : undefined;
    });
    expect(reruns.map((a) => a.outcome)).toEqual(reruns.map(() => 'done'));
    const audit = (await auditRows()).filter((a) => a.action === 'backfill');
    expect(audit).toEqual([
      expect.objectContaining({
        job: 'minutely',
        operator: 'alice',
        via: 'api',
        reason: 'catch up the outage',
      }),
    ]);
    const over = await post('/api/jobs/minutely/backfill', {
      token: ALICE,
      body: { from: new Date(now - 5 * 3_600_000).toISOString(), to },
    });
    expect(over.status).toBe(400);
    expect(over.body.error?.message).toContain('--yes');
  });

  it('takes a reason that looks like an option as the reason, never as an option: another database is untouched', async () => {
    const other = await createTestDatabase('write_api_other');
    try {
      const steer = `--database-url=${other.url}`;
      const tables = async () =>
        Number(
          (
            await other.query<{ n: number }>(
              'SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = ?',
              [other.name],
            )
          )[0]!.n,
        );
      const backfills = async () => (await auditRows()).filter((a) => a.action === 'backfill');
      const before = (await backfills()).length;

      const now = Date.now();
      const from = new Date(now - 9 * 60_000).toISOString();
      const to = new Date(now - 6 * 60_000).toISOString();
      // A reason that reads as an option is recorded as the reason; the backfill runs here.
      const asked = await post('/api/jobs/minutely/backfill', {
        token: STEER,
        body: { from, to, again: true, reason: steer },
      });
      expect(asked.status, JSON.stringify(asked.body)).toBe(202);
      expect(asked.body).toMatchObject({ from, to });
      const [done] = await waitFor(
        'the backfill to end, audited in the fleet database',
        async () => {
          const rows = (await backfills()).slice(before);
          return rows.length > 0 && rows.every((r) => r.outcome != null) ? rows : undefined;
        },
        { timeoutMs: 30_000 },
      );
      expect(done).toMatchObject({ operator: 'steer', via: 'api', reason: steer });
      expect(done!.outcome).toMatch(/^completed: [1-9]\d* run, 0 failed/);
      expect(await tables()).toBe(0);

      // `from` and `to` that are no instants (one a steer as well): 400 naming the field, and
      // nothing starts.
      const badFrom = await post('/api/jobs/minutely/backfill', {
        token: STEER,
        body: { from: steer, to },
      });
      expect(badFrom.status).toBe(400);
      expect(badFrom.body.error?.message).toMatch(/^the body: from: /);
      // The refusal does not echo the value (it may carry a password, and it is logged).
      expect(badFrom.body.error?.message).not.toContain(other.name);
      const badTo = await post('/api/jobs/minutely/backfill', {
        token: STEER,
        body: { from, to: '--yes' },
      });
      expect(badTo.status).toBe(400);
      expect(badTo.body.error?.message).toMatch(/^the body: to: not an ISO-8601 instant/);
      const backwards = await post('/api/jobs/minutely/backfill', {
        token: STEER,
        body: { from: to, to: from },
      });
      expect(backwards.status).toBe(400);
      expect(backwards.body.error?.message).toContain('to: is before from');
      const nul = await post('/api/jobs/minutely/backfill', {
        token: STEER,
        body: { from, to, reason: 'a\u0000b' },
      });
      expect(nul.status).toBe(400);
      expect(nul.body.error?.message).toContain('reason');
      expect((await backfills()).length).toBe(before + 1);
      expect(await tables()).toBe(0);
    } finally {
      await other.drop();
    }
  });
});

describe('what a runner serving the API must survive (the attack on the actions)', () => {
  it('a backfill of years is refused without walking them: the run going on is not lost meanwhile', async () => {
    const run = await post('/api/jobs/slow/run', { token: DRILL });
    expect(run.status, JSON.stringify(run.body)).toBe(202);
    const refused = await post('/api/jobs/minutely/backfill', {
      token: DRILL,
      body: { from: '2000-01-01T00:00:00Z', to: new Date(Date.now() - 3_600_000).toISOString() },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error?.message).toContain('has more than 10000 fires of minutely');
    // Once, listing the range to count it stalled the runner past its lease: its run was lost.
    const [row] = await waitFor('the run to end', async () => {
      const rows = await fleet.db.query<{ status: string; error: string | null }>(
        'SELECT status, error FROM baton_runs WHERE id = ?',
        [run.body.runId],
      );
      return rows[0]?.status !== 'running' ? rows : undefined;
    });
    expect(row).toEqual({ status: 'done', error: null });
  });

  it('two backfills of one range on one runner both complete, each fire run once', async () => {
    const now = Date.now();
    const body = {
      from: new Date(now - 4 * 60_000 + 1_000).toISOString(),
      to: new Date(now - 1_000).toISOString(),
    };
    const asked = await Promise.all([
      post('/api/jobs/sheet/backfill', { token: DRILL, body }),
      post('/api/jobs/sheet/backfill', { token: DRILL, body }),
    ]);
    expect(asked.map((a) => a.status)).toEqual([202, 202]);
    // One fire of the job waiting its turn on the runner made the other backfill give up once.
    const ended = await waitFor(
      'both backfills to end',
      async () => {
        const rows = (await auditRows()).filter(
          (a) => a.action === 'backfill' && a.job === 'sheet',
        );
        return rows.length === 2 && rows.every((r) => r.outcome != null) ? rows : undefined;
      },
      { timeoutMs: 60_000 },
    );
    for (const row of ended) expect(row.outcome).toMatch(/^completed: /);
    const runs = await fleet.db.query<{ scheduled_at: Date; rerun: number }>(
      "SELECT scheduled_at, rerun FROM baton_runs WHERE job = 'sheet' AND winner >= 1",
    );
    expect(runs.length).toBe(Number(asked[0]!.body.fires));
    expect(runs.every((r) => r.rerun === 0)).toBe(true);
    expect(new Set(runs.map((r) => r.scheduled_at.getTime())).size).toBe(runs.length);
  });

  it('a re-run refused beside a run of the same fire answers 409, not that run as its own', async () => {
    const fire = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 40 * 60_000).toISOString();
    const first = await post('/api/jobs/lag/run', { token: DRILL, body: { fire } });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    // The same fire again while its generation 0 runs here: the local overlap skips it.
    const second = await post('/api/jobs/lag/run', { token: DRILL, body: { fire, again: true } });
    expect(second.status, JSON.stringify(second.body)).toBe(409);
    expect((second.body.error as { runId?: unknown } | undefined)?.runId).not.toBe(
      first.body.runId,
    );
    const audit = (await auditRows()).filter(
      (a) => a.action === 'rerun' && a.fire?.toISOString() === fire,
    );
    expect(audit.at(-1)!.run_id).not.toBe(first.body.runId);
    expect(audit.at(-1)!.outcome).toMatch(/^not run: /);
  });
});

describe('kill through the API', () => {
  it("kills a run of another runner, answering with baton kill --json's document", async () => {
    const run = await post('/api/jobs/doomed/run', { token: KILLER });
    expect(run.status, JSON.stringify(run.body)).toBe(202);
    const runId = Number(run.body.runId);
    // Asked of the other runner: the order goes through the database to the run's owner.
    const killed = await post(`/api/runs/${runId}/kill`, {
      token: KILLER,
      port: ports[1],
      body: { grace: '1s', reason: 'wrong input file' },
    });
    expect(killed.status, JSON.stringify(killed.body)).toBe(200);
    expect(killed.body).toMatchObject({
      runId,
      job: 'doomed',
      namespace: 'api',
      host: 'api-a',
      outcome: 'killed',
      status: 'killed',
      graceMs: 1_000,
      alreadyRequested: false,
      request: { by: 'killer', reason: 'wrong input file' },
    });
    // The same document as the command's, field for field.
    const shown = await baton([
      'kill',
      String(runId),
      '--json',
      '--grace',
      '1s',
      '--database-url',
      fleet.db.url,
    ]);
    expect(shown.code, shown.stderr).toBe(0);
    const fromCli = JSON.parse(shown.stdout) as Record<string, unknown>;
    expect(Object.keys(fromCli).sort()).toEqual(Object.keys(killed.body).sort());
    expect(fromCli).toMatchObject({ runId, outcome: 'finished', status: 'killed' });
  });
});

describe('a past fire again through the API (the run action baton run --fire takes)', () => {
  it('runs it with its own instant, refuses it once done unless again, then runs a new generation', async () => {
    const fire = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 20 * 60_000).toISOString();
    const first = await post('/api/jobs/minutely/run', { token: ALICE, body: { fire } });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    expect(first.body).toMatchObject({ job: 'minutely', scheduledAt: fire, rerun: 0 });
    const rowOf = (id: unknown) =>
      waitFor('the re-run to finish', async () => {
        const [row] = await fleet.db.query<{ status: string; trigger: string; rerun: number }>(
          'SELECT status, triggered_by AS `trigger`, rerun FROM baton_runs WHERE id = ?',
          [id],
        );
        return row?.status === 'done' ? row : undefined;
      });
    expect(await rowOf(first.body.runId)).toEqual({ status: 'done', trigger: 'rerun', rerun: 0 });

    // Done once: not again by accident; the refusal names the run that did it.
    const refused = await post('/api/jobs/minutely/run', { token: ALICE, body: { fire } });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'already-ran', runId: first.body.runId });
    const again = await post('/api/jobs/minutely/run', {
      token: ALICE,
      body: { fire, again: true },
    });
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toMatchObject({ scheduledAt: fire, rerun: 1 });
    expect(await rowOf(again.body.runId)).toEqual({ status: 'done', trigger: 'rerun', rerun: 1 });

    // The audit says the same as for `baton run --fire`: the refusal, and each run's verdict.
    const reruns = await waitFor('the audit outcomes', async () => {
      const rows = (await auditRows()).filter((a) => a.action === 'rerun' && a.job === 'minutely');
      const mine = rows.filter((a) => a.operator === 'alice' && a.fire?.toISOString() === fire);
      return mine.length === 3 &&
        mine.every((a) => a.outcome !== null && !a.outcome.startsWith('started'))
        ? mine
        : undefined;
    });
    expect(reruns.map((a) => a.outcome)).toEqual([
      'done',
      expect.stringMatching(/^refused: already ran \(done on api-a/),
      'done',
    ]);

    // Not one of the schedule's instants, one still to come, `again` alone: 400, nothing runs.
    const between = await post('/api/jobs/minutely/run', {
      token: ALICE,
      body: { fire: new Date(Date.parse(fire) + 30_000).toISOString() },
    });
    expect(between.status).toBe(400);
    expect(between.body.error?.message).toContain('is not a fire of minutely');
    const coming = await post('/api/jobs/minutely/run', {
      token: ALICE,
      body: { fire: new Date(Math.ceil(Date.now() / 60_000) * 60_000 + 120_000).toISOString() },
    });
    expect(coming.status).toBe(400);
    expect(coming.body.error?.message).toContain('has not come yet');
    const alone = await post('/api/jobs/minutely/run', { token: ALICE, body: { again: true } });
    expect(alone.status).toBe(400);
    expect(alone.body.error?.message).toContain('again: needs fire');
  });
});

describe('namespaces sharing one database', () => {
  it("refuses to kill another namespace's run: 404, and the run goes on untouched", async () => {
    // A prod runner beside the staging runners (namespace api), on the same database.
    const prodConfig = writeSchedule(`
namespace: api-prod
jobs:
  ledger:
    schedule: "0 0 1 1 *"
    command: [sh, -c, 'echo $$ > ledger.pid; while [ ! -e release ]; do sleep 0.1; done; echo finished > ledger.done']
`);
    const dir = path.dirname(prodConfig);
    const prodPort = await freePort();
    const [prod] = await fleet.start(['api-prod'], {
      config: prodConfig,
      args: ['--http', `127.0.0.1:${prodPort}`, '--http-write-tokens-file', tokens],
      env: { BATON_HTTP_TOKEN: READ },
    });
    const started = await post('/api/jobs/ledger/run', { token: STEER, port: prodPort });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    const runId = Number(started.body.runId);
    const pid = await pidFile(dir, 'ledger.pid');

    // The staging runner is asked, with a write token of its own: no such run in its namespace.
    const asked = await post(`/api/runs/${runId}/kill`, {
      token: STEER,
      body: { grace: '1s', reason: 'wrong namespace' },
    });
    expect(asked.status, JSON.stringify(asked.body)).toBe(404);
    expect(asked.body.error?.message).toBe(`no run with id ${runId} in namespace "api"`);
    // Nothing was written on the run, nor audited; its process lives.
    const [row] = await fleet.db.query<{ status: string; kill_requested_at: Date | null }>(
      'SELECT status, kill_requested_at FROM baton_runs WHERE id = ?',
      [runId],
    );
    expect(row).toEqual({ status: 'running', kill_requested_at: null });
    const refusedKills = (await auditRows()).filter(
      (a) => a.action === 'kill' && (a.run_id === runId || a.reason === 'wrong namespace'),
    );
    expect(refusedKills).toEqual([]);
    expect(() => process.kill(pid, 0), 'the prod job after the refused kill').not.toThrow();

    // It ends on its own, as it would have: done, by its own journal too.
    writeFileSync(path.join(dir, 'release'), '');
    await waitFor('the prod run done', async () => {
      const [r] = await fleet.db.query<{ status: string }>(
        'SELECT status FROM baton_runs WHERE id = ?',
        [runId],
      );
      return r?.status === 'done';
    });
    expect(readFileSync(path.join(dir, 'ledger.done'), 'utf8')).toBe('finished\n');
    expect(prod!.errors()).toEqual([]);
  });
});
