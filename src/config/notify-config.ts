/**
 * The checks of the notification settings that need more than their shape: a target is exactly
 * one kind; a webhook's URL is http(s) and an SMTP server's smtp(s); a `urlFromEnv` names a
 * variable that is set (where jobs run); a job names targets that exist. Every problem is
 * reported with its place, the URLs themselves never (they may carry a secret).
 */
import type { ConfigProblem } from '../errors.js';
/** As load.ts's LoadOptions: whether `urlFromEnv` variables must be set here. */
interface LoadOptions {
  connectionVariables?: 'require' | 'ignore';
}
import {
  DEFAULT_NOTIFY_EVENTS,
  DEFAULT_NOTIFY_TIMEOUT_MS,
  DEFAULT_THROTTLE_MS,
} from './defaults.js';
import type {
  JobNotify,
  NotifyTarget,
  RawJobNotify,
  RawTarget,
  SecretSource,
} from './notify-schema.js';
import type { PathSegment, YamlSource } from './yaml-source.js';

type Report = (path: PathSegment[], message: string) => void;

/** The top-level `notify:` map → targets by name (the valid ones; problems for the rest). */
export function buildNotifyTargets(
  source: YamlSource,
  raw: Record<string, RawTarget> | undefined,
  problems: ConfigProblem[],
  options: LoadOptions,
): Record<string, NotifyTarget> {
  const report: Report = (p, message) => problems.push(source.problem(p, message));
  const targets: Record<string, NotifyTarget> = {};
  for (const [name, spec] of Object.entries(raw ?? {})) {
    const target = buildTarget(name, spec, report, options);
    if (target) targets[name] = target;
  }
  return targets;
}

function buildTarget(
  name: string,
  spec: RawTarget,
  report: Report,
  options: LoadOptions,
): NotifyTarget | null {
  const at = (...keys: PathSegment[]): PathSegment[] => ['notify', name, ...keys];
  const kinds = (['webhook', 'command', 'email'] as const).filter((k) => spec[k] != null);
  if (kinds.length !== 1) {
    report(
      at(),
      kinds.length === 0
        ? 'a target needs one of `webhook`, `command` or `email`'
        : `a target is one kind: ${kinds.join(' and ')} given`,
    );
    return null;
  }
  const timeoutMs = spec.timeout ?? DEFAULT_NOTIFY_TIMEOUT_MS;
  if (spec.webhook) {
    if (spec.shell != null) report(at('shell'), '`shell` applies to a `command` target');
    if (spec.env != null) report(at('env'), '`env` applies to a `command` target');
    const url = secretUrl(
      spec.webhook.url,
      spec.webhook.urlFromEnv,
      ['http:', 'https:'],
      'an http(s) URL',
      (key, message) => report(at('webhook', key), message),
      options,
      ['url', 'urlFromEnv'],
    );
    if (!url) return null;
    return {
      name,
      kind: 'webhook',
      url,
      format: spec.webhook.format ?? 'json',
      headers: spec.webhook.headers ?? {},
      timeoutMs,
    };
  }
  if (spec.email) {
    const e = spec.email;
    const smtp = secretUrl(
      e.smtp,
      e.smtpFromEnv,
      ['smtp:', 'smtps:'],
      'an smtp:// or smtps:// URL',
      (key, message) => report(at('email', key), message),
      options,
      ['smtp', 'smtpFromEnv'],
    );
    if (!smtp) return null;
    return {
      name,
      kind: 'email',
      smtp,
      from: e.from,
      to: typeof e.to === 'string' ? [e.to] : e.to,
      timeoutMs,
    };
  }
  const command = spec.command!;
  if (typeof command === 'string' && spec.shell !== true) {
    report(
      at('command'),
      'a string command runs through a shell: write it as an argv list, or set `shell: true`',
    );
    return null;
  }
  if (typeof command !== 'string' && spec.shell === true) {
    report(at('shell'), 'with `shell: true` give `command` as one string, not a list');
    return null;
  }
  return {
    name,
    kind: 'command',
    run:
      typeof command === 'string'
        ? { kind: 'shell', script: command }
        : { kind: 'command', argv: command },
    env: spec.env ?? {},
    timeoutMs,
  };
}

/**
 * A URL given inline or by an environment variable: exactly one of them, of an allowed scheme.
 * Messages name the key and the variable, never the URL.
 */
function secretUrl(
  inline: string | undefined,
  fromEnv: string | undefined,
  schemes: readonly string[],
  what: string,
  report: (key: string, message: string) => void,
  options: LoadOptions,
  [inlineKey, envKey]: [string, string],
): SecretSource | null {
  if ((inline == null) === (fromEnv == null)) {
    report(
      inline == null ? inlineKey : envKey,
      `set exactly one of \`${inlineKey}\` and \`${envKey}\``,
    );
    return null;
  }
  const value = inline ?? process.env[fromEnv!];
  if (value == null || value === '') {
    if (options.connectionVariables === 'ignore') return { kind: 'env', variable: fromEnv! };
    report(envKey, `environment variable ${fromEnv} is not set`);
    return null;
  }
  let scheme: string | null = null;
  try {
    scheme = new URL(value).protocol;
  } catch {
    // Reported below, without the value.
  }
  if (scheme == null || !schemes.includes(scheme)) {
    const where = inline != null ? `\`${inlineKey}\`` : `environment variable ${fromEnv}`;
    report(inline != null ? inlineKey : envKey, `${where} is not ${what}`);
    return null;
  }
  return inline != null ? { kind: 'url', url: inline } : { kind: 'env', variable: fromEnv! };
}

/**
 * A job's `notify:` with `defaults.notify` under it (key by key, so a job can say only `on:`),
 * checked against the targets. Null when the job is told of nothing.
 */
export function buildJobNotify(
  source: YamlSource,
  job: string,
  defaults: RawJobNotify | undefined,
  own: RawJobNotify | undefined,
  targets: Readonly<Record<string, NotifyTarget>>,
  problems: ConfigProblem[],
): JobNotify | null {
  if (own === false || (own == null && (defaults == null || defaults === false))) return null;
  const merged = { ...(defaults || {}), ...(own || {}) };
  const where = (key: 'to' | 'on' | 'throttle'): PathSegment[] =>
    own && key in own ? ['jobs', job, 'notify', key] : ['defaults', 'notify', key];
  const to = merged.to ?? [];
  if (to.length === 0) {
    problems.push(
      source.problem(
        own != null ? ['jobs', job, 'notify'] : ['defaults', 'notify'],
        'no targets: give `to: [name, …]` (names from the top-level `notify:`), or `notify: false`',
      ),
    );
    return null;
  }
  // Targets that are written but failed their own checks are reported there, not as unknown.
  const written = new Set(Object.keys((source.toJS() as RawFileNotify | null)?.notify ?? {}));
  const unknown = to.filter((name) => !written.has(name));
  for (const name of unknown) {
    const known = [...written].join(', ') || 'none defined';
    const message = `unknown notification target "${name}" (targets: ${known})`;
    const problem = source.problem(where('to'), message);
    // One report for a mistake in `defaults:` however many jobs inherit it.
    if (!problems.some((p) => p.path === problem.path && p.message === message)) {
      problems.push(problem);
    }
  }
  if (to.some((name) => !(name in targets))) return null;
  return {
    on: [...new Set(merged.on ?? DEFAULT_NOTIFY_EVENTS)],
    to: [...new Set(to)],
    throttleMs: merged.throttle ?? DEFAULT_THROTTLE_MS,
    after: merged.after ?? 1,
  };
}

type RawFileNotify = { notify?: Record<string, unknown> };
