/**
 * The database password stays out of every output, and a runner works with only the runtime
 * grants (SELECT, INSERT, UPDATE on its database) once an administrator has migrated the schema.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, startRunner, writeSchedule } from '../helpers/cli.js';
import { createTestDatabase, runs, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const USER = `baton_t_${randomBytes(3).toString('hex')}`;
const PASSWORD = `pw-${randomBytes(8).toString('hex')}`;
const TOKEN = `tok-${randomBytes(8).toString('hex')}`;
let db: TestDatabase;
let url: string;
let config: string;

beforeAll(async () => {
  db = await createTestDatabase('grants');
  // The administrator migrates; the runner's user gets the runtime grants only.
  expect((await baton(['migrate', '--database-url', db.url])).code).toBe(0);
  await db.query('CREATE USER ?@? IDENTIFIED BY ?', [USER, '%', PASSWORD]);
  await db.query('GRANT SELECT, INSERT, UPDATE ON ??.* TO ?@?', [db.name, USER, '%']);
  url = `mysql://${USER}:${PASSWORD}@127.0.0.1:3306/${db.name}`;
  config = writeSchedule(
    `
jobs:
  printenv:
    schedule: "* * * * * *"
    command: ["sh", "-c", "env; echo done"]
  leaky:
    schedule: "0 0 1 1 *"
    env: {LEAK: "${PASSWORD}", TOKEN: "${TOKEN}"}
    secretEnv: [TOKEN]
    command: ["sh", "leaky.sh"]
`,
    {
      // The password and the token whole, and each cut in two across reads of the job's output.
      'leaky.sh': [
        'echo "password=$LEAK token=$TOKEN"',
        'echo "token on stderr: $TOKEN" >&2',
        'printf "split=%s" "$(printf %s "$LEAK" | cut -c1-6)"; sleep 0.3',
        'printf "%s\\n" "$(printf %s "$LEAK" | cut -c7-)"',
        'printf "%s" "$(printf %s "$TOKEN" | cut -c1-5)" >&2; sleep 0.3',
        'printf "%s end\\n" "$(printf %s "$TOKEN" | cut -c6-)" >&2',
      ].join('\n'),
    },
  );
});
afterAll(async () => {
  await db.query('DROP USER IF EXISTS ?@?', [USER, '%']);
  await db.drop();
});

describe('a runner with only the runtime grants', () => {
  it('runs a manual job, and the job never sees the database password', async () => {
    const result = await baton(['run', 'printenv', '--config', config], {
      env: { BATON_DATABASE_URL: url, BATON_CONFIG: config },
    });
    expect(result.stderr).toContain('printenv done');
    expect(result.code).toBe(0);
    const [row] = await runs(db, 'printenv');
    expect(row!.output_tail).toContain('BATON_JOB=printenv');
    expect(row!.output_tail).not.toContain(PASSWORD);
    expect(row!.output_tail).not.toContain('BATON_DATABASE_URL');
    expect(result.stdout + result.stderr).not.toContain(PASSWORD);
  });

  it('runs scheduled fires, and its log never contains the password', async () => {
    const runner = startRunner({ config, databaseUrl: url, host: 'least-privilege' });
    try {
      await runner.ready();
      await waitFor('a scheduled run', async () =>
        (await runs(db, 'printenv')).find(
          (r) => r.triggered_by === 'schedule' && r.status === 'done',
        ),
      );
    } finally {
      expect(await runner.stop('SIGTERM')).toBe(0);
    }
    // The registry, the reaper and the pause check work with these grants too.
    const registered = await db.query<{ host: string; stopped_at: Date | null }>(
      'SELECT host, stopped_at FROM baton_runners',
    );
    expect(registered).toMatchObject([{ host: 'least-privilege' }]);
    expect(registered[0]!.stopped_at).not.toBeNull();
    // No warning beyond a fire that came before the runner had connected.
    expect(
      runner.lines
        .filter((l) => l.level >= 40)
        .map((l) => l.msg)
        .filter((m) => m !== 'fire not run: no connection to the database to coordinate it'),
    ).toEqual([]);
    const log = JSON.stringify(runner.lines) + runner.stderr;
    expect(log).toContain(`mysql://${USER}:***@127.0.0.1:3306/${db.name}`);
    expect(log).not.toContain(PASSWORD);
    for (const row of await runs(db, 'printenv'))
      expect(row.output_tail ?? '').not.toContain(PASSWORD);
  });

  it('masks the password and secretEnv values in the kept output, even cut across reads', async () => {
    const result = await baton(['run', 'leaky', '--config', config], {
      env: { BATON_DATABASE_URL: url },
    });
    expect(result.code, result.stderr).toBe(0);
    const [row] = await runs(db, 'leaky');
    const stored = await db.query<{ data: Buffer; stream: number }>(
      'SELECT data, stream FROM baton_run_output WHERE run_id = ? ORDER BY seq',
      [row!.id],
    );
    const stream = (n: number) =>
      stored
        .filter((r) => r.stream === n)
        .map((r) => r.data.toString())
        .join('');
    expect(stream(1)).toBe('password=*** token=***\nsplit=***\n');
    expect(stream(2)).toBe('token on stderr: ***\n*** end\n');
    // Nowhere in the database: not in the output, the tail or any other column.
    const dump = JSON.stringify([
      await db.query('SELECT * FROM baton_runs'),
      stored.map((r) => r.data.toString('latin1')),
    ]);
    for (const secret of [PASSWORD, TOKEN]) expect(dump).not.toContain(secret);
    // `baton logs` reads it back masked.
    const logs = await baton(['logs', String(row!.id), '--database-url', url]);
    expect(logs.stdout).toContain('password=*** token=***');
    expect(logs.stdout + logs.stderr).not.toContain(PASSWORD);
  });

  it('tells a failure with only the runtime grants, the password and secretEnv masked', async () => {
    const receiver = await WebhookReceiver.start();
    const notifying = writeSchedule(`
notify:
  ops: {webhook: {urlFromEnv: HOOK_URL}}
jobs:
  leaks-and-fails:
    schedule: "*/2 * * * * *"
    env: {LEAK: "${PASSWORD}", TOKEN: "${TOKEN}"}
    secretEnv: [TOKEN]
    command: ["sh", "-c", 'echo "password=$LEAK token=$TOKEN"; exit 2']
    notify: {to: [ops], on: [failed]}
