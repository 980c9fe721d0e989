/**
 * The environment a job's process starts from (execution/job-environment.ts): the runner's own,
 * minus its settings and secrets — read from `process.env` once per turn of the event loop (the
 * runs started together share one read), so a variable an application sets reaches every run
 * started in a later turn.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { inheritedEnvironment } from '../../src/execution/job-environment.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
const NAMES = ['BATON_TEST_SETTING', 'APP_TEST_VAR', 'OTEL_EXPORTER_OTLP_HEADERS', 'WITHHELD_VAR'];

afterEach(() => {
  for (const name of NAMES) delete process.env[name];
});

describe('inheritedEnvironment', () => {
  it("leaves out the runner's settings, the collector's headers and what it is told to withhold", async () => {
    await turn();
    process.env.BATON_TEST_SETTING = 'runner-only';
    process.env.OTEL_EXPORTER_OTLP_HEADERS = 'authorization=Bearer s3cret';
    process.env.WITHHELD_VAR = 'w';
    process.env.APP_TEST_VAR = 'kept';
    const env = inheritedEnvironment(new Set(['WITHHELD_VAR']));
    expect(env.APP_TEST_VAR).toBe('kept');
    expect(env.PATH).toBe(process.env.PATH);
    expect(env).not.toHaveProperty('BATON_TEST_SETTING');
    expect(env).not.toHaveProperty('OTEL_EXPORTER_OTLP_HEADERS');
    expect(env).not.toHaveProperty('WITHHELD_VAR');
  });

  it('reads process.env once per turn: a change is seen from the next turn on', async () => {
    await turn();
    process.env.APP_TEST_VAR = 'before';
    expect(inheritedEnvironment(new Set()).APP_TEST_VAR).toBe('before');
    // The same turn (runs whose claims were answered together): the same read.
    process.env.APP_TEST_VAR = 'after';
    expect(inheritedEnvironment(new Set()).APP_TEST_VAR).toBe('before');
    await turn();
    expect(inheritedEnvironment(new Set()).APP_TEST_VAR).toBe('after');
    delete process.env.APP_TEST_VAR;
    await turn();
    expect(inheritedEnvironment(new Set())).not.toHaveProperty('APP_TEST_VAR');
  });
});
