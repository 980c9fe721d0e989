/**
 * The deployment files (deploy/, .dockerignore) checked against what they depend on: the files
 * they name exist, the commands and flags they use are the CLI's, and the stop timeouts leave the
 * runner time to drain. No container engine runs here (deploy/README.md says what was verified by
 * hand); these checks catch the breakage that a rename in the code would cause silently.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseDuration } from '../../src/config/duration.js';
import { ExitCode } from '../../src/exit-codes.js';
import { checkHttpToken, parseListenAddress } from '../../src/http/address.js';
import { baton, ROOT } from '../helpers/cli.js';

const DEPLOY = path.join(ROOT, 'deploy');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const packageJson = JSON.parse(read('package.json')) as { bin: { baton: string }; files: string[] };
/**
 * The built CLI, which the services start directly: the package's `baton` binary is a launcher
 * (bin/baton.js, for a clone not built yet) that runs it.
 */
const BUILT_CLI = 'dist/cli/main.js';
/** The kill grace the runner gives a job it stops: SIGTERM, then SIGKILL this much later. */
const KILL_GRACE_S = 5;

/** Every BATON_* variable and every `--flag` that `baton start --help` documents. */
let startHelp = '';
beforeAll(async () => {
  const help = await baton(['start', '--help']);
  expect(help.code).toBe(0);
  startHelp = help.stdout;
});
const knownFlag = (flag: string) => new RegExp(`^\\s+${flag}\\s`, 'm').test(startHelp);
const knownVariable = (name: string) => new RegExp(`\\b${name}\\b`).test(startHelp);

// --- Dockerfile ----------------------------------------------------------------------------------

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  from: string;
  name: string | null;
  instructions: Instruction[];
}

function dockerStages(text: string): Stage[] {
  const stages: Stage[] = [];
  for (const line of text.replace(/\\\n/g, ' ').split('\n')) {
    const trimmed = line.trim();
    if (!trimmed || trimmed.startsWith('#')) continue;
    const [op = '', ...rest] = trimmed.split(/\s+/);
    if (op.toUpperCase() === 'FROM') {
      stages.push({ from: rest[0]!, name: rest[2] ?? null, instructions: [] });
    } else {
      stages.at(-1)!.instructions.push({ op: op.toUpperCase(), args: rest.join(' ') });
    }
  }
  return stages;
}

const all = (stage: Stage, op: string) =>
  stage.instructions.filter((i) => i.op === op).map((i) => i.args);
const last = (stage: Stage, op: string) => all(stage, op).at(-1);

