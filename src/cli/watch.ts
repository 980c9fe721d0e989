/**
 * `--watch [seconds]` of `status` and `history`, like watch(1): the command's output redrawn
 * every N seconds under a header line, until Ctrl-C, which exits 0 with the cursor shown again.
 * A frame that fails (the database went away) shows its error and the next one tries again: a
 * screen left on the wall should say what is wrong, not vanish.
 *
 * On a terminal each frame replaces the last (cursor home, clear below, cursor hidden while
 * watching); into a pipe the frames follow each other, separated by a blank line.
 */
import { BatonError, UsageError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import { formatInstant } from '../text.js';

/** What one run of a command prints. */
export interface Frame {
  stdout: string;
  stderr: string;
  code: number;
}

export const DEFAULT_WATCH_SECONDS = 2;

/**
 * The yargs option: `--watch` alone is every 2 s, `--watch 10` every 10 s. A string, so that a
 * word after it (`history --watch nightly`) is refused rather than read as "every NaN seconds"
 * with the job lost.
 */
export const WATCH_OPTION = {
  type: 'string',
  describe:
    `redraw every N seconds (default ${DEFAULT_WATCH_SECONDS}) until Ctrl-C (exit 0), like ` +
    'watch(1); put a job before it: `history nightly --watch`',
} as const;

/** The interval of `--watch` in ms, or null when it was not given. */
export function watchIntervalMs(value: string | undefined): number | null {
  if (value == null) return null;
  if (value === '') return DEFAULT_WATCH_SECONDS * 1000;
  const seconds = /^\d+(\.\d+)?$/.test(value) ? Number(value) : NaN;
  if (!(seconds >= 0.1 && seconds <= 86_400)) {
    throw new UsageError(
      `--watch "${value}": expected seconds between 0.1 and 86400 (a job or other word goes ` +
        'before --watch, or write --watch=2)',
    );
  }
  return Math.round(seconds * 1000);
}

const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';
const HOME_AND_CLEAR = '\x1b[H\x1b[2J';
const CLEAR_BELOW = '\x1b[J';

export async function watch(
  intervalMs: number,
  title: string,
  frame: () => Promise<Frame>,
): Promise<number> {
  const out = process.stdout;
  const tty = out.isTTY === true;
  let stopped = false;
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const stop = () => {
    stopped = true;
    clearTimeout(timer);
    wake?.();
    // A frame waiting on the database does not hold Ctrl-C up for long.
    setTimeout(() => {
      if (tty) out.write(SHOW_CURSOR);
      process.exit(ExitCode.Ok);
    }, 1_000).unref();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  if (tty) out.write(HIDE_CURSOR + HOME_AND_CLEAR);
  try {
    let first = true;
    while (!stopped) {
      let f: Frame;
      try {
        f = await frame();
      } catch (err) {
        f = { stdout: '', stderr: failure(err), code: ExitCode.Software };
      }
      if (stopped) break;
      const every = `${intervalMs / 1000}s`;
      const header = `Every ${every}: ${title}    ${formatInstant(new Date()).slice(0, 19)} UTC\n\n`;
      const body = header + f.stdout + f.stderr;
      if (tty)
        out.write(`\x1b[H${screenful(body, out.rows).replace(/\n/g, '\x1b[K\n')}${CLEAR_BELOW}`);
      else out.write(`${first ? '' : '\n'}${body}`);
      first = false;
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, intervalMs);
      });
    }
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    if (tty) out.write(SHOW_CURSOR);
  }
  return ExitCode.Ok;
}

/**
 * The lines that fit the screen, as watch(1) shows them: a frame taller than the terminal would
 * scroll it, and the next frame, drawn from the top of the screen, would land on the wrong lines.
 */
function screenful(text: string, rows: number | undefined): string {
  if (!rows || rows < 2) return text;
  const lines = text.split('\n');
  return lines.length <= rows ? text : `${lines.slice(0, rows - 1).join('\n')}\n`;
}

/** The message a failed command prints (src/cli/action.ts), shown in the frame instead. */
function failure(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return `baton: ${err instanceof BatonError ? '' : 'error: '}${message}\n`;
}
