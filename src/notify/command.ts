/**
 * The `command` target: runs a local program (`mail -s`, a pager's CLI, a script) with the event
 * as JSON on stdin and as BATON_EVENT_* variables. Exit 0 is a delivery; any other end is worth
 * another try, except a program that cannot be started at all (not found, not executable),
 * which is the configuration's fault and would fail the same way every time.
 *
 * The program runs in a process group of its own so that a timeout stops all of it (a shell
 * script and what it started): SIGTERM to the group, SIGKILL after
 * NOTIFY_COMMAND_KILL_GRACE_MS. A program stopped that way may have delivered already
 * (`outcomeUnknown`); a retry gives it the same BATON_EVENT_ID.
 *
 * Its environment is the runner's minus the runner's own settings, for the reason a job's is
 * (execution/job-process.ts): BATON_DATABASE_URL holds the database password, and a command
 * that prints its environment on failure would put it into the outbox's `last_error`.
 */
import { spawn } from 'node:child_process';
import { formatDuration } from '../config/duration.js';
import type { NotifyTarget } from '../config/schema.js';
import { oneLine } from '../text.js';
import { eventDocument, eventEnv } from './message.js';
import { failed } from './result.js';
import type { DeliveryResult, NotificationEvent } from './types.js';

export type CommandTarget = Extract<NotifyTarget, { kind: 'command' }>;

/** SIGTERM → SIGKILL, for a command that overstays its timeout. */
export const NOTIFY_COMMAND_KILL_GRACE_MS = 2_000;
/** How much of stderr is kept, and how much of its end goes into the error. */
const STDERR_KEEP = 4_096;
const STDERR_IN_ERROR = 200;
/** A program's exit does not wait for a background child that still holds stderr open. */
const STDERR_DRAIN_MS = 200;

export interface CommandOptions {
  signal?: AbortSignal | undefined;
  /** Variables of the runner not to pass on (those holding `connections:` URLs, say). */
  withholdEnv?: readonly string[] | undefined;
  /** NOTIFY_COMMAND_KILL_GRACE_MS unless the runner set another (its notifier's timings). */
  killGraceMs?: number | undefined;
}

/** The runner's environment without BATON_* (its settings) and the withheld variables. */
function inherited(withhold: ReadonlySet<string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key === 'CREDENTIALS_DIRECTORY' || key.startsWith('BATON_') || withhold.has(key)) continue;
    env[key] = value;
  }
  return env;
}

export function runCommand(
  target: CommandTarget,
  event: NotificationEvent,
  options: CommandOptions = {},
): Promise<DeliveryResult> {
  const who = `command "${target.name}"`;
  const [file, ...args] =
    target.run.kind === 'shell' ? ['/bin/sh', '-c', target.run.script] : target.run.argv;
  if (file == null || file === '') {
    return Promise.resolve(failed(`${who}: no command to run`, false));
  }
  if (options.signal?.aborted) {
    return Promise.resolve(failed(`${who}: not run: the runner is stopping`, true));
  }
  const env = {
    ...inherited(new Set(options.withholdEnv ?? [])),
    ...target.env,
    // Last, so that the target's own env: cannot make an event look like another.
    ...eventEnv(event),
  };

  return new Promise((resolve) => {
    let settled = false;
    let stopped: 'timeout' | 'abort' | null = null;
    let stderr = '';
    let killTimer: NodeJS.Timeout | undefined;
    const child = spawn(file, args, {
      env,
      detached: true,
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    const settle = (r: DeliveryResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      resolve(r);
    };
    const signalGroup = (sig: NodeJS.Signals): void => {
      if (child.pid == null) return;
      try {
        process.kill(-child.pid, sig);
      } catch {
        // the group is gone already
      }
    };
    const stop = (why: 'timeout' | 'abort'): void => {
      if (stopped) return;
      stopped = why;
      signalGroup('SIGTERM');
      killTimer = setTimeout(
        () => signalGroup('SIGKILL'),
        options.killGraceMs ?? NOTIFY_COMMAND_KILL_GRACE_MS,
      );
      killTimer.unref();
    };
    const timer = setTimeout(() => stop('timeout'), target.timeoutMs);
    const onAbort = (): void => stop('abort');
    options.signal?.addEventListener('abort', onAbort, { once: true });

    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_KEEP);
    });
    // A command that does not read its stdin (exits first, or closes it) is not a failure.
    child.stdin.on('error', () => {});
    child.stdin.end(`${JSON.stringify(eventDocument(event))}\n`);

    child.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(killTimer);
      if (err.code === 'ENOENT') settle(failed(`${who}: not found: ${file}`, false));
      else if (err.code === 'EACCES') settle(failed(`${who}: permission denied: ${file}`, false));
      else settle(failed(`${who}: cannot start ${file} (${err.code ?? 'error'})`, true));
    });
    child.on('exit', (code, signal) => {
      // A stopped command's group still gets its SIGKILL: what it started may ignore SIGTERM.
      if (!stopped) clearTimeout(killTimer);
      const done = (): void => {
        const last = oneLine(stderr, 100_000).slice(-STDERR_IN_ERROR);
        if (stopped === 'timeout') {
          const limit = formatDuration(target.timeoutMs, 'brief');
          settle(failed(`${who}: timed out after ${limit}, stopped`, true, true));
        } else if (stopped === 'abort') {
          settle(failed(`${who}: stopped: the runner is stopping`, true, true));
        } else if (code === 0) {
          settle({ ok: true, status: 0 });
        } else if (code != null) {
          settle(failed(`${who} exited with ${code}${last ? `: ${last}` : ''}`, true, false, code));
        } else {
          settle(
            failed(`${who} was killed by ${signal ?? 'a signal'}${last ? `: ${last}` : ''}`, true),
          );
        }
      };
      // stderr's last words arrive after 'exit'; a grandchild holding it open is not waited for.
      // The wait ends a turn after its timer (setImmediate runs after that turn's I/O): an event
      // loop that stalled past the timer still takes in the stderr that came meanwhile first
      // (timers run before I/O in a turn).
      if (child.stderr.readableEnded) done();
      else {
        const t = setTimeout(() => setImmediate(done), STDERR_DRAIN_MS);
        child.stderr.once('end', () => {
          clearTimeout(t);
          done();
        });
      }
    });
  });
}
