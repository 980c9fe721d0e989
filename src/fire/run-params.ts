/**
 * Manual parameters of `baton run`: `--env K=V` (repeatable) and `-- extra args`. They reach the
 * job as environment variables (a module job and a library-mode handler also get them as
 * `ctx.params`) and, for a command
 * job, as arguments appended to its argv; the run's row records them (`baton_runs.params`) with
 * the values of the job's `secretEnv` masked, and the values of those are masked in its output.
 */
import type { JobDefinition } from '../config/schema.js';
import { UsageError } from '../errors.js';
import type { RunParams } from '../store/runs.js';

/** A parameter's name: a variable's (it is one, for a command or module job). */
export const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The most the parameters of one run may take, as the JSON the row (`baton_runs.params`), the
 * audit (`baton_audit.details`) and a library-mode request (`baton_run_requests.env`) record:
 * those are TEXT columns (64 KiB), and the audit's details carry more than the parameters. Bulk
 * data belongs in a file the job reads, not on a command line.
 */
export const PARAMS_MAX_BYTES = 32 * 1024;

export interface ManualParams {
  env: Record<string, string>;
  args: string[];
}

/** `--env` pairs and the words after `--`, checked against the job; nothing is run yet. */
export function parseParams(
  job: JobDefinition,
  envPairs: readonly string[],
  args: readonly string[],
): ManualParams {
  const env = parseEnvPairs(envPairs);
  if (args.length > 0 && job.target.kind !== 'command') {
    const kind = job.target.kind === 'shell' ? 'a shell job (`shell: true`)' : 'a module job';
    throw new UsageError(
      `${job.name} is ${kind}: extra arguments after -- are for command jobs only` +
        (job.target.kind === 'module' ? '; pass values with --env K=V (ctx.params)' : ''),
    );
  }
  checkParamsSize(env, args);
  return { env, args: [...args] };
}

/**
 * Refuses parameters too large to be recorded (PARAMS_MAX_BYTES), before anything is written or
 * run, naming what was given; the values are not echoed.
 */
export function checkParamsSize(
  env: Record<string, string>,
  args: readonly string[],
  /** How the surface names what was given (the write API: its body's fields). */
  named?: string,
): void {
  const bytes = Buffer.byteLength(JSON.stringify({ env, args }), 'utf8');
  if (bytes <= PARAMS_MAX_BYTES) return;
  const given =
    named ??
    [
      ...(Object.keys(env).length > 0 ? ['--env'] : []),
      ...(args.length > 0 ? ['the arguments after --'] : []),
    ].join(' and ');
  throw new UsageError(
    `${given}: ${bytes} bytes as recorded, more than ${PARAMS_MAX_BYTES} (32 KiB): pass large ` +
      'values in a file the job reads',
  );
}

/** `--env K=V` pairs as variables, each name checked (by the CLI, before any job is known). */
export function parseEnvPairs(envPairs: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of envPairs) {
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    if (eq < 0 || !PARAM_NAME.test(name)) {
      throw new UsageError(
        `--env "${eq < 0 ? pair : name}": expected NAME=VALUE with a variable name ` +
          '(letters, digits and _, not starting with a digit)',
      );
    }
    if (name.startsWith('BATON_')) {
      throw new UsageError(`--env ${name}: BATON_* variables are baton's own (the fire's)`);
    }
    env[name] = pair.slice(eq + 1);
  }
  return env;
}

/** Whether any parameter was given. */
export function hasParams(p: ManualParams): boolean {
  return Object.keys(p.env).length > 0 || p.args.length > 0;
}

/** The job as this run starts it: its env with the pairs over it, its argv with the args. */
export function withParams(job: JobDefinition, p: ManualParams): JobDefinition {
  if (!hasParams(p)) return job;
  const target =
    job.target.kind === 'command' && p.args.length > 0
      ? { kind: 'command' as const, argv: [...job.target.argv, ...p.args] }
      : job.target;
  return { ...job, env: { ...job.env, ...p.env }, target };
}

/** What the row and the audit record: `secretEnv` values as `***`; null without parameters. */
export function recordedParams(job: JobDefinition, p: ManualParams): RunParams | null {
  if (!hasParams(p)) return null;
  const secret = new Set(job.secretEnv);
  const out: RunParams = {};
  if (Object.keys(p.env).length > 0) {
    out.env = Object.fromEntries(
      Object.entries(p.env).map(([k, v]) => [k, secret.has(k) ? '***' : v]),
    );
  }
  if (p.args.length > 0) {
    // An argument may carry a secret's value too (`-- --token "$TOKEN"`).
    const secrets = job.secretEnv
      .map((k) => p.env[k] ?? job.env[k] ?? '')
      .filter((v) => v.length > 0);
    out.args = p.args.map((a) => secrets.reduce((text, v) => text.split(v).join('***'), a));
  }
  return out;
}

/** The words after the first `--` of the command line (kept exactly: no number parsing). */
export function argsAfterDashes(argv: readonly string[]): string[] {
  const at = argv.indexOf('--');
  return at < 0 ? [] : argv.slice(at + 1);
}
