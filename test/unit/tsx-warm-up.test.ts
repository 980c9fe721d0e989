/**
 * The parts of a `.ts` job's warm start that are not a process (the processes:
 * test/e2e/warm-module-hosts.test.ts):
 * - the warm-up files baton ships are TypeScript in the package scopes they stand for, each with
 *   its own package.json (baton's own says "module"), and are in the npm package's files;
 * - a job whose `env:` sets a start-up variable of Node or tsx gets no warm host.
 */
import { existsSync, mkdtempSync, promises as fsp, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { warmUpFile } from '../../src/execution/tsx-warm-up.js';
import { hostKind } from '../../src/execution/warm-hosts.js';
import { ROOT } from '../helpers/cli.js';

const dir = mkdtempSync(path.join(tmpdir(), 'baton-tsx-warm-up-'));

describe('the shipped warm-up files', () => {
  it('are .ts files in the package scope they stand for, and shipped', () => {
    for (const scope of ['commonjs', 'module'] as const) {
      const file = warmUpFile(scope);
      expect(file.endsWith('.ts') && existsSync(file), file).toBe(true);
      const pkg = JSON.parse(readFileSync(path.join(path.dirname(file), 'package.json'), 'utf8'));
      expect(pkg).toEqual({ type: scope });
    }
    const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      files: string[];
    };
    expect(manifest.files).toContain('tsx-warm-up');
  });
});

describe('hostKind', () => {
  const job = (body: string) => {
    const yaml = `jobs:\n  j:\n    schedule: "* * * * * *"\n${body.replace(/^/gm, '    ')}\n`;
    return parseConfig(path.join(dir, 'schedules.yaml'), yaml).jobs[0]!;
  };

  it('gives a .ts job a tsx host and an .mjs job a plain one, in its directory', async () => {
    await fsp.writeFile(path.join(dir, 'a.ts'), 'export default () => {};\n');
    await fsp.writeFile(path.join(dir, 'a.mjs'), 'export default () => {};\n');
    expect(hostKind(job('module: a.ts'))).toEqual({
      loader: expect.stringMatching(/tsx/),
      cwd: dir,
    });
    expect(hostKind(job('module: a.mjs'))).toEqual({ loader: null, cwd: dir });
    expect(hostKind(job('command: ["true"]'))).toBeNull();
  });

  it('starts a job cold whose env sets a start-up variable of Node or tsx', async () => {
    await fsp.writeFile(path.join(dir, 'a.ts'), 'export default () => {};\n');
    for (const key of [
      'TSX_TSCONFIG_PATH',
      'NODE_OPTIONS',
      'UV_THREADPOOL_SIZE',
      'ESBUILD_BINARY_PATH',
    ]) {
      expect(hostKind(job(`module: a.ts\nenv: { ${key}: x }`)), key).toBeNull();
    }
    expect(hostKind(job('module: a.ts\nenv: { MY_TSX: x }'))).not.toBeNull();
  });
});
