/**
 * What one `baton` invocation loads (src/cli/program.ts): a command names its own module only — not
 * the other commands', and not the SMTP client, which is imported by the first mail, nor
 * OpenTelemetry, imported by a runner only when tracing is configured — while help,
 * --version and anything that is not a command name load every command. Each name loads the
 * command of that name (its help is that command's). A runner (`baton start`, running fires)
 * does not load zod in its own thread: its config is checked in the loader's worker thread
 * (config/defaults.ts says why). The loaded files are recorded by a resolve hook registered with
 * `--import` (Node's module.register), in the real built CLI.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATON_BIN, command, startRunner, writeSchedule } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

/** Every command module under src/cli/commands, by file. */
const COMMAND_FILES = [
  'audit',
  'backfill',
  'blackout',
  'definitions',
  'explain',
  'history',
  'kill',
  'list',
  'logs',
  'migrate',
  'notifications',
  'pause',
  'prune',
  'run',
  'show',
  'start',
  'status',
  'validate',
];

/** The names one types, and the file each loads. */
const NAMES: Record<string, string> = {
  ...Object.fromEntries(COMMAND_FILES.map((f) => [f, f])),
  resume: 'pause',
  notify: 'notifications',
};

let dir: string;
let db: TestDatabase;
/** `--import` this to record what a process's main thread loads into $MODULES_FILE. */
let recorder: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'baton-modules-'));
  // The hooks run on a thread of their own: they append "pid url" for each resolved module.
  writeFileSync(
    path.join(dir, 'hooks.mjs'),
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(process.env.MODULES_FILE, process.pid + ' ' + resolved.url + '\\n');
  return resolved;
}
`,
  );
  // Registered by the main thread only: a worker thread's modules (the config loader's) are not
  // the main thread's.
  writeFileSync(
    path.join(dir, 'record.mjs'),
    `import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';
if (isMainThread) register(${JSON.stringify(pathToFileURL(path.join(dir, 'hooks.mjs')).href)});
`,
  );
  recorder = pathToFileURL(path.join(dir, 'record.mjs')).href;
  db = await createTestDatabase('cli_modules');
});

afterAll(async () => {
  await db?.drop();
});

/** The modules process `pid` loaded, as recorded in `file`. */
function modulesOf(file: string, pid: number | undefined): string[] {
  const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean);
  const own = lines.filter((l) => l.startsWith(`${pid} `)).map((l) => l.slice(l.indexOf(' ') + 1));
  return [...new Set(own)];
}

/** Runs `baton args` and returns its exit code, its stdout and the modules it loaded. */
async function loads(
  args: string[],
): Promise<{ code: number | null; stdout: string; commands: string[]; modules: string[] }> {
  const file = path.join(dir, `modules-${args.join('-')}.txt`);
  writeFileSync(file, '');
  const result = await command(process.execPath, ['--import', recorder, BATON_BIN, ...args], {
    env: { MODULES_FILE: file },
  });
  const modules = [
    ...new Set(
      readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => l.slice(l.indexOf(' ') + 1)),
    ),
  ];
  const commands = modules
    .map((url) => /\/dist\/cli\/commands\/([a-z-]+)\.js$/.exec(url)?.[1])
    .filter((name): name is string => name != null)
    .sort();
  return { code: result.code, stdout: result.stdout, commands, modules };
}

const from = (pkg: string, modules: string[]) =>
  modules.filter((url) => url.includes(`/node_modules/${pkg}/`));

describe('a baton invocation', () => {
  it('loads only the command it names, and no SMTP client', async () => {
    for (const name of ['status', 'start', 'history', 'resume']) {
      const { code, commands, modules } = await loads([name, '--help']);
      expect(code, name).toBe(0);
      expect(commands, name).toEqual([NAMES[name]]);
      expect(from('nodemailer', modules), name).toEqual([]);
      expect(from('@opentelemetry', modules), name).toEqual([]);
    }
  });

  it('loads every command for --help, --version and a name that is not a command', async () => {
    for (const args of [['--help'], ['--version'], ['stauts']]) {
      const { commands } = await loads(args);
      expect(commands, args.join(' ')).toEqual(COMMAND_FILES);
    }
  });

  it('gives each command name the help of that command', async () => {
    const every = await loads(['--help']);
    for (const name of Object.keys(NAMES)) {
      // `baton --help` lists each name the map must know.
      expect(every.stdout).toMatch(new RegExp(`^ {2}baton ${name}\\b`, 'm'));
      const alone = await command(process.execPath, [BATON_BIN, name, '--help']);
      expect(alone.code, name).toBe(0);
      expect(alone.stdout.split('\n')[0], name).toMatch(new RegExp(`^baton ${name}\\b`));
    }
  });

  /** Runs a runner with `env` until its first run finished; the modules its main thread loaded. */
  async function runnerModules(label: string, env: Record<string, string>): Promise<string[]> {
    const file = path.join(dir, `modules-runner-${label}.txt`);
    writeFileSync(file, '');
    const config = writeSchedule(`
namespace: modules-${label}
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const runner = startRunner({
      config,
      databaseUrl: db.url,
      host: `modules-${label}`,
      env: { ...env, NODE_OPTIONS: `--import=${recorder}`, MODULES_FILE: file },
    });
    try {
      await runner.waitForLog('run finished', undefined, 20_000);
    } finally {
      expect(await runner.stop('SIGTERM')).toBe(0);
    }
    return modulesOf(file, runner.child.pid);
  }

  it('as a runner, leaves zod, the SMTP client and OpenTelemetry out of its own thread while it runs fires', async () => {
    const modules = await runnerModules('plain', {});
    // The recorder saw the runner's modules: its database client among them.
    expect(from('mysql2', modules).length).toBeGreaterThan(0);
    expect(from('zod', modules)).toEqual([]);
    expect(from('nodemailer', modules)).toEqual([]);
    // No exporter configured: no tracing, and none of its SDK (docs/tracing.md).
    expect(from('@opentelemetry', modules)).toEqual([]);
  });

  it('as a runner with an OTLP endpoint, loads OpenTelemetry — and still no zod', async () => {
    // Nothing listens there: the spans are dropped, which the runner only logs.
    const modules = await runnerModules('traced', {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
      OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
    });
    expect(from('@opentelemetry', modules).length).toBeGreaterThan(0);
    expect(from('zod', modules)).toEqual([]);
  });
});