describe('deploy/Dockerfile', () => {
  const stages = dockerStages(read('deploy/Dockerfile'));
  const [build, runtime] = [stages[0]!, stages.at(-1)!];

  it('builds with the dev dependencies and ships production dependencies only', () => {
    expect(stages).toHaveLength(2);
    for (const stage of stages) expect(stage.from).toBe('node:20-bookworm-slim');
    const buildRuns = all(build, 'RUN').join('\n');
    expect(buildRuns).toMatch(/npm ci\b/);
    expect(buildRuns).toMatch(/npm run build\b/);
    expect(all(runtime, 'RUN').join('\n')).toMatch(/npm ci --omit=dev --ignore-scripts\b/);
    // tsx, an optional peer (a dev dependency of the repository), for TypeScript module jobs.
    expect(all(runtime, 'RUN').join('\n')).toMatch(/npm install --prefix \/opt .*\btsx@/s);
  });

  it('starts the file the build produces, which the package’s baton binary runs', () => {
    expect(read(packageJson.bin.baton)).toContain(`'../${BUILT_CLI}'`);
    const argv = [
      ...(JSON.parse(last(runtime, 'ENTRYPOINT') ?? '[]') as string[]),
      ...(JSON.parse(last(runtime, 'CMD') ?? '[]') as string[]),
    ];
    const main = argv.find((arg) => arg.endsWith('.js'));
    expect(argv.slice(argv.indexOf(main!) - 1)).toEqual([
      'node',
      `/opt/baton/${BUILT_CLI}`,
      'start',
    ]);
    // dist/cli/main.js is compiled from src/cli/main.ts (tsconfig.build.json: src → dist).
    const tsconfig = JSON.parse(read('tsconfig.build.json')) as {
      compilerOptions: { rootDir: string; outDir: string };
    };
    const source = BUILT_CLI.replace(
      tsconfig.compilerOptions.outDir,
      tsconfig.compilerOptions.rootDir,
    ).replace(/\.js$/, '.ts');
    expect(existsSync(path.join(ROOT, source)), source).toBe(true);
    // The runtime holds everything the npm package ships to run: the build and the migrations
    // (the docs are for the package's readers; `!…` entries leave files out).
    const copies = all(runtime, 'COPY').join('\n');
    for (const shipped of packageJson.files.filter(
      (f) => !f.startsWith('!') && !f.endsWith('.md'),
    )) {
      expect(copies, `the runtime stage copies ${shipped}`).toMatch(
        new RegExp(`(^|\\s|/)${shipped}(\\s|$)`, 'm'),
      );
    }
  });

  it('runs as a non-root user, stops with SIGTERM, and has /bin/sh for jobs and the watchdog', () => {
    const user = last(runtime, 'USER');
    expect(user).toBeDefined();
    expect(user!.split(':')[0]).not.toMatch(/^(root|0)$/);
    expect(last(runtime, 'STOPSIGNAL')).toBe('SIGTERM');
    // Shell jobs and the run watchdog are /bin/sh: no distroless or scratch base.
    expect(runtime.from).not.toMatch(/distroless|scratch/);
  });

  it('copies only files that exist and that .dockerignore lets into the build context', () => {
    const allowed = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l.startsWith('!'))
      .map((l) => l.slice(1).replace(/\/$/, ''));
    expect(read('.dockerignore')).toMatch(/^\*$/m); // an allowlist: everything else stays out
    for (const stage of stages) {
      for (const args of all(stage, 'COPY')) {
        if (args.startsWith('--from=')) continue;
        for (const source of args.split(/\s+/).slice(0, -1)) {
          expect(existsSync(path.join(ROOT, source)), `${source} exists`).toBe(true);
          const inContext = allowed.some((a) => source === a || source.startsWith(`${a}/`));
          expect(inContext, `${source} is allowed by .dockerignore`).toBe(true);
        }
      }
    }
  });

  it('sets only variables and a healthcheck that baton knows', () => {
    for (const env of all(runtime, 'ENV')) {
      const name = env.split('=')[0]!;
      if (name.startsWith('BATON_')) expect(knownVariable(name), name).toBe(true);
    }
    expect(last(runtime, 'HEALTHCHECK')).toContain('/opt/baton/deploy/healthcheck.mjs');
    expect(all(runtime, 'COPY').join('\n')).toContain('deploy/healthcheck.mjs');
  });
});

// --- compose.yaml --------------------------------------------------------------------------------

interface ComposeService {
  build?: { context: string; dockerfile: string };
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  stop_grace_period?: string;
}

/** `${NAME:-default}` as compose interpolates it with NAME unset. */
const interpolated = (value: string) => value.replace(/\$\{\w+:-([^}]*)\}/g, '$1');

