/**
 * The command line's start: what one `baton` invocation costs before it does its work, and with
 * it. Operators type these, scripts and monitoring (`baton status` as a Nagios check, every
 * minute on every server) call them, and the test suite runs thousands of them.
 *
 * Each command is run `runs` times in a row (quick: 5), nothing else running: the wall time from
 * spawn to exit, and the process's own CPU (user + system, `process.cpuUsage()` written at exit
 * by a one-line `--import` hook, the only thing added to the command). Commands: `--version`
 * (every command's modules: help and version list them all), `status --help` (one command's
 * modules), `validate` (reads and checks a schedules file, no database), `history` (one read of
 * the database) and `start --help` (the daemon's modules, what every runner loads).
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Check, Scenario, TableRow } from '../lib/index.js';
import { BATON_BIN, cleanEnv, makeTempDir, percentiles, round } from '../lib/index.js';

/** Writes the process's CPU time to $BENCH_CPU_FILE as it exits. */
const CPU_HOOK = `
import { writeFileSync } from 'node:fs';
process.on('exit', () => {
  const { user, system } = process.cpuUsage();
  writeFileSync(process.env.BENCH_CPU_FILE, String((user + system) / 1000));
});
`;

interface Invocation {
  wallMs: number;
  cpuMs: number;
}

async function invoke(args: string[], hook: string, cpuFile: string): Promise<Invocation> {
  const started = performance.now();
  const child = spawn(process.execPath, ['--import', hook, BATON_BIN, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: cleanEnv({ BENCH_CPU_FILE: cpuFile }),
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const wallMs = performance.now() - started;
  if (code !== 0) throw new Error(`baton ${args.join(' ')} exited ${code}: ${stderr.trim()}`);
  return { wallMs, cpuMs: Number(readFileSync(cpuFile, 'utf8')) };
}

export default {
  name: 'cli-start',
  title: 'The command line: what one baton invocation costs, start to exit',
  async run(ctx) {
    const runs = ctx.quick ? 5 : 20;
    const dir = makeTempDir('baton-bench-cli-');
    const hook = path.join(dir, 'cpu-hook.mjs');
    writeFileSync(hook, CPU_HOOK);
    const cpuFile = path.join(dir, 'cpu');
    const config = ctx.writeSchedule({
      namespace: 'bench-cli',
      jobs: { tick: { schedule: '* * * * * *', command: ['true'] } },
    });
    // A migrated database with a little history, so that `history` reads real rows.
    const [runner] = await ctx.startRunners(1, { config, hostPrefix: 'cli' });
    await ctx.waitForRows('SELECT id FROM baton_runs', [], 3, 15_000);
    await runner!.stop('SIGTERM');

    const commands: Record<string, string[]> = {
      version: ['--version'],
      status_help: ['status', '--help'],
      validate: ['validate', '--config', config],
      history: ['history', '--config', config, '--database-url', ctx.db.url, '--limit', '5'],
      start_help: ['start', '--help'],
    };
    const figures: Record<string, number> = {};
    const table: TableRow[] = [];
    for (const [name, args] of Object.entries(commands)) {
      ctx.log(`baton ${args[0]} … × ${runs}`);
      await invoke(args, hook, cpuFile); // the page cache warm, as for an operator's second call
      const samples: Invocation[] = [];
      for (let i = 0; i < runs; i++) samples.push(await invoke(args, hook, cpuFile));
      const wall = percentiles(samples.map((s) => s.wallMs));
      const cpu = percentiles(samples.map((s) => s.cpuMs));
      figures[`${name}_wall_p50_ms`] = round(wall.p50, 1);
      figures[`${name}_wall_max_ms`] = round(wall.max, 1);
      figures[`${name}_cpu_p50_ms`] = round(cpu.p50, 1);
      table.push({
        command: `baton ${args.filter((a) => !a.includes('/')).join(' ')}`,
        'wall p50 / max (ms)': `${round(wall.p50, 0)} / ${round(wall.max, 0)}`,
        'CPU p50 (ms)': round(cpu.p50, 0),
      });
    }
    // A bare Node, for scale: what no command can go below.
    const bare = await new Promise<number>((resolve, reject) => {
      const started = performance.now();
      const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
      child.on('error', reject);
      child.on('exit', () => resolve(performance.now() - started));
    });
    figures.bare_node_wall_ms = round(bare, 1);
    const checks: Check[] = [];
    return {
      figures,
      table,
      notes: [
        `${runs} runs of each command after one to warm the page cache; CPU is the command's ` +
          `own (user + system) at its exit. A bare \`node -e 0\` took ${round(bare, 0)} ms.`,
      ],
      checks,
    };
  },
} satisfies Scenario;
