/**
 * A borderless table that fits a terminal's width, as `kubectl get` and `crontab -l` do: every
 * line is at most `width` columns. Columns are as wide as their widest cell; when that is too
 * wide, the flexible columns (names: jobs, hosts) give way first, cut with '…' rather than
 * wrapped; then optional columns are left out, least useful first; a line still too long (a
 * terminal narrower than the fixed columns) is cut. Colour is added after the layout, so the
 * escape codes never count as width.
 */
import type { Paint, Style } from './terminal.js';

export interface Column {
  head: string;
  /**
   * Gives way before anything else, down to `min` characters (default: the head's width); the
   * columns of the lowest `keep` (default 0) first, the widest of them first.
   */
  flex?: { min?: number; keep?: number };
  /** Left out when even the flexible columns at their narrowest do not fit; lowest first. */
  optional?: number;
  /** Right-aligned (numbers, durations). */
  right?: boolean;
}

export interface Cell {
  text: string;
  style?: Style;
}

const GAP = '  ';
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/** Width in columns, counted in code points (job and host names are almost always ASCII). */
export function width(text: string): number {
  return [...text].length;
}

/** `text` in at most `max` columns, ending in '…' when cut. */
export function clip(text: string, max: number): string {
  if (width(text) <= max) return text;
  if (max <= 0) return '';
  return `${[...text].slice(0, max - 1).join('')}…`;
}

export function fitTable(
  columns: Column[],
  rows: (Cell | string)[][],
  maxWidth: number,
  paint: Paint,
): string {
  // A control character in a host or job name would move the cursor or paint the terminal.
  const cells = rows.map((r) =>
    r.map((c) => {
      const cell = typeof c === 'string' ? { text: c } : c;
      return { ...cell, text: cell.text.replace(CONTROL, '?') };
    }),
  );
  let shown = columns.map((_, i) => i);
  let widths: number[] = [];
  for (;;) {
    widths = shown.map((i) =>
      Math.max(width(columns[i]!.head), ...cells.map((r) => width(r[i]?.text ?? ''))),
    );
    const total = () => widths.reduce((a, b) => a + b, 0) + GAP.length * (widths.length - 1);
    // One flexible column gives one character at a time: the least kept, then the widest, so
    // names of the same importance are cut evenly.
    while (total() > maxWidth) {
      let widest = -1;
      const keep = (k: number) => columns[shown[k]!]!.flex?.keep ?? 0;
      shown.forEach((col, k) => {
        const flex = columns[col]!.flex;
        if (!flex) return;
        const min = flex.min ?? width(columns[col]!.head);
        if (widths[k]! <= min) return;
        const before =
          widest < 0 ||
          keep(k) < keep(widest) ||
          (keep(k) === keep(widest) && widths[k]! > widths[widest]!);
        if (before) widest = k;
      });
      if (widest < 0) break;
      widths[widest]! -= 1;
    }
    if (total() <= maxWidth) break;
    const drop = shown
      .filter((i) => columns[i]!.optional != null)
      .sort((a, b) => columns[a]!.optional! - columns[b]!.optional!)[0];
    if (drop == null) break;
    shown = shown.filter((i) => i !== drop);
  }

  const line = (parts: Cell[]) => {
    // Pieces of plain text, cut to the width as a whole, then painted: no escape code is cut.
    const pieces: Cell[] = [];
    parts.forEach((c, k) => {
      const col = columns[shown[k]!]!;
      const text = clip(c.text, widths[k]!);
      const pad = ' '.repeat(widths[k]! - width(text));
      if (k > 0) pieces.push({ text: GAP });
      if (col.right) pieces.push({ text: pad });
      pieces.push({ text, ...(c.style ? { style: c.style } : {}) });
      if (!col.right) pieces.push({ text: pad });
    });
    let room = maxWidth;
    const out: string[] = [];
    for (const p of pieces) {
      // Padding is cut without a mark; text that does not fit ends in '…'.
      const cut = p.text.trim() === '' ? p.text.slice(0, room) : clip(p.text, room);
      const text = width(p.text) > room ? cut : p.text;
      room -= width(text);
      out.push(paint(p.style, text));
      if (room <= 0) break;
    }
    // Trailing spaces are dropped, as in format.ts:table.
    return out.join('').trimEnd();
  };
  const head = line(shown.map((i) => ({ text: columns[i]!.head })));
  const body = cells.map((r) => line(shown.map((i) => r[i] ?? { text: '' })));
  return [head, ...body].join('\n') + '\n';
}