`);
    const runner = startRunner({
      config: notifying,
      databaseUrl: url,
      host: 'grants-notify',
      env: { HOOK_URL: receiver.url('/hook') },
    });
    try {
      await runner.ready();
      const told = await waitFor('a failure told', () => receiver.accepted()[0], {
        timeoutMs: 20_000,
      });
      expect(told.body).toMatchObject({ event: 'failed', job: 'leaks-and-fails', exitCode: 2 });
      expect(String(told.body.output)).toContain('password=*** token=***');
      const everything = JSON.stringify([
        receiver.requests.map((r) => r.body),
        await db.query('SELECT * FROM baton_notifications'),
        runner.lines,
        runner.stderr,
      ]);
      for (const secret of [PASSWORD, TOKEN]) expect(everything).not.toContain(secret);
    } finally {
      await runner.stop();
      await receiver.down();
    }
  });

  it('keeps the password out of --help, even when it is in the environment', async () => {
    for (const args of [['--help'], ['start', '--help'], ['run', '--help'], ['status', '--help']]) {
      const result = await baton(args, { env: { BATON_DATABASE_URL: url } });
      expect(result.code, args.join(' ')).toBe(0);
      expect(result.stdout + result.stderr, args.join(' ')).not.toContain(PASSWORD);
    }
  });

  it('is refused clearly (exit 69, no password) when it may not create the schema', async () => {
    const fresh = url.replace(db.name, `${db.name}_x`);
    const result = await baton(['migrate', '--database-url', fresh]);
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/denied/i);
    expect(result.stderr).not.toContain(PASSWORD);
  });

  it('reads its URL from a file or a systemd credential, so the password need not be in the environment', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-credentials-'));
    writeFileSync(path.join(dir, 'database-url'), `${url}\n`, { mode: 0o600 });
    const file = path.join(dir, 'database-url');
    // --database-url-file, BATON_DATABASE_URL_FILE, and $CREDENTIALS_DIRECTORY/database-url
    // (LoadCredential=database-url:…); the manual run's job sees neither the password nor
    // the credentials' folder.
    const ways: [string[], Record<string, string>][] = [
      [['--database-url-file', file], {}],
      [[], { BATON_DATABASE_URL_FILE: file }],
      [[], { CREDENTIALS_DIRECTORY: dir }],
    ];
    for (const [args, env] of ways) {
      const result = await baton(['run', 'printenv', '--config', config, ...args], { env });
      const what = JSON.stringify([args, env]);
      expect(result.code, `${what}: ${result.stderr}`).toBe(0);
      expect(result.stdout + result.stderr, what).not.toContain(PASSWORD);
    }
    const tails = (await runs(db, 'printenv')).slice(-3).map((r) => r.output_tail ?? '');
    for (const tail of tails) {
      expect(tail).toContain('BATON_JOB=printenv');
      expect(tail).not.toContain(PASSWORD);
      expect(tail).not.toContain('CREDENTIALS_DIRECTORY');
    }
    // A missing or empty file is a usage error (64) that names the file, never its contents.
    const missing = await baton(['history', '--database-url-file', path.join(dir, 'nope')]);
    expect(missing.code).toBe(64);
    expect(missing.stderr).toContain(
      `--database-url-file ${path.join(dir, 'nope')}: cannot read: file not found`,
    );
    writeFileSync(path.join(dir, 'bad'), `not a url ${PASSWORD}\n`);
    const bad = await baton(['history', '--database-url-file', path.join(dir, 'bad')]);
    expect(bad.code).toBe(64);
    expect(bad.stderr).toContain('is not a valid URL');
    expect(bad.stderr).not.toContain(PASSWORD);
    // A '%' not percent-encoded (issue 34): a usage error too, not an internal error (70).
    const percent = await baton([
      'history',
      '--database-url',
      `mysql://batch:50%off-${PASSWORD}@127.0.0.1:3306/baton`,
    ]);
    expect(percent.code, percent.stderr).toBe(64);
    expect(percent.stderr).toContain("--database-url: the password contains a '%'");
    expect(percent.stderr).not.toContain(PASSWORD);
    expect(percent.stderr).not.toMatch(/internal error|\n\s+at /);
  });
});
