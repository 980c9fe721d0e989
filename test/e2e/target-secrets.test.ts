/**
 * The secrets of the notification targets stay out of what jobs leave behind (issue 34, item 4).
 * A webhook's URL (its path and query carry the token), an SMTP URL's password and a secret header
 * value are the runner's: the variables that hold them (`urlFromEnv`, `smtpFromEnv`) reach no job
 * — command, module in a warm host, `baton run` — and a job that prints them anyway (a literal,
 * a file) finds them masked in `baton_run_output`, `output_tail`, the log, the notifications it
 * causes and the failure messages of the other targets.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { runs, type RunRow } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const fleet = useFleet('target_secrets');
const hex = () => randomBytes(8).toString('hex');
const HOOK_TOKEN = `hooktok${hex()}`;
const HOOK_SIG = `sig${hex()}`;
const SMTP_PASSWORD = `smtppw${hex()}`;
const HEADER_TOKEN = `hdrtok${hex()}`;
/** The variables' names are checked too: a job must not even learn that they exist. */
const HOOK_VAR = 'OPS_HOOK_URL';
const SMTP_VAR = 'OPS_SMTP_URL';
const SMTP_URL = `smtp://alerts:${SMTP_PASSWORD}@127.0.0.1:9/`;

let receiver: WebhookReceiver;
let hookUrl: string;

/** Prints what it was given, then the secrets as literals, the way a careless job would. */
const LITERALS = () => [
  `hook=${hookUrl}`,
  `smtp-password=${SMTP_PASSWORD}`,
  `auth=Bearer ${HEADER_TOKEN}`,
];

function schedule(jobs: string): string {
  return `
notify:
  hook:
    webhook:
      urlFromEnv: ${HOOK_VAR}
      headers: {Authorization: "Bearer ${HEADER_TOKEN}"}
  mail: {email: {smtpFromEnv: ${SMTP_VAR}, from: baton@example.com, to: ops@example.com}}
  # Fails quoting the end of the event it was given (the job's output) on stderr, and another
  # target's URL it knows: its failure message, kept in the outbox's last_error, quotes both.
  echo:
    command: ${JSON.stringify([
      process.execPath,
      '-e',
      "let s='';process.stdin.on('data',(d)=>(s+=d)).on('end',()=>{" +
        `process.stderr.write(String(JSON.parse(s).output).slice(-180)+' own='+${JSON.stringify(hookUrl)});` +
        'process.exit(3)})',
    ])}
jobs:
${jobs}`;
}

const secretEnv = () => ({ [HOOK_VAR]: hookUrl, [SMTP_VAR]: SMTP_URL });

/** Every form a leak could take: the values, their parts, and the variables' names. */
function expectNoSecret(where: string, text: string): void {
  for (const secret of [HOOK_TOKEN, HOOK_SIG, SMTP_PASSWORD, HEADER_TOKEN, HOOK_VAR, SMTP_VAR]) {
    expect(text, `${where} holds ${secret}`).not.toContain(secret);
  }
}

async function storedOutput(run: RunRow): Promise<string> {
  const chunks = await fleet.db.query<{ data: Buffer }>(
    'SELECT data FROM baton_run_output WHERE run_id = ? ORDER BY stream, seq',
    [run.id],
  );
  return chunks.map((c) => c.data.toString()).join('');
}

/** The job ran and printed: its environment and the literals, masked. */
async function expectMaskedRun(run: RunRow): Promise<void> {
  const output = await storedOutput(run);
  expectNoSecret(`baton_run_output of run ${run.id}`, output);
  expectNoSecret(`output_tail of run ${run.id}`, run.output_tail ?? '');
  expect(output).toContain('PATH=');
  expect(output).toContain('hook=***');
  expect(output).toContain('smtp-password=***');
  expect(output).toContain('auth=***');
}

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  hookUrl = receiver.url(`/hooks/${HOOK_TOKEN}?sig=${HOOK_SIG}`);
});
afterAll(async () => {
  await receiver.down();
});

