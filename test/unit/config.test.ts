import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-config-'));
mkdirSync(path.join(dir, 'jobs'));
writeFileSync(path.join(dir, 'jobs/refresh.ts'), 'export default async () => {};\n');
const file = path.join(dir, 'schedules.yaml');

function problems(yaml: string): string[] {
  try {
    parseConfig(file, yaml);
  } catch (err) {
    if (err instanceof ConfigError)
      return err.problems.map((p) => `${p.line}:${p.path}: ${p.message}`);
    throw err;
  }
  return [];
}

describe('parseConfig', () => {
  it('reads the example from the issue, with defaults applied', () => {
    const config = parseConfig(
      file,
      `namespace: prod
defaults:
  timezone: Asia/Seoul
jobs:
  settle:
    schedule: "0 3 * * *"
    command: ["/opt/batch/settle.sh", "--day", "yesterday"]
    description: nightly provider settlement
  refresh:
    schedule: "*/5 * * * *"
    timezone: UTC
    module: jobs/refresh.ts
    env: { REGION: kr, RETRIES: 3 }
  cleanup:
    schedule: "@hourly"
    command: "find /tmp/batch -mtime +7 -delete"
    shell: true
    enabled: false
`,
    );
    expect(config.namespace).toBe('prod');
    expect(config.jobs.map((j) => j.name)).toEqual(['settle', 'refresh', 'cleanup']);
    const [settle, refresh, cleanup] = config.jobs;
    expect(settle).toMatchObject({
      timezone: 'Asia/Seoul',
      enabled: true,
      cwd: dir,
      description: 'nightly provider settlement',
      target: { kind: 'command', argv: ['/opt/batch/settle.sh', '--day', 'yesterday'] },
    });
    expect(refresh).toMatchObject({
      timezone: 'UTC',
      target: { kind: 'module', path: path.join(dir, 'jobs/refresh.ts') },
      env: { REGION: 'kr', RETRIES: '3' },
    });
    expect(cleanup).toMatchObject({
      enabled: false,
      target: { kind: 'shell', script: 'find /tmp/batch -mtime +7 -delete' },
    });
  });

  it('defaults the namespace and the time zone', () => {
    const config = parseConfig(
      file,
      'jobs:\n  a:\n    schedule: "* * * * * *"\n    command: ["true"]\n',
    );
    expect(config.namespace).toBe('default');
    expect(config.jobs[0]!.timezone).toBe('UTC');
  });

  it('refuses schedule, command and module in defaults', () => {
    expect(
      problems(
        'defaults:\n  schedule: "* * * * *"\njobs:\n  a:\n    schedule: "* * * * *"\n    command: ["true"]\n',
      ),
    ).toEqual(['2:defaults.schedule: unknown key "schedule"']);
  });

  it('refuses an empty file, an empty job list and a list command with shell: true', () => {
    expect(problems('')).toEqual(['undefined:: expected a mapping with a `jobs:` key']);
    expect(problems('jobs: {}\n')).toEqual(['1:jobs: no jobs defined']);
    expect(
      problems('jobs:\n  a:\n    schedule: "* * * * *"\n    command: ["ls"]\n    shell: true\n'),
    ).toEqual(['5:jobs.a.shell: with `shell: true` give `command` as one string, not a list']);
  });

  it('refuses a missing working directory and a namespace with unsafe characters', () => {
    expect(
      problems(
        'jobs:\n  a:\n    schedule: "* * * * *"\n    command: ["ls"]\n    cwd: nowhere\n',
      )[0],
    ).toMatch(/^5:jobs\.a\.cwd: directory not found/);
    expect(
      problems(
        'namespace: "prod env"\njobs:\n  a:\n    schedule: "* * * * *"\n    command: ["ls"]\n',
      )[0],
    ).toMatch(/^1:namespace: namespace may contain only/);
  });
});