describe('deploy/compose.yaml', () => {
  const compose = parse(read('deploy/compose.yaml'), { merge: true }) as {
    services: Record<string, ComposeService>;
  };
  const runners = Object.entries(compose.services).filter(([, s]) => s.command?.[0] === 'start');

  it('runs two runners with different names, each with its own host port on 127.0.0.1', () => {
    expect(runners.map(([name]) => name)).toHaveLength(2);
    const hosts = runners.map(([, s]) => s.environment?.BATON_HOST);
    expect(new Set(hosts).size).toBe(2);
    const published = runners.flatMap(([, s]) => s.ports ?? []);
    expect(published).toHaveLength(2);
    for (const port of published) expect(port).toMatch(/^127\.0\.0\.1:\d+:9464$/);
    expect(new Set(published.map((p) => p.split(':')[1])).size).toBe(2);
  });

  it('names files that exist, and every runner mounts the same schedule where the image reads it', () => {
    const mounts = new Set<string>();
    for (const [name, service] of Object.entries(compose.services)) {
      if (service.build) {
        const context = path.resolve(DEPLOY, service.build.context);
        expect(existsSync(path.join(context, service.build.dockerfile)), name).toBe(true);
      }
      for (const volume of service.volumes ?? []) {
        const [source] = volume.split(':');
        if (!source!.startsWith('.')) continue; // a named volume
        expect(existsSync(path.resolve(DEPLOY, source!)), `${name}: ${source}`).toBe(true);
        if (service.command?.[0] === 'start') mounts.add(volume);
      }
    }
    expect([...mounts]).toHaveLength(1);
    const runtime = dockerStages(read('deploy/Dockerfile')).at(-1)!;
    const config = all(runtime, 'ENV').find((e) => e.startsWith('BATON_CONFIG='));
    expect([...mounts][0]).toContain(`:${config!.split('=')[1]}:ro`);
  });

  it('points the runners at the database service, started once it is healthy', () => {
    for (const [name, service] of runners) {
      const url = new URL(service.environment!.BATON_DATABASE_URL!);
      const database = compose.services[url.hostname];
      expect(database, `${name}: the database service ${url.hostname}`).toBeDefined();
      expect(database!.healthcheck?.test.length).toBeGreaterThan(0);
      expect(service.depends_on?.[url.hostname]?.condition).toBe('service_healthy');
    }
  });

  it('gives each runner a stop grace beyond --grace plus the kill grace', () => {
    for (const [name, service] of runners) {
      const grace = Number(service.command![service.command!.indexOf('--grace') + 1]);
      expect(grace, name).toBeGreaterThan(0);
      const stopMs = parseDuration(service.stop_grace_period ?? '10s')!;
      expect(stopMs, name).toBeGreaterThan((grace + KILL_GRACE_S) * 1000);
    }
  });

  it('uses only flags and variables baton knows, with a token where it listens wide', () => {
    for (const [name, service] of runners) {
      for (const arg of service.command!)
        if (arg.startsWith('--')) expect(knownFlag(arg)).toBe(true);
      const env = service.environment!;
      for (const key of Object.keys(env)) expect(knownVariable(key), `${name}: ${key}`).toBe(true);
      const address = parseListenAddress(env.BATON_HTTP!);
      expect(() => checkHttpToken(address, interpolated(env.BATON_HTTP_TOKEN ?? ''))).not.toThrow();
    }
  });

  it('mounts a schedule that baton validate accepts', async () => {
    const mount = runners[0]![1].volumes!.find((v) => v.endsWith(':/etc/baton/schedules.yaml:ro'));
    const file = path.resolve(DEPLOY, mount!.split(':')[0]!);
    const result = await baton(['validate', '--config', file]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });
});

// --- baton.service -------------------------------------------------------------------------------

/** `[Service]` keys of a unit file; a key given twice keeps every value. */
function unitSection(text: string, section: string): Map<string, string[]> {
  const keys = new Map<string, string[]>();
  let current = '';
  for (const line of text.split('\n')) {
    const header = /^\[(\w+)\]$/.exec(line.trim());
    if (header) current = header[1]!;
    const entry = /^(\w+)=(.*)$/.exec(line);
    if (current === section && entry) {
      keys.set(entry[1]!, [...(keys.get(entry[1]!) ?? []), entry[2]!]);
    }
  }
  return keys;
}

describe('deploy/baton.service', () => {
  const unitText = read('deploy/baton.service');
  const service = unitSection(unitText, 'Service');
  const execStart = service.get('ExecStart')![0]!.split(/\s+/);

  it('starts the built CLI and waits for the drain longer than --grace plus the kill grace', () => {
    expect(execStart.slice(1, 3)).toEqual([`/opt/baton/${BUILT_CLI}`, 'start']);
    const grace = Number(execStart[execStart.indexOf('--grace') + 1]);
    expect(grace).toBeGreaterThan(0);
    const stopSeconds = Number(service.get('TimeoutStopSec')![0]);
    expect(stopSeconds).toBeGreaterThan(grace + KILL_GRACE_S);
    expect(service.get('ExecReload')![0]).toMatch(/kill -HUP \$MAINPID/);
  });

  it('uses only flags and variables baton knows, and does not restart what cannot heal', () => {
    for (const arg of execStart) if (arg.startsWith('--')) expect(knownFlag(arg), arg).toBe(true);
    for (const setting of service.get('Environment') ?? []) {
      const name = setting.split('=')[0]!;
      expect(knownVariable(name), name).toBe(true);
    }
    const noRestart = service.get('RestartPreventExitStatus')![0]!.split(/\s+/).map(Number);
    expect(noRestart.sort()).toEqual([ExitCode.Usage, ExitCode.Config].sort());
  });

  it("has an operator's wrapper that runs the same program, as the same user, with the same settings", () => {
    const wrapper = read('deploy/baton-cli.sh');
    expect(spawnSync('sh', ['-n', path.join(DEPLOY, 'baton-cli.sh')]).status).toBe(0);
    expect(wrapper).toContain(`. ${service.get('EnvironmentFile')![0]}`);
    expect(wrapper).toContain(`cd ${service.get('WorkingDirectory')![0]}`);
    expect(wrapper).toContain(
      `runuser -u ${service.get('User')![0]} -- ${execStart.slice(0, 2).join(' ')} "$@"`,
    );
  });

  const analyze = spawnSync('systemd-analyze', ['--version']);
  it.skipIf(analyze.error != null)(
    'passes systemd-analyze verify (skipped where systemd-analyze is not installed)',
    () => {
      // verify checks that ExecStart's program exists: where node is not at /usr/bin/node (nvm,
      // the node images' /usr/local/bin), the copy checked names this machine's node instead.
      let unit = path.join(DEPLOY, 'baton.service');
      if (!existsSync('/usr/bin/node')) {
        unit = path.join(mkdtempSync(path.join(os.tmpdir(), 'baton-unit-')), 'baton.service');
        writeFileSync(unit, unitText.replace('/usr/bin/node ', `${process.execPath} `));
      }
      const result = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
      // Unknown keys and unparsable values are only warnings (exit 0): fail on them too.
      const aboutUnit = result.stderr.split('\n').filter((l) => l.includes('baton.service'));
      expect(aboutUnit).toEqual([]);
      expect(result.status).toBe(0);
    },
  );
});

// --- deploy/healthcheck.mjs ----------------------------------------------------------------------

describe('deploy/healthcheck.mjs', () => {
  const script = path.join(DEPLOY, 'healthcheck.mjs');

  /** A real HTTP server answering /healthz with `status`; returns its port and what it saw. */
  async function healthz(status: number) {
    const seen: { path?: string; headers?: IncomingHttpHeaders } = {};
    const server = createServer((req, res) => {
      seen.path = req.url;
      seen.headers = req.headers;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(status === 200 ? { status: 'ok' } : { problems: ['db down'] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as AddressInfo).port, seen, close: () => server.close() };
  }

  function check(env: Record<string, string>) {
    return new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [script], { env: { PATH: process.env.PATH, ...env } });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code, stderr }));
    });
  }

  it('is healthy on 200, sending the token, and reaches a wildcard listener on loopback', async () => {
    const server = await healthz(200);
    try {
      const token = 'a-token-of-24-characters';
      const result = await check({
        BATON_HTTP: `0.0.0.0:${server.port}`,
        BATON_HTTP_TOKEN: token,
      });
      expect(result).toEqual({ code: 0, stderr: '' });
      expect(server.seen.path).toBe('/healthz');
      expect(server.seen.headers?.authorization).toBe(`Bearer ${token}`);
    } finally {
      server.close();
    }
  });

  it('is unhealthy on 503, saying what the runner answered', async () => {
    const server = await healthz(503);
    try {
      const result = await check({ BATON_HTTP: `127.0.0.1:${server.port}` });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('answered 503');
      expect(result.stderr).toContain('db down');
      expect(server.seen.headers?.authorization).toBeUndefined();
    } finally {
      server.close();
    }
  });

  it('is unhealthy, with a reason, when nothing listens or BATON_HTTP is not set or invalid', async () => {
    const server = await healthz(200);
    server.close(); // a port that was just free again
    const refused = await check({ BATON_HTTP: `127.0.0.1:${server.port}` });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('ECONNREFUSED');
    const unset = await check({});
    expect(unset.code).toBe(1);
    expect(unset.stderr).toContain('BATON_HTTP is not set');
    const invalid = await check({ BATON_HTTP: 'localhost' });
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain('not a host and port');
  });
});
