/**
 * Guarantee 5: an invalid schedules.yaml is refused whole — exit 78, the file, line and job named,
 * no stack trace — and nothing is started (the runner never even creates its database).
 */
import mysql from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';

const UNUSED_DB = `baton_t_never_${process.pid}`;
const DB_URL = `mysql://root@127.0.0.1:3306/${UNUSED_DB}`;

afterAll(async () => {
  const conn = await mysql.createConnection({ uri: 'mysql://root@127.0.0.1:3306' });
  await conn.query('DROP DATABASE IF EXISTS ??', [UNUSED_DB]);
  await conn.end();
});

const LONG_NAME = 'x'.repeat(129);
const CASES: { name: string; yaml: string; line: number; expect: RegExp }[] = [
  {
    name: 'pools: a job naming an unknown pool',
    yaml: 'pools:\n  db: {slots: 2}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n    pool: warehouse\n',
    line: 7,
    expect: /jobs\.settle\.pool: unknown pool "warehouse" \(pools: db\)/,
  },
  {
    name: "pools: a pool named like one of every object's members (constructor)",
    yaml: 'pools:\n  db: {slots: 2}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n    pool: constructor\n',
    line: 7,
    expect: /jobs\.settle\.pool: unknown pool "constructor" \(pools: db\)/,
  },
  {
    name: 'pools: no slot at all',
    yaml: 'pools:\n  db: {slots: 0}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n    pool: db\n',
    line: 2,
    expect: /pools\.db\.slots: slots must be at least 1/,
  },
  {
    name: 'pools: an unknown scope, inherited from defaults by the job',
    yaml: 'pools:\n  db: {slots: 1, scope: rack}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n',
    line: 2,
    expect: /pools\.db\.scope: .*"fleet"\|"host"/,
  },
  {
    name: 'pools: an unknown pool given in defaults',
    yaml: 'pools:\n  db: {slots: 1}\ndefaults:\n  pool: dv\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n',
    line: 4,
    expect: /defaults\.pool: unknown pool "dv" \(pools: db\) \(inherited by jobs\.settle\)/,
  },
  {
    name: 'pools: poolFull without a pool',
    yaml: 'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n    poolFull: queue\n',
    line: 5,
    expect:
      /jobs\.settle\.poolFull: `poolFull` says what a fire does when its pool is full; set `pool` too/,
  },
  {
    name: 'pools: a fan-out job that would queue for its pool',
    yaml: 'pools:\n  db: {slots: 2}\njobs:\n  share:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n    workers: 2\n    pool: db\n    poolFull: queue\n',
    line: 9,
    expect: /jobs\.share\.poolFull: a fan-out job \(`workers` > 1\) cannot queue for its pool/,
  },
  {
    name: 'pools: a pool name with unsafe characters',
    yaml: 'pools:\n  "db:main": {slots: 2}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n',
    line: 2,
    expect: /pools\.db:main: pool name may contain only letters, digits/,
  },
  {
    name: 'notify: an unknown target',
    yaml: 'notify:\n  ops: {webhook: {url: "https://hooks.example/x"}}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n    notify: {to: [opps]}\n',
    line: 7,
    expect: /jobs\.settle\.notify\.to: unknown notification target "opps" \(targets: ops\)/,
  },
  {
    name: 'notify: an unknown event',
    yaml: 'notify:\n  ops: {webhook: {url: "https://hooks.example/x"}}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n    notify:\n      to: [ops]\n      on: [failed, exploded]\n',
    line: 9,
    expect: /jobs\.settle\.notify\.on\.1: .*"failed"\|"timeout"/,
  },
  {
    name: 'notify: a webhook URL that is not http(s), never echoed',
    yaml: 'notify:\n  ops:\n    webhook: {url: "ftp://user:pw-9f2@hooks.example/x"}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n',
    line: 3,
    expect: /notify\.ops\.webhook\.url: `url` is not an http\(s\) URL$/m,
  },
  {
    name: 'notify: a URL variable that is not set',
    yaml: 'notify:\n  ops:\n    webhook: {urlFromEnv: BATON_T_UNSET_HOOK}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n',
    line: 3,
    expect: /notify\.ops\.webhook\.urlFromEnv: environment variable BATON_T_UNSET_HOOK is not set/,
  },
  {
    name: 'YAML syntax error',
    yaml: 'jobs:\n  settle:\n    schedule: "0 3 * * *\n    command: [a]\n',
    line: 3,
    expect: /jobs\.settle/,
  },
  {
    name: 'unknown key (a typo)',
    yaml: 'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    comand: ["/bin/true"]\n',
    line: 4,
    expect: /jobs\.settle\.comand: unknown key "comand"/,
  },
  {
    name: 'unknown top-level key',
    yaml: 'jobz: {}\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n',
    line: 1,
    expect: /jobz: unknown key "jobz"/,
  },
  {
    name: 'bad cron expression',
    yaml: 'jobs:\n  settle:\n    schedule: "61 3 * * *"\n    command: ["/bin/true"]\n',
    line: 3,
    expect: /jobs\.settle\.schedule: invalid cron expression "61 3 \* \* \*"/,
  },
  {
    name: 'unknown time zone',
    yaml: 'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    timezone: Asia/Seol\n    command: ["/bin/true"]\n',
    line: 4,
    expect: /jobs\.settle\.timezone: unknown time zone "Asia\/Seol"/,
  },
  {
    name: 'unknown time zone in defaults',
    yaml: 'defaults:\n  timezone: Mars/Olympus\njobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n',
    line: 2,
    expect: /defaults\.timezone: unknown time zone "Mars\/Olympus" .*\(inherited by jobs\.settle\)/,
  },
  {
    name: 'both command and module',
    yaml: 'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n    module: x.ts\n',
    line: 5,
    expect: /jobs\.settle\.module: set either `command` or `module`, not both/,
  },
  {
    name: 'neither command nor module',
    yaml: 'jobs:\n  settle:\n    schedule: "0 3 * * *"\n',
    line: 2,
    expect: /jobs\.settle: missing `command` or `module`/,
  },
  {
    name: 'missing module file',
    yaml: 'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    module: jobs/nowhere.ts\n',
    line: 4,
    expect: /jobs\.settle\.module: module file not found: .*jobs\/nowhere\.ts/,
  },
  {
    name: 'catchUp fires neither latest nor all',
    yaml: 'jobs:\n  settle:\n    schedule: "0 * * * *"\n    command: ["/bin/true"]\n    catchUp:\n      window: 6h\n      fires: every\n',
    line: 7,
    expect: /jobs\.settle\.catchUp\.fires: .*"latest"\|"all"/,
  },
  {
    name: 'catchUp window missing',
    yaml: 'jobs:\n  settle:\n    schedule: "0 * * * *"\n    command: ["/bin/true"]\n    catchUp:\n      fires: all\n',
    line: 5,
    expect: /jobs\.settle\.catchUp\.window: required: a duration/,
  },
  {
    name: 'jitter not shorter than the shortest period',
    yaml: 'jobs:\n  settle:\n    schedule: "0 9,10 * * *"\n    command: ["/bin/true"]\n    jitter: 1h\n',
    line: 5,
    expect:
      /jobs\.settle\.jitter: jitter 1h is not shorter than the schedule's shortest period \(1h between fires\)/,
  },
  {
    name: 'string command without shell: true',
    yaml: 'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: "/opt/settle.sh --day yesterday"\n',
    line: 4,
    expect: /jobs\.settle\.command: a string command runs through a shell/,
  },
  {
    name: 'job name the history could not store whole',
    yaml: `jobs:\n  ${LONG_NAME}:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n`,
    line: 2,
    expect: new RegExp(`jobs\\.${LONG_NAME}: job name is longer than 128 characters`),
  },
  {
    name: 'job name with unsafe characters',
    yaml: 'jobs:\n  "settle; DROP TABLE baton_runs":\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n',
    line: 2,
    expect: /job name may contain only letters, digits/,
  },
  {
    name: 'duplicate job',
    yaml: 'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n  settle:\n    schedule: "0 4 * * *"\n    command: ["/bin/true"]\n',
    line: 5,
    expect: /jobs\.settle: duplicate key/,
  },
  {
    name: 'duplicate top-level key',
    yaml: 'jobs:\n  a:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\njobs:\n  b:\n    schedule: "0 4 * * *"\n    command: ["/bin/true"]\n',
    line: 5,
    expect: /:5:1: jobs: duplicate key/,
  },
  {
    name: 'wrong type',
    yaml: 'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n    enabled: "sometimes"\n',
    line: 5,
    expect: /jobs\.settle\.enabled: expected boolean/,
  },
];