describe('notification targets configured through urlFromEnv and smtpFromEnv', () => {
  let runner: RunnerProcess;
  let config: string;

  beforeAll(async () => {
    config = writeSchedule(
      schedule(`
  printenv:
    schedule: "* * * * * *"
    command: ["sh", "leak.sh"]
    output: {log: true}
    notify: {to: [hook, echo], on: [failed]}
  modenv:
    schedule: "* * * * * *"
    module: leak.mjs
    output: {log: true}
`),
      {
        'leak.sh': ['env', ...LITERALS().map((l) => `echo '${l}'`), 'exit 1'].join('\n'),
        // The whole environment the process started with (a warm host's, from before the fire)
        // and the one it runs with, then the literals.
        'leak.mjs': `import { readFileSync } from 'node:fs';
export default async () => {
  console.log('pid=' + process.pid);
  console.log(readFileSync('/proc/self/environ', 'utf8').split('\\0').join('\\n'));
  for (const [k, v] of Object.entries(process.env)) console.log(k + '=' + v);
  for (const line of ${JSON.stringify(LITERALS())}) console.log(line);
};
`,
      },
    );
    runner = (await fleet.start(['secrets-1'], { config, env: secretEnv() }))[0]!;
  });

  it('a command job that prints its environment and the secrets leaves none of them anywhere', async () => {
    const failed = await waitFor(
      'a failed run of printenv, told to both targets',
      async () => {
        const rows = await fleet.db.query<{ target: string; last_error: string | null }>(
          `SELECT target, last_error FROM baton_notifications
           WHERE subject = 'printenv' AND ((target = 'hook' AND status = 'sent')
             OR (target = 'echo' AND last_error IS NOT NULL))`,
        );
        return new Set(rows.map((r) => r.target)).size === 2 ? rows : undefined;
      },
      { timeoutMs: 30_000 },
    );
    // The command target did fail quoting the output it was given.
    const echoed = failed.find((r) => r.target === 'echo')!.last_error!;
    expectNoSecret("the command target's failure message", echoed);
    expect(echoed).toMatch(/exited with 3: .*auth=\*\*\* own=\*\*\*/);
    const done = (await runs(fleet.db, 'printenv')).filter(
      (r) => r.winner === 1 && r.status === 'failed',
    );
    expect(done.length).toBeGreaterThan(0);
    for (const run of done) await expectMaskedRun(run);
    expect(String(receiver.accepted()[0]!.body.output)).toContain('hook=***');
    expectNoSecret(
      'the notifications',
      JSON.stringify([
        await fleet.db.query('SELECT * FROM baton_notifications'),
        receiver.requests.map((r) => r.body),
      ]),
    );
    // Its output went to the runner's log too (`output: {log: true}`), masked.
    expect(runner.lines.some((l) => l.job === 'printenv' && l.line === 'hook=***')).toBe(true);
    expectNoSecret('the runner log', JSON.stringify(runner.lines) + runner.stderr);
  });

  it('a module job run by a warm host leaves none of them anywhere', async () => {
    const warm = await waitFor('a module run served by a warm host', async () => {
      for (const run of await runs(fleet.db, 'modenv')) {
        if (run.winner !== 1 || run.status !== 'done') continue;
        const pid = Number(/pid=(\d+)/.exec(await storedOutput(run))?.[1]);
        const served = runner.lines.some((l) => l.msg === 'module host warm' && l.hostPid === pid);
        if (served) return run;
      }
      return undefined;
    });
    await expectMaskedRun(warm);
    for (const run of (await runs(fleet.db, 'modenv')).filter((r) => r.status === 'done')) {
      await expectMaskedRun(run);
    }
    expectNoSecret('the runner log', JSON.stringify(runner.lines) + runner.stderr);
  });
});

describe('baton run', () => {
  it('gives the job none of the variables and keeps none of the secrets', async () => {
    const config = writeSchedule(
      schedule(`
  dump:
    schedule: "0 0 1 1 *"
    command: ["sh", "leak.sh"]
`),
      { 'leak.sh': ['env', ...LITERALS().map((l) => `echo '${l}'`)].join('\n') },
    );
    const result = await baton(
      ['run', 'dump', '--config', config, '--database-url', fleet.db.url],
      {
        env: secretEnv(),
      },
    );
    expect(result.code, result.stderr).toBe(0);
    // What the operator sees live is the job's own output: the variables are not in it.
    for (const name of [HOOK_VAR, SMTP_VAR]) expect(result.stdout).not.toContain(name);
    const [run] = await runs(fleet.db, 'dump');
    await expectMaskedRun(run!);
  });
});
