/**
 * `npm run bench` — runs the scenarios of bench/scenarios/ one after another against a database
 * server, prints a table per scenario and writes the figures to bench/results/ (README.md there
 * explains each scenario and how to compare two results files).
 *
 *   npm run bench                                  every scenario, full size (~10 min)
 *   npm run bench -- --only fire-lag,idle          a subset
 *   npm run bench -- --quick                       every scenario shrunk (a smoke run)
 *   npm run bench -- --server-url mysql://root@127.0.0.1:3306   an existing server, not a private one
 *   npm run bench -- --compare a.json b.json       figures of two results files side by side
 *   npm run bench -- --list                        the scenarios
 *   npm run bench -- --pressure io                 the storm (many-jobs) with a process writing and
 *                                                  fsyncing on the server's disk beside it
 *                                                  (recorded as many-jobs+io)
 *   npm run bench -- --stamp-readme                rewrites README.md's "latest full-size run"
 *                                                  line from results/latest.json (a full-size
 *                                                  run does it itself)
 *   npm run bench -- --general-log --only many-jobs   diagnosis: statement counters also break the
 *                                                  statements down by shape (the general log of
 *                                                  the private server; it slows the server down)
 *
 * It builds nothing: run `npm run build` first (the runners are dist/cli/main.js).
 *
 * A full-size run prints, for every scenario it ran, each figure beside the previous full-size
 * run's (results/latest.json before it is updated) with their ratio.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Check, Figure, Scenario, ScenarioResult, TableRow } from './lib/index.js';
import { createContext } from './lib/context.js';
import { openServer, type BenchServer } from './lib/database.js';
import { describeMachine, loadAverages, type Machine } from './lib/machine.js';
import { stampReadme } from './lib/readme-stamp.js';
import { heading, loud, renderChecks, renderTable } from './lib/report.js';
import { assertBuilt, killAllRunnersNow } from './lib/runners.js';

const BENCH = path.dirname(fileURLToPath(import.meta.url));
const SCENARIOS = path.join(BENCH, 'scenarios');
const RESULTS = path.join(BENCH, 'results');

interface ScenarioRecord {
  title: string;
  date: string;
  quick: boolean;
  seconds: number;
  /** 1-minute load average when the scenario started (other work skews the figures). */
  loadAvg: number;
  figures: Record<string, Figure>;
  checks: Check[];
  notes: string[];
  table: TableRow[];
}

interface ResultsFile {
  date: string;
  quick: boolean;
  machine: Machine;
  scenarios: Record<string, ScenarioRecord & { machine?: Machine }>;
}

interface Args {
  only: string[] | null;
  quick: boolean;
  serverUrl: string | null;
  compare: [string, string] | null;
  list: boolean;
  generalLog: boolean;
  pressure: 'io' | null;
  stampReadme: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = {
    only: null,
    quick: false,
    serverUrl: null,
    compare: null,
    list: false,
    generalLog: false,
    pressure: null,
    stampReadme: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = () => {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      if (v == null) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--quick') args.quick = true;
    else if (a === '--list') args.list = true;
    else if (a === '--general-log') args.generalLog = true;
    else if (a === '--stamp-readme') args.stampReadme = true;
    else if (a.startsWith('--pressure')) {
      const v = value();
      if (v !== 'io') throw new Error(`--pressure ${v}: the only pressure is io`);
      args.pressure = 'io';
    } else if (a.startsWith('--only')) args.only = value().split(',').filter(Boolean);
    else if (a.startsWith('--server-url')) args.serverUrl = value();
    else if (a === '--compare') {
      const x = argv[++i];
      const y = argv[++i];
      if (!x || !y) throw new Error('--compare needs two results files');
      args.compare = [x, y];
    } else if (a === '--help' || a === '-h') {
      console.log(readFileSync(fileURLToPath(import.meta.url), 'utf8').split('*/')[0]);
      process.exit(0);
    } else throw new Error(`unknown argument ${a} (see --help)`);
  }
  return args;
}

async function loadScenarios(only: string[] | null, pressure: 'io' | null): Promise<Scenario[]> {
  const files = readdirSync(SCENARIOS)
    .filter((f) => f.endsWith('.ts'))
    .sort();
  const names = files.map((f) => f.replace(/\.ts$/, ''));
  if (only) {
    const unknown = only.filter((n) => !names.includes(n));
    if (unknown.length) {
      throw new Error(`unknown scenario ${unknown.join(', ')} (there are: ${names.join(', ')})`);
    }
  }
  const scenarios: Scenario[] = [];
  for (const f of files) {
    const name = f.replace(/\.ts$/, '');
    if (only && !only.includes(name)) continue;
    const mod = (await import(pathToFileURL(path.join(SCENARIOS, f)).href)) as {
      default?: Scenario;
    };
    if (!mod.default?.run) throw new Error(`${f} has no default export { name, title, run }`);
    scenarios.push(mod.default);
  }
  if (pressure) {
    const without = scenarios.filter((s) => !s.pressure).map((s) => s.name);
    if (only && without.length) {
      throw new Error(
        `--pressure ${pressure}: ${without.join(', ')} has no pressure variant (--list --pressure ${pressure} lists those that have one)`,
      );
    }
    scenarios.splice(0, scenarios.length, ...scenarios.filter((s) => s.pressure));
  }
  // The order of the list where known, then the rest alphabetically.
  const order = ['fire-lag', 'many-jobs', 'idle', 'claims', 'history-scale', 'peers'];
  const rank = (s: Scenario) => (order.includes(s.name) ? order.indexOf(s.name) : order.length);
  return scenarios.sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name));
}