describe('invalid schedules.yaml', () => {
  for (const c of CASES) {
    it(`${c.name}: exit 78 with file:line and the job`, async () => {
      const file = writeSchedule(c.yaml);
      const result = await baton(['validate', '--config', file]);
      expect(result.code).toBe(78);
      expect(result.stderr).toContain(`${file}:${c.line}:`);
      expect(result.stderr).toMatch(c.expect);
      expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
      expect(result.stdout).toBe('');
    });
  }

  it('reports every problem of a file at once', async () => {
    const file = writeSchedule(
      'jobs:\n  a:\n    schedule: "bogus"\n    command: ["/bin/true"]\n  b:\n    schedule: "0 3 * * *"\n    timezone: Nowhere/Land\n    command: "x"\n',
    );
    const result = await baton(['validate', '--config', file]);
    expect(result.code).toBe(78);
    expect(result.stderr).toContain('3 problems');
    expect(result.stderr).toContain(`${file}:3:`);
    expect(result.stderr).toContain(`${file}:7:`);
    expect(result.stderr).toContain(`${file}:8:`);
  });

  it('names a bad value of an expression as written, and refused syntax, at its line', async () => {
    const file = writeSchedule(
      [
        'jobs:',
        '  a:',
        '    schedule: "0 0 32 * *"',
        '    command: ["/bin/true"]',
        '  b:',
        '    schedule: "? 3 * * *"',
        '    command: ["/bin/true"]',
        '  c:',
        '    schedule: "0 3 1 * +MON"',
        '    command: ["/bin/true"]',
        '',
      ].join('\n'),
    );
    const result = await baton(['validate', '--config', file]);
    expect(result.code).toBe(78);
    expect(result.stderr).toContain(
      `${file}:3:5: jobs.a.schedule: invalid cron expression "0 0 32 * *": invalid value for day-of-month: 32`,
    );
    expect(result.stderr).toMatch(
      new RegExp(`${file}:6:\\d+: jobs\\.b\\.schedule: .*write \`\\*\` in the minute field`),
    );
    expect(result.stderr).toMatch(
      new RegExp(
        `${file}:9:\\d+: jobs\\.c\\.schedule: .*\`\\+\` in day-of-week is not cron syntax`,
      ),
    );
    expect(result.stdout).toBe('');
  });

  it('a missing file is exit 78 too', async () => {
    const result = await baton(['validate', '--config', '/nonexistent/schedules.yaml']);
    expect(result.code).toBe(78);
    expect(result.stderr).toContain('/nonexistent/schedules.yaml: cannot read: file not found');
  });

  it('`baton start` with an invalid file exits 78 before touching the database', async () => {
    // One valid job beside the invalid one: refused whole, the valid one does not start alone.
    const file = writeSchedule(
      `${CASES[3]!.yaml}  fine:\n    schedule: "* * * * * *"\n    command: ["true"]\n`,
    );
    const result = await baton(['start', '--config', file, '--database-url', DB_URL]);
    expect(result.code).toBe(78);
    expect(result.stderr).toMatch(CASES[3]!.expect);
    const conn = await mysql.createConnection({ uri: 'mysql://root@127.0.0.1:3306' });
    const [rows] = await conn.query('SHOW DATABASES LIKE ?', [UNUSED_DB]);
    await conn.end();
    expect(rows).toEqual([]);
  });

  it('`baton validate` on the example schedule succeeds and lists its jobs', async () => {
    const result = await baton(['validate']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/hello: "\* \* \* \* \*" UTC/);
    expect(result.stdout).toMatch(/cleanup \(disabled\)/);
  });
});

