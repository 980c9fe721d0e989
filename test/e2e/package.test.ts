/**
 * The npm package as a user gets it: `npm pack`, then the tarball installed into fresh projects,
 * an ES module one with a CommonJS folder (npm's default type; its own package.json), with
 * TypeScript `module: node16`, and a bare one without tsx. In each the installed `baton` runs,
 * the SDK's types check, and a `.ts` module job runs against MariaDB — or, without tsx, is
 * refused with what to install.
 *
 * A runner installed from it keeps warm hosts for an every-second `.ts` job, which warm tsx up
 * with the files the package ships (tsx-warm-up/), read from node_modules.
 *
 * The tarball is packed with `--ignore-scripts`: `prepack` would delete and rebuild dist/ while
 * other test files run from it; `npm test` has just built it. Dependencies come from npm's cache
 * (`--prefer-offline`) or the registry; the consumers get the repository's own versions of
 * typescript, @types/node and tsx.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { command, ROOT, startRunner, type CliResult } from '../helpers/cli.js';
import { createTestDatabase, runs, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

const repo = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  devDependencies: Record<string, string>;
};
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'];
const INSTALL_MS = 120_000;

const JOB_TS = `import { once, type JobContext } from '${repo.name}';
import { writeFileSync } from 'node:fs';
export default async (ctx: JobContext): Promise<void> => {
  writeFileSync('ran.txt', \`\${ctx.job} \${ctx.runId} \${typeof once}\`);
};
`;
const JOB_MJS = `import { once } from '${repo.name}';
import { writeFileSync } from 'node:fs';
export default async (ctx) => writeFileSync('ran.txt', \`\${ctx.job} \${ctx.runId} \${typeof once}\`);
`;
/** Imports values and types of the SDK: TS1479 in a CommonJS project without CJS types. */
const USE_TS = `import { claimRows, once, upsertRows, type JobContext } from '${repo.name}';
export const job = async (ctx: JobContext): Promise<string> => ctx.job;
export const helpers = [claimRows, once, upsertRows];
`;
const TSCONFIG = JSON.stringify({
  compilerOptions: {
    module: 'node16',
    moduleResolution: 'node16',
    target: 'es2022',
    strict: true,
    types: ['node'],
    noEmit: true,
  },
  include: ['*.ts', 'jobs/*.ts', 'cjs/*.ts', 'cjs/jobs/*.ts'],
});

interface Consumer {
  dir: string;
  install: CliResult;
}

let tmp: string;
let packed: { filename: string; files: { path: string }[] };
const consumers: Record<'esm' | 'cjs' | 'bare', Consumer> = {} as never;
let typeCheck: Promise<CliResult> | undefined;

function npx(consumer: Consumer, args: string[], timeoutMs = 60_000): Promise<CliResult> {
  return command('npx', ['--no-install', ...args], { cwd: consumer.dir, timeoutMs });
}

async function makeConsumer(
  name: string,
  type: 'module' | 'commonjs',
  files: Record<string, string>,
  extra: string[],
): Promise<Consumer> {
  const dir = path.join(tmp, name);
  mkdirSync(path.join(dir, 'jobs'), { recursive: true });
  writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name: `consumer-${name}`, version: '1.0.0', private: true, type }),
  );
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  const install = await command(
    'npm',
    ['install', ...NPM_FLAGS, path.join(tmp, packed.filename), ...extra],
    { cwd: dir, timeoutMs: INSTALL_MS },
  );
  return { dir, install };
}

const dev = (pkg: string) => `${pkg}@${repo.devDependencies[pkg]}`;

