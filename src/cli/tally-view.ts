/**
 * Skip tallies (`skips: tally`, store/skip-tallies.ts) as `baton history` and `baton explain`
 * show them: one line per job, hour and runner, the kinds summed; and as JSON, one object per
 * row of `baton_skip_tallies`.
 */
import { TALLY_PERIOD_MS, type SkipTally } from '../store/skip-tallies.js';

export function tallyToJson(t: SkipTally): Record<string, unknown> {
  return {
    job: t.job,
    periodStart: t.periodStart.toISOString(),
    periodEnd: new Date(t.periodStart.getTime() + TALLY_PERIOD_MS).toISOString(),
    host: t.host,
    reasonKind: t.kind,
    skips: t.skips,
    firstFire: t.firstFire.toISOString(),
    lastFire: t.lastFire.toISOString(),
    lastReason: t.lastReason,
  };
}

const count = (n: number) => n.toLocaleString('en-US');

/**
 * `2026-12-04 10:00–11:00 UTC  settle  f2: 3,598 skips (taken 3,590, already-ran 8)`, newest
 * hour first, as the tallies come.
 */
export function renderTallies(tallies: readonly SkipTally[]): string {
  const lines = new Map<string, { head: string; kinds: [string, number][] }>();
  for (const t of tallies) {
    const key = `${t.periodStart.getTime()}\0${t.job}\0${t.host}`;
    let line = lines.get(key);
    if (!line) {
      const start = t.periodStart.toISOString();
      const end = new Date(t.periodStart.getTime() + TALLY_PERIOD_MS).toISOString();
      const head = `${start.slice(0, 10)} ${start.slice(11, 16)}–${end.slice(11, 16)} UTC  ${t.job}  ${t.host}`;
      lines.set(key, (line = { head, kinds: [] }));
    }
    line.kinds.push([t.kind, t.skips]);
  }
  const out = [...lines.values()].map(({ head, kinds }) => {
    const total = kinds.reduce((n, [, k]) => n + k, 0);
    const each = kinds.map(([kind, n]) => `${kind} ${count(n)}`).join(', ');
    return `${head}: ${count(total)} ${total === 1 ? 'skip' : 'skips'} (${each})`;
  });
  return out.map((l) => `${l}\n`).join('');
}