describe('validate --json, and shell completion', () => {
  it('prints the verdict as JSON either way, with the same exit codes', async () => {
    const good = await baton(['validate', '--json']);
    expect(good.code).toBe(0);
    const verdict = JSON.parse(good.stdout) as { valid: boolean; jobs: { name: string }[] };
    expect(verdict.valid).toBe(true);
    expect(verdict.jobs.map((j) => j.name)).toContain('hello');

    const file = writeSchedule(CASES[3]!.yaml);
    const bad = await baton(['validate', '--json', '--config', file]);
    expect(bad.code).toBe(78);
    const problems = JSON.parse(bad.stdout) as { valid: boolean; problems: { line: number }[] };
    expect(problems.valid).toBe(false);
    expect(problems.problems[0]).toMatchObject({ file, line: CASES[3]!.line });
  });

  it('`baton completion` prints a script, and completes commands and options', async () => {
    const script = await baton(['completion']);
    expect(script.code).toBe(0);
    expect(script.stdout).toContain('###-begin-baton-completions-###');
    const commands = await baton(['--get-yargs-completions', 'baton', 'st']);
    expect(commands.stdout.split('\n')).toEqual(expect.arrayContaining(['start', 'status']));
    const options = await baton(['--get-yargs-completions', 'baton', 'history', '--li']);
    expect(options.stdout).toContain('--limit');
  });
});

describe('database problems', () => {
  it('an unreachable server is exit 69, with the password masked', async () => {
    const file = writeSchedule(
      'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n',
    );
    const result = await baton([
      'run',
      'settle',
      '--config',
      file,
      '--database-url',
      'mysql://batch:hunter2secret@127.0.0.1:1/baton',
    ]);
    expect(result.code).toBe(69);
    expect(result.stderr).toContain('mysql://batch:***@127.0.0.1:1/baton');
    expect(result.stderr + result.stdout).not.toContain('hunter2secret');
  });

  it('a wrong password is exit 69 and the password is not printed', async () => {
    const file = writeSchedule(
      'jobs:\n  settle:\n    schedule: "0 3 * * *"\n    command: ["/bin/true"]\n',
    );
    const result = await baton(['migrate', '--config', file], {
      env: { BATON_DATABASE_URL: 'mysql://nobody:wrong-pass-42@127.0.0.1:3306/baton' },
    });
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/Access denied/);
    expect(result.stderr + result.stdout).not.toContain('wrong-pass-42');
  });
});
