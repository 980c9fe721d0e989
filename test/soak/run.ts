/**
 * `npm run soak`: baton's own fault soak (soak.ts). Builds nothing: run `npm run build` first,
 * the runners are the built CLI (dist/).
 *
 *   npm run soak -- --seconds 180 --seed 7          the full soak
 *   npm run soak -- --seconds 60 --seed 7 --runners 4 --out /tmp/soak-7.json
 *
 * Exit code: 0 clean, 1 not clean (a check failed), 2 usage.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { describeSoakPlan, formatReport, runSoak } from './soak.js';

const USAGE = `usage: npm run soak -- [--seconds N] [--seed N] [--runners N] [--out FILE] [--plan-only] [--keep]

A private MariaDB, N runners (default 5: one with its clock 1.5 s off, one behind a freezable
proxy, the rest direct), five journaled jobs, and for --seconds (default 180) a fault every
4-8 s from a plan drawn from --seed (default 1): kill -9, SIGSTOP/SIGCONT, SIGSTOP + KILL of
the lock session, KILL of a lock session, a frozen link, a server restart, SIGTERM, SIGHUP.
Then every runner stops gracefully and seven checks are judged (test/README.md, "The fault
soak"). --out writes the whole report as JSON; --plan-only prints the seed's plan and stops;
--keep keeps the jobs' journal (it is kept anyway when a check fails).
Exit 0 clean, 1 not clean, 2 usage.
`;

function usage(problem?: string): number {
  if (problem) process.stderr.write(`${problem}\n`);
  (problem ? process.stderr : process.stdout).write(USAGE);
  return problem ? 2 : 0;
}

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        seconds: { type: 'string', default: '180' },
        seed: { type: 'string', default: '1' },
        runners: { type: 'string', default: '5' },
        out: { type: 'string' },
        'plan-only': { type: 'boolean', default: false },
        keep: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (err) {
    return usage((err as Error).message);
  }
  if (values.help) return usage();
  const seconds = Number(values.seconds);
  const seed = Number(values.seed);
  const runners = Number(values.runners);
  if (!Number.isInteger(seconds) || seconds < 20)
    return usage('--seconds: a whole number, 20 or more');
  if (!Number.isInteger(seed) || seed < 0) return usage('--seed: a whole number, 0 or more');
  if (!Number.isInteger(runners) || runners < 3 || runners > 16) {
    return usage('--runners: 3 to 16');
  }
  if (values['plan-only']) {
    process.stdout.write(`${describeSoakPlan({ seconds, seed, runners })}\n`);
    return 0;
  }
  const started = Date.now();
  const report = await runSoak({
    seconds,
    seed,
    runners,
    keep: values.keep,
    log: (line) => process.stdout.write(`[soak ${stamp()}] ${line}\n`),
  });
  process.stdout.write(`${formatReport(report)}\n`);
  process.stdout.write(`(${((Date.now() - started) / 1000).toFixed(0)} s in all)\n`);
  if (values.out) writeFileSync(values.out, JSON.stringify(report, null, 2) + '\n');
  return report.clean ? 0 : 1;
}

function stamp(): string {
  return new Date().toISOString().slice(11, 19);
}

// Ctrl-C: the fleet's processes go with the private server's janitor and the runners' pipes.
process.exitCode = await main();
// The pool, the proxy or a runner's pipe must not keep a finished soak waiting.
process.exit();