beforeAll(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'baton-package-'));
  const pack = await command(
    'npm',
    ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp],
    { timeoutMs: 60_000 },
  );
  expect(pack.code, pack.stderr).toBe(0);
  [packed] = JSON.parse(pack.stdout) as [typeof packed];
  const schedule = (file: string) =>
    `namespace: package\njobs:\n  hello:\n    schedule: "0 3 * * *"\n    module: ${file}\n`;
  const typed = ['typescript', '@types/node', 'tsx'].map(dev);
  const withTs = {
    'schedules.yaml': schedule('jobs/hello.ts'),
    'every.yaml': schedule('jobs/hello.ts').replace('0 3 * * *', '* * * * * *'),
    'jobs/hello.ts': JOB_TS,
    'use.ts': USE_TS,
    'tsconfig.json': TSCONFIG,
  };
  // The CommonJS consumer is a folder of the ES module one with its own package.json: Node and
  // TypeScript take a file's module format from its nearest package.json, so its files are
  // CommonJS as in a project of its own, and one install and one type check serve both.
  const cjsFiles = Object.fromEntries(
    Object.entries(withTs)
      .filter(([name]) => name !== 'tsconfig.json')
      .map(([name, text]) => [`cjs/${name}`, text]),
  );
  const [esm, bare] = await Promise.all([
    makeConsumer('esm', 'module', { ...withTs, ...cjsFiles }, typed),
    makeConsumer(
      'bare',
      'commonjs',
      {
        'schedules.yaml': schedule('jobs/hello.ts'),
        'jobs/hello.ts': JOB_TS,
        'mjs.yaml': schedule('jobs/hello.mjs'),
        'jobs/hello.mjs': JOB_MJS,
      },
      [],
    ),
  ]);
  const cjs = { dir: path.join(esm.dir, 'cjs'), install: esm.install };
  writeFileSync(
    path.join(cjs.dir, 'package.json'),
    JSON.stringify({ name: 'consumer-cjs', version: '1.0.0', private: true, type: 'commonjs' }),
  );
  Object.assign(consumers, { esm, cjs, bare });
}, INSTALL_MS);

afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('the tarball', () => {
  it('ships the license, the README and every doc it links to, and no tests or maps', () => {
    const files = packed.files.map((f) => f.path);
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const linkedDocs = [...readme.matchAll(/\]\((docs\/[\w-]+\.md)/g)].map((m) => m[1]!);
    expect(linkedDocs.length).toBeGreaterThan(3);
    for (const f of ['LICENSE', 'README.md', 'CHANGELOG.md', 'package.json', ...linkedDocs]) {
      expect(files).toContain(f);
    }
    expect(files).toContain('dist/cli/main.js');
    expect(files).toContain('dist/cjs-types/index.d.ts');
    expect(files).toContain('src/store/migrations/0001_create_baton_runs.sql');
    for (const scope of ['commonjs', 'module']) {
      expect(files).toContain(`tsx-warm-up/${scope}/warm-up.ts`);
      expect(files).toContain(`tsx-warm-up/${scope}/package.json`);
    }
    expect(files.filter((f) => f.startsWith('test/') || f.includes('.test.'))).toEqual([]);
    expect(files.filter((f) => f.endsWith('.map') || /^src\/.*\.ts$/.test(f))).toEqual([]);
    // The command is the launcher (bin/baton.js, see fresh-clone.test.ts); tsc's incremental
    // build info stays home.
    expect(files).toContain('bin/baton.js');
    expect(files).not.toContain('dist/.tsbuildinfo');
  });

  it('installs without tsx and esbuild unless asked for', () => {
    const { bare } = consumers;
    expect(bare.install.code, bare.install.stderr).toBe(0);
    expect(existsSync(path.join(bare.dir, 'node_modules', 'tsx'))).toBe(false);
    expect(existsSync(path.join(bare.dir, 'node_modules', 'esbuild'))).toBe(false);
  });
});

