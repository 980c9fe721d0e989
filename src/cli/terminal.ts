/**
 * What the terminal on stdout can show: how wide it is, and whether it takes colour. The views
 * that fit a terminal (`history`, `list`, `status`) ask here instead of guessing.
 *
 * Colour follows the conventions other tools read: NO_COLOR (https://no-color.org: present and not
 * empty, whatever its value) turns it off; FORCE_COLOR turns it on even into a pipe (`0` or
 * `false`: off), as Node and most CLI libraries read it; otherwise stdout must be a terminal and
 * TERM not `dumb`. Node's util.styleText adds the escape codes; the decision is made here, once,
 * so that it is the same on every Node version baton supports.
 */
import { styleText } from 'node:util';

/** The width a view fits when stdout is not a terminal (a file, a pipe, `watch`'s own pty). */
export const DEFAULT_WIDTH = 80;

type Stream = Pick<NodeJS.WriteStream, 'isTTY' | 'columns'>;

/** The terminal's width when stdout is one, else 80. */
export function terminalWidth(stream: Stream = process.stdout): number {
  return stream.isTTY && stream.columns > 0 ? stream.columns : DEFAULT_WIDTH;
}

export function colourEnabled(
  stream: Stream = process.stdout,
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  if (env.NO_COLOR != null && env.NO_COLOR !== '') return false;
  const force = env.FORCE_COLOR;
  if (force != null && force !== '') return force !== '0' && force.toLowerCase() !== 'false';
  return stream.isTTY === true && env.TERM !== 'dumb';
}

export type Style = 'red' | 'green' | 'yellow' | 'cyan' | 'magenta' | 'dim' | 'bold';

/** Paints text in one style, or leaves it as it is (no colour wanted). */
export type Paint = (style: Style | undefined, text: string) => string;

export const noPaint: Paint = (_style, text) => text;

export function painter(enabled = colourEnabled()): Paint {
  if (!enabled) return noPaint;
  return (style, text) =>
    style == null || text === '' ? text : styleText(style, text, { validateStream: false });
}