/** JSON as prettier formats it (the repo's `prettier --check .` covers bench/results/). */
async function formatJson(value: unknown): Promise<string> {
  const text = `${JSON.stringify(value, null, 2)}\n`;
  try {
    const prettier = await import('prettier');
    return await prettier.format(text, { parser: 'json', singleQuote: true, printWidth: 100 });
  } catch {
    return text;
  }
}

async function runAll(args: Args): Promise<number> {
  assertBuilt();
  const scenarios = await loadScenarios(args.only, args.pressure);
  if (args.list) {
    for (const s of scenarios) console.log(`${s.name.padEnd(16)} ${s.title}`);
    return 0;
  }
  let server: BenchServer | null = null;
  const abort = () => {
    console.error(loud('\ninterrupted: killing runners and the private server'));
    killAllRunnersNow();
    void server?.close().finally(() => process.exit(130));
    setTimeout(() => process.exit(130), 3_000).unref();
  };
  process.once('SIGINT', abort);
  process.once('SIGTERM', abort);

  server = await openServer(args.serverUrl, { generalLog: args.generalLog });
  const machine = describeMachine(server);
  const date = new Date().toISOString();
  console.log(
    `baton bench ${date}${args.quick ? ' (quick)' : ''}\n` +
      `machine: ${machine.cpus} × ${machine.model}, ${machine.memGiB} GiB, ${machine.os}, ` +
      `node ${machine.node}, MariaDB ${machine.mariadb} (${machine.server}; ` +
      `flush_log_at_trx_commit=${machine.serverSettings.innodb_flush_log_at_trx_commit}), ` +
      `load average ${machine.loadAvgAtStart}, commit ${machine.commit || 'unknown'}` +
      (args.pressure ? `, --pressure ${args.pressure}` : ''),
  );
  const out: ResultsFile = { date, quick: args.quick, machine, scenarios: {} };
  let failed = 0;
  try {
    for (const scenario of scenarios) {
      // A pressure variant is a scenario of its own in the results (it must not replace the
      // quiet figures in latest.json).
      const variant = scenario.variant?.() ?? null;
      const recordName = [scenario.name, variant, args.pressure].filter(Boolean).join('+');
      const title = args.pressure
        ? `${scenario.title} — with --pressure ${args.pressure} (a disk writer with fsyncs beside it)`
        : scenario.title;
      console.log(heading(`${recordName}: ${title}`));
      const started = performance.now();
      const loadAvg = Math.round(os.loadavg()[0]! * 100) / 100;
      let result: ScenarioResult;
      const { ctx, cleanup } = await createContext(
        scenario.name,
        args.quick,
        server,
        args.pressure,
      );
      try {
        result = await scenario.run(ctx);
      } catch (err) {
        console.error(loud(`${scenario.name} threw:`), err);
        result = {
          figures: {},
          table: [],
          notes: [],
          checks: [
            {
              name: 'scenario completed',
              ok: false,
              detail: err instanceof Error ? err.message : String(err),
            },
          ],
        };
      } finally {
        await cleanup().catch((err: unknown) => console.error('cleanup failed:', err));
      }
      const seconds = Math.round((performance.now() - started) / 100) / 10;
      const table = renderTable(result.table);
      if (table) console.log(table);
      const figures = Object.entries(result.figures);
      if (figures.length) {
        console.log(figures.map(([k, v]) => `  ${k} = ${v}`).join('\n'));
      }
      for (const note of result.notes) console.log(`  · ${note}`);
      if (result.checks.length) console.log(renderChecks(result.checks));
      const bad = result.checks.filter((c) => !c.ok);
      failed += bad.length;
      if (bad.length) {
        console.log(loud(`  ${bad.length} check(s) FAILED in ${recordName}`));
      }
      console.log(
        `  (${seconds} s; load average at its start ${loadAvg}, at its end ${loadAverages()})`,
      );
      out.scenarios[recordName] = {
        title,
        date,
        quick: args.quick,
        seconds,
        loadAvg,
        figures: result.figures,
        checks: result.checks,
        notes: result.notes,
        table: result.table,
      };
    }
  } finally {
    await server.close();
  }

  mkdirSync(RESULTS, { recursive: true });
  const stamp = date.replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
  const dated = path.join(RESULTS, `${stamp}${args.quick ? '-quick' : ''}.json`);
  writeFileSync(dated, await formatJson(out));
  console.log(`\nwrote ${path.relative(process.cwd(), dated)}`);
  if (!args.quick) {
    // latest.json holds the newest full-size figures of every scenario: a run of a subset
    // replaces those scenarios and keeps the others (each scenario records its own date).
    const latestPath = path.join(RESULTS, 'latest.json');
    let latest: ResultsFile = { ...out, scenarios: {} };
    if (existsSync(latestPath)) {
      try {
        const previous = JSON.parse(readFileSync(latestPath, 'utf8')) as ResultsFile;
        for (const [name, rec] of Object.entries(previous.scenarios ?? {})) {
          latest.scenarios[name] = { ...rec, machine: rec.machine ?? previous.machine };
        }
      } catch {
        // unreadable: start afresh
      }
    }
    const previous = { ...latest.scenarios };
    latest = { ...latest, date, machine };
    for (const [name, rec] of Object.entries(out.scenarios)) latest.scenarios[name] = rec;
    // A scenario carried over from an earlier run keeps the machine it ran on.
    for (const rec of Object.values(latest.scenarios)) {
      if (rec.date === date) delete rec.machine;
    }
    writeFileSync(latestPath, await formatJson(latest));
    console.log(`wrote ${path.relative(process.cwd(), latestPath)}`);
    if (stampReadme(latest)) console.log('wrote README.md (the latest full-size run)');
    // Every figure against the previous full-size run of the same scenario.
    console.log(heading('against the previous full-size run (B = this run, A = the previous)'));
    for (const name of Object.keys(out.scenarios)) {
      const before = previous[name];
      if (!before) {
        console.log(`  ${name}: no earlier full-size run in latest.json`);
        continue;
      }
      const m = before.machine ?? machine;
      console.log(
        `  ${name}: A = ${before.date} (${m.commit || 'commit unknown'}, load ${before.loadAvg}), ` +
          `B = ${date} (${machine.commit || 'commit unknown'}, load ${out.scenarios[name]!.loadAvg})`,
      );
      printComparison(name, before, out.scenarios[name]!);
    }
  }
  if (failed)
    console.log(loud(`${failed} check(s) failed (see above); figures were still written`));
  return 0;
}

