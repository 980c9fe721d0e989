/**
 * What of a notification target a job's kept output and a delivery's errors may not show
 * (src/config/notify-target-secrets.ts): in the output, the secret parts, not the words a job
 * prints every day; in errors, everything that could be one.
 */
import { describe, expect, it } from 'vitest';
import type { NotifyTarget } from '../../src/config/schema.js';
import { allTargetSecrets, targetSecrets } from '../../src/config/notify-target-secrets.js';
import { maskText } from '../../src/execution/secret-mask.js';

const targets: Record<string, NotifyTarget> = {
  slack: {
    name: 'slack',
    kind: 'webhook',
    url: { kind: 'env', variable: 'SLACK_URL' },
    format: 'slack',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer hdr-secret-1' },
    timeoutMs: 1_000,
  },
  mail: {
    name: 'mail',
    kind: 'email',
    smtp: { kind: 'url', url: 'smtps://alerts%40example.com:p%40ss-word@smtp.example.com:465' },
    from: 'baton@example.com',
    to: ['ops@example.com'],
    timeoutMs: 1_000,
  },
};
const env = (name: string) =>
  name === 'SLACK_URL'
    ? 'https://hooks.example.com/services/T0/B0/tok-123456?sig=qs-secret'
    : undefined;
const mask = (text: string) => maskText(text, allTargetSecrets(targets, env, 'output'));

describe('the secrets of notification targets', () => {
  it('masks the URLs, their path with query, query, passwords and credential headers', () => {
    expect(mask('url https://hooks.example.com/services/T0/B0/tok-123456?sig=qs-secret')).toBe(
      'url ***',
    );
    expect(mask('path /services/T0/B0/tok-123456?sig=qs-secret q ?sig=qs-secret')).toBe(
      'path *** q ***',
    );
    expect(mask('pw p%40ss-word p@ss-word')).toBe('pw *** ***');
    expect(mask('auth Bearer hdr-secret-1 token hdr-secret-1')).toBe('auth *** token ***');
    expect(mask(`plain ${Buffer.from('p@ss-word').toString('base64')}`)).toBe('plain ***');
  });

  it('leaves the host, the user name and descriptive header values alone', () => {
    const text = 'hooks.example.com smtp.example.com alerts@example.com application/json';
    expect(mask(text)).toBe(text);
  });

  it('masks nothing of a target whose variable is unset', () => {
    expect(allTargetSecrets({ slack: targets.slack! }, () => undefined, 'output')).toEqual([
      'Bearer hdr-secret-1',
      'hdr-secret-1',
    ]);
  });

  it('leave a short path and a plain header alone in output, not in errors', () => {
    const hook: NotifyTarget = {
      name: 'hook',
      kind: 'webhook',
      url: { kind: 'url', url: 'https://ops.example.com/hook' },
      format: 'json',
      headers: {
        'X-Env': 'prod',
        'X-Trace': 'a-long-opaque-value-0123456789',
        'X-Api-Key': 'key-0001',
      },
      timeoutMs: 1_000,
    };
    const output = targetSecrets(hook, () => undefined, 'output');
    const text = 'GET /hook in prod with key-0001 and a-long-opaque-value-0123456789';
    expect(maskText(text, output)).toBe('GET /hook in prod with *** and ***');
    expect(output).toContain('https://ops.example.com/hook');
    const errors = targetSecrets(hook, () => undefined, 'errors');
    expect(errors).toEqual(expect.arrayContaining(['/hook', 'prod', 'key-0001']));
  });
});
