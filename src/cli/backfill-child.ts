/**
 * `POST /api/jobs/{job}/backfill` runs the same `baton backfill` an operator would, as a child of
 * the runner that received the request: one implementation of the walk (its lock per fire, its
 * resumption, its audit rows), not two. The request is first checked by a `--dry-run` of the same
 * command (the range, the bound, the job), whose refusal becomes the HTTP answer; then the
 * backfill itself starts in the background and the answer is 202 with the fires it will look at.
 * Its progress is the history and the audit (`baton audit`, the backfill's `details`).
 *
 * Nothing of the request reaches the child's argv where the command's parser could take it for
 * an option: `from` and `to` go as the ISO form of the instants the API parsed, joined to their
 * options; the reason — free text, `"--database-url=…"` is a reason like any other — goes by the
 * environment (`BATON_AUDIT_REASON`), never argv; the job is one of the schedules file's names,
 * which start with a letter or digit.
 *
 * The child gets the runner's environment (its database URL, file or credential), the database
 * URL given on the command line through `BATON_DATABASE_URL` (never argv: `ps` shows argv), and
 * the token's name as `BATON_AUDIT_TOKEN`, so the audit says whose token asked, and why.
 */
import { spawn } from 'node:child_process';
import type { BackfillRequest, BackfillStart } from '../http/write-actions.js';
import type { Logger } from '../log.js';

export interface BackfillChildOptions {
  configFile: string;
  host: string;
  /** `--database-url-file F` when the runner was given a file; [] otherwise. */
  databaseArgs: string[];
  /** `BATON_DATABASE_URL` when the runner was given the URL as an option. */
  databaseEnv: Record<string, string>;
  log: Logger;
}

/** How long the dry run may take (it reads the history of the range). */
const DRY_RUN_MS = 30_000;

export function backfillStarter(o: BackfillChildOptions) {
  const argv = (r: BackfillRequest, dryRun: boolean) => [
    process.argv[1]!,
    'backfill',
    r.job,
    `--from=${r.from.toISOString()}`,
    `--to=${r.to.toISOString()}`,
    '--config',
    o.configFile,
    '--host',
    o.host,
    ...o.databaseArgs,
    '--json',
    ...(r.again ? ['--again'] : []),
    ...(r.yes ? ['--yes'] : []),
    ...(dryRun ? ['--dry-run'] : []),
  ];
  const env = (r: BackfillRequest) => {
    const inherited: NodeJS.ProcessEnv = { ...process.env };
    // Only this request's reason: never one the runner's own environment happened to carry.
    delete inherited.BATON_AUDIT_REASON;
    return {
      ...inherited,
      ...o.databaseEnv,
      BATON_AUDIT_TOKEN: r.operator,
      ...(r.reason ? { BATON_AUDIT_REASON: r.reason } : {}),
      BATON_LOG_LEVEL: 'warn',
    };
  };

  return async (r: BackfillRequest): Promise<BackfillStart> => {
    const dry = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, argv(r, true), { env: env(r), stdio: 'pipe' });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), DRY_RUN_MS);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code: code ?? 70, stdout, stderr });
      });
    });
    if (dry.code !== 0)
      return { status: 'refused', exitCode: dry.code, message: errorOf(dry.stderr) };
    const summary = dry.stdout
      .split('\n')
      .filter((l) => l.startsWith('{"summary"'))
      .map((l) => (JSON.parse(l) as { summary: { fires: number; wouldRun: number } }).summary)[0];
    const child = spawn(process.execPath, argv(r, false), {
      env: env(r),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
    child.on('close', (code) =>
      o.log.info(
        {
          job: r.job,
          from: r.from.toISOString(),
          to: r.to.toISOString(),
          by: r.operator,
          exitCode: code,
          error: code ? errorOf(stderr) : null,
        },
        'backfill from the write API ended',
      ),
    );
    return {
      status: 'started',
      pid: child.pid ?? 0,
      fires: summary?.fires ?? 0,
      toRun: summary?.wouldRun ?? 0,
    };
  };
}

/** The message of a `--json` command's error (`{"error": {…, "message"}}` on stderr). */
function errorOf(stderr: string): string {
  for (const line of stderr.split('\n').reverse()) {
    try {
      const parsed = JSON.parse(line) as { error?: { message?: string } };
      if (parsed.error?.message) return parsed.error.message;
    } catch {
      // not the JSON line
    }
  }
  return stderr.trim().split('\n').at(-1) ?? 'the backfill could not start';
}
