/**
 * Terminal output helpers: borderless tables (cli-table3) that line up for people and stay
 * greppable, and durations in words.
 */
import Table from 'cli-table3';

export function table(head: string[], rows: (string | number)[][]): string {
  const t = new Table({
    head,
    style: { head: [], border: [], compact: true, 'padding-left': 0, 'padding-right': 2 },
    chars: {
      top: '',
      'top-mid': '',
      'top-left': '',
      'top-right': '',
      bottom: '',
      'bottom-mid': '',
      'bottom-left': '',
      'bottom-right': '',
      left: '',
      'left-mid': '',
      mid: '',
      'mid-mid': '',
      right: '',
      'right-mid': '',
      middle: '',
    },
  });
  t.push(...rows.map((r) => r.map(String)));
  return (
    t
      .toString()
      .split('\n')
      .map((l) => l.trimEnd())
      .join('\n') + '\n'
  );
}

/** 1234 → "1.2s", 75000 → "1m15s". */
export function formatDuration(ms: number | null): string {
  if (ms == null) return '';
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const totalSeconds = Math.round(ms / 1000);
  const h = Math.floor(totalSeconds / 3600);
  const m = Math.floor((totalSeconds % 3600) / 60);
  const s = totalSeconds % 60;
  return h > 0 ? `${h}h${String(m).padStart(2, '0')}m` : `${m}m${String(s).padStart(2, '0')}s`;
}

/** `2026-11-30T03:00:00.000Z` → `2026-11-30 03:00:00.000` (UTC, as stored). */
export function formatInstant(d: Date | null): string {
  return d ? d.toISOString().replace('T', ' ').replace('Z', '') : '';
}

/** The WINNER column: `yes`, or the worker slot of a fan-out run (`slot 2`). */
export function winnerCell(r: { winner: boolean; workerSlot: number | null }): string {
  if (!r.winner) return '';
  return r.workerSlot != null && r.workerSlot > 1 ? `slot ${r.workerSlot}` : 'yes';
}
