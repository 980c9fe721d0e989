/**
 * The built `baton` CLI on a real pseudo-terminal of a given size, as an operator's terminal
 * would run it: stdout is a TTY with `columns`, Ctrl-C is a byte the line discipline turns into
 * SIGINT. Python's `pty` module (python3 is on every test machine) holds the master side: it
 * sets the window size on the child's terminal before exec, copies what the test writes into the
 * terminal and what the terminal shows out, and exits with the child's status.
 */
import { spawn } from 'node:child_process';
import { BATON_BIN, ROOT } from './cli.js';
import { waitFor } from './wait.js';

const PTY_HOST = String.raw`
import fcntl, os, pty, select, signal, struct, sys, termios
cols, rows = int(sys.argv[1]), int(sys.argv[2])
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack('HHHH', rows, cols, 0, 0))
    os.execv(sys.argv[3], sys.argv[3:])
stdin_open = True
while True:
    readers = [fd] + ([0] if stdin_open else [])
    ready, _, _ = select.select(readers, [], [])
    if 0 in ready:
        data = os.read(0, 1024)
        if data:
            os.write(fd, data)
        else:
            stdin_open = False
    if fd in ready:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b''
        if not data:
            break
        os.write(1, data)
_, status = os.waitpid(pid, 0)
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
`;

export interface PtyOptions {
  cols?: number;
  rows?: number;
  env?: Record<string, string>;
  cwd?: string;
}

export interface PtyProcess {
  /** Everything the terminal showed so far, `\r\n` as `\n`. */
  readonly output: string;
  /** Types into the terminal: `'\x03'` is Ctrl-C. */
  write(text: string): void;
  readonly exit: Promise<number | null>;
  waitForOutput(what: string, test: (output: string) => boolean, timeoutMs?: number): Promise<void>;
  kill(): void;
}

/** `baton <args>` on a pseudo-terminal of `cols` × `rows` (80 × 40 by default). */
export function batonOnPty(args: string[], o: PtyOptions = {}): PtyProcess {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    // Neither the developer's BATON_* nor the colour wishes of the shell running the tests.
    if (!k.startsWith('BATON_') && k !== 'NO_COLOR' && k !== 'FORCE_COLOR') env[k] = v;
  }
  const child = spawn(
    'python3',
    [
      '-c',
      PTY_HOST,
      String(o.cols ?? 80),
      String(o.rows ?? 40),
      process.execPath,
      BATON_BIN,
      ...args,
    ],
    { cwd: o.cwd ?? ROOT, env: { ...env, TERM: 'xterm-256color', ...o.env } },
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString().replace(/\r\n/g, '\n')));
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return {
    get output() {
      return output;
    },
    write: (text) => child.stdin.write(text),
    exit,
    async waitForOutput(what, test, timeoutMs = 20_000) {
      await waitFor(
        `${what} on the terminal (so far: ${output.slice(-400)}${stderr})`,
        () => test(output),
        { timeoutMs },
      );
    },
    kill: () => child.kill('SIGKILL'),
  };
}

/** Runs `baton <args>` on a pseudo-terminal to its end: its exit code and what it showed. */
export async function runOnPty(
  args: string[],
  o: PtyOptions = {},
): Promise<{ code: number | null; output: string }> {
  const p = batonOnPty(args, o);
  const timer = setTimeout(() => p.kill(), 30_000);
  try {
    const code = await p.exit;
    return { code, output: p.output };
  } finally {
    clearTimeout(timer);
  }
}

// ECMA-48 CSI sequences (colours, cursor moves) and the two-byte ESC sequences.
// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]/g;

export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}

/** Whether `text` has a colour (SGR) escape: `ESC [ … m`. */
export function hasColour(text: string): boolean {
  // eslint-disable-next-line no-control-regex
  return /\x1b\[[0-9;]*m/.test(text);
}