/** One scenario's figures of two runs side by side with their ratio B/A, and B's failed checks. */
function printComparison(
  name: string,
  a: Pick<ScenarioRecord, 'figures' | 'checks'> | undefined,
  b: Pick<ScenarioRecord, 'figures' | 'checks'> | undefined,
): void {
  const fa = a?.figures ?? {};
  const fb = b?.figures ?? {};
  const rows: TableRow[] = [];
  for (const key of [...new Set([...Object.keys(fa), ...Object.keys(fb)])]) {
    const va = fa[key];
    const vb = fb[key];
    const ratio =
      typeof va === 'number' && typeof vb === 'number' && va !== 0
        ? `${(vb / va).toFixed(2)}×`
        : va === vb
          ? '='
          : '';
    // Text figures (JSON of winners by host, reasons) are cut: the ratio is what is compared.
    const cell = (v: Figure | undefined) =>
      v == null ? '-' : typeof v === 'string' && v.length > 60 ? `${v.slice(0, 59)}…` : v;
    rows.push({ figure: key, A: cell(va), B: cell(vb), 'B/A': ratio });
  }
  console.log(heading(name));
  console.log(renderTable(rows));
  const failsB = (b?.checks ?? []).filter((c) => !c.ok).map((c) => c.name);
  if (failsB.length) console.log(loud(`  B fails: ${failsB.join('; ')}`));
}

/** Prints the numeric figures of two results files side by side with their ratio. */
function compare(a: string, b: string): number {
  const read = (f: string) => JSON.parse(readFileSync(f, 'utf8')) as ResultsFile;
  const [x, y] = [read(a), read(b)];
  const who = (r: ResultsFile) =>
    `${r.date}, ${r.machine.cpus} × ${r.machine.model}, commit ${r.machine.commit || 'unknown'}`;
  console.log(`A: ${a} (${who(x)})`);
  console.log(`B: ${b} (${who(y)})`);
  const names = [...new Set([...Object.keys(x.scenarios), ...Object.keys(y.scenarios)])];
  for (const name of names) printComparison(name, x.scenarios[name], y.scenarios[name]);
  return 0;
}

try {
  const args = parseArgs(process.argv.slice(2));
  if (args.stampReadme) {
    const latest = JSON.parse(
      readFileSync(path.join(RESULTS, 'latest.json'), 'utf8'),
    ) as ResultsFile;
    process.exitCode = stampReadme(latest) ? 0 : 1;
  } else process.exitCode = args.compare ? compare(...args.compare) : await runAll(args);
} catch (err) {
  console.error(loud(err instanceof Error ? err.message : String(err)));
  killAllRunnersNow();
  process.exitCode = 1;
}