describe.each(['esm', 'cjs'] as const)('a fresh %s consumer', (kind) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase(`package_${kind}`);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('installs the tarball', () => {
    const { install } = consumers[kind];
    expect(install.code, install.stderr).toBe(0);
  });

  it('runs the CLI: --version and validate', async () => {
    const c = consumers[kind];
    const version = await npx(c, ['baton', '--version']);
    expect(version.code, version.stderr).toBe(0);
    expect(version.stdout.trim()).toBe(repo.version);
    const validate = await npx(c, ['baton', 'validate']);
    expect(validate.code, validate.stderr).toBe(0);
    expect(validate.stdout).toMatch(/valid, namespace "package", 1 job/);
  });

  // tsc takes 8 s on a quiet machine, 28 s in a CI run beside other work and over a minute on a
  // saturated one (ci2): a bound like an install's, since how fast tsc is does not matter here.
  it(
    'typechecks an import of the SDK with module node16 (tsc --noEmit)',
    { timeout: INSTALL_MS },
    async () => {
      // One tsc run for both: the project's files and its cjs/ folder's.
      typeCheck ??= npx(consumers.esm, ['tsc', '-p', '.'], INSTALL_MS);
      const tsc = await typeCheck;
      expect(tsc.stdout + tsc.stderr).toBe('');
      expect(tsc.code).toBe(0);
    },
  );

  it('loads the SDK at run time (import or require)', async () => {
    const c = consumers[kind];
    const load =
      kind === 'cjs'
        ? `const b = require('${repo.name}'); console.log(typeof b.once, typeof b.claimRows)`
        : `const b = await import('${repo.name}'); console.log(typeof b.once, typeof b.claimRows)`;
    const node = await command(process.execPath, ['-e', load], { cwd: c.dir });
    expect(node.stderr).toBe('');
    expect(node.stdout.trim()).toBe('function function');
  });

  it('runs a .ts module job through tsx (baton run)', async () => {
    const c = consumers[kind];
    const run = await npx(c, ['baton', 'run', 'hello', '--database-url', db.url]);
    expect(run.code, run.stderr).toBe(0);
    const [row] = await runs(db, 'hello');
    expect(row?.status).toBe('done');
    expect(readFileSync(path.join(c.dir, 'ran.txt'), 'utf8')).toBe(`hello ${row!.id} function`);
  });
});

describe('a consumer without tsx', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('package_bare');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('refuses a .ts module job with exit 78, naming the job and what to install', async () => {
    const validate = await npx(consumers.bare, ['baton', 'validate']);
    expect(validate.code).toBe(78);
    expect(validate.stderr).toMatch(
      /schedules\.yaml:5:\d+: jobs\.hello\.module: jobs\/hello\.ts is TypeScript, which needs tsx .*npm i tsx/,
    );
    expect(validate.stderr).not.toMatch(/\n\s+at /);
    const run = await npx(consumers.bare, ['baton', 'run', 'hello', '--database-url', db.url]);
    expect(run.code).toBe(78);
    expect(run.stderr).toMatch(/npm i tsx/);
  });

  it('runs a .mjs module job', async () => {
    const c = consumers.bare;
    const args = ['baton', 'run', 'hello', '--config', 'mjs.yaml', '--database-url', db.url];
    const run = await npx(c, args);
    expect(run.code, run.stderr).toBe(0);
    const [row] = await runs(db, 'hello');
    expect(row?.status).toBe('done');
    expect(readFileSync(path.join(c.dir, 'ran.txt'), 'utf8')).toBe(`hello ${row!.id} function`);
  });
});

describe('a runner whose tsx is uninstalled while it runs', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('package_gone');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('records the next runs failed (exit 78) with what to install, and goes on', async () => {
    const c = consumers.esm;
    const tsx = path.join(c.dir, 'node_modules', 'tsx');
    const runner = startRunner({
      bin: path.join(c.dir, 'node_modules', repo.name, 'dist', 'cli', 'main.js'),
      cwd: c.dir,
      config: path.join(c.dir, 'every.yaml'),
      databaseUrl: db.url,
      host: 'package-gone',
      args: ['--log-level', 'debug'],
    });
    try {
      await runner.ready();
      await waitFor('a run done with tsx', async () =>
        (await runs(db, 'hello')).find((r) => r.status === 'done'),
      );
      // Its warm hosts warmed tsx up with the files the package ships, from node_modules.
      const warm = runner.lines.find((l) => l.msg === 'module host warm');
      expect(warm?.warmUp).toEqual({ imported: ['commonjs', 'module'], ms: expect.any(Number) });
      renameSync(tsx, `${tsx}.away`);
      const failed = await waitFor('a run failed without tsx', async () =>
        (await runs(db, 'hello')).find((r) => r.status === 'failed'),
      );
      expect(failed.exit_code).toBe(78);
      expect(failed.error).toMatch(/jobs\/hello\.ts is TypeScript, which needs tsx .*npm i tsx/);
    } finally {
      if (existsSync(`${tsx}.away`)) renameSync(`${tsx}.away`, tsx);
      expect(await runner.stop()).toBe(0);
    }
  });
});
