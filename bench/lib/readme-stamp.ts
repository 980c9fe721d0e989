/**
 * The README's Performance section names the latest full-size run: its date, machine and commit.
 * After a full-size run (and with `npm run bench -- --stamp-readme`, from results/latest.json)
 * the line between the markers below is rewritten; nothing else in README.md is touched, and a
 * README without the markers is left alone (said on stderr).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Machine } from './machine.js';
import { ROOT } from './runners.js';

export const BEGIN = '<!-- bench:latest-run -->';
export const END = '<!-- /bench:latest-run -->';

export interface LatestRecord {
  date: string;
  machine: Machine;
  scenarios: Record<string, { date: string; loadAvg: number; machine?: Machine }>;
}

/** The sentence for a latest.json: the newest run's date, machine, commit, and its scenarios. */
export function latestRunLine(latest: LatestRecord): string {
  const m = latest.machine;
  const ran = Object.entries(latest.scenarios)
    .filter(([, s]) => s.date === latest.date)
    .map(([name, s]) => `${name} (load ${s.loadAvg})`);
  const older = Object.entries(latest.scenarios).filter(([, s]) => s.date !== latest.date).length;
  return (
    `Latest full-size run: ${latest.date.slice(0, 16).replace('T', ' ')} UTC on commit ` +
    `\`${m.commit || 'unknown'}\`, ${m.cpus} × ${m.model}, ${m.memGiB} GiB, ${m.os}, Node ` +
    `${m.node}, MariaDB ${m.mariadb}; scenarios ${ran.join(', ')}` +
    (older ? ` (${older} other scenario(s) in latest.json are from earlier runs)` : '') +
    '.'
  );
}

/** Rewrites the marked line of README.md; returns false when the markers are missing. */
export function stampReadme(latest: LatestRecord, file = path.join(ROOT, 'README.md')): boolean {
  const text = readFileSync(file, 'utf8');
  const from = text.indexOf(BEGIN);
  const to = text.indexOf(END);
  if (from < 0 || to < from) {
    console.error(`${file}: no ${BEGIN} … ${END} markers: the latest run's line was not written`);
    return false;
  }
  const next = `${text.slice(0, from + BEGIN.length)}\n${latestRunLine(latest)}\n${text.slice(to)}`;
  if (next !== text) writeFileSync(file, next);
  return true;
}
