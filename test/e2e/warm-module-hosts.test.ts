/**
 * Warm module hosts (src/execution/warm-hosts.ts): a daemon's module job runs in a process that
 * was started ahead of its fire, one process per run, and nothing of a warm host outlives what it
 * was warmed for.
 * - A `.mjs` and a `.ts` job each run in a process that existed before the fire's instant (its
 *   own start time, `performance.timeOrigin`, against `scheduledAt`), a new process per run, in
 *   its own process group, with the job's directory, `env:` and fire variables, its output in the
 *   history; a `timeout` still stops it through `ctx.signal`.
 * - A module changed on disk runs as changed at its next fire; a reload replaces the warm host
 *   (the old one is gone, the new schedule's `env:` reaches the next run, which is warm again).
 * - Warm hosts killed while they wait are replaced, and the next fires still run.
 * - No warm host is left after the runner stops, by SIGTERM (the first test) or SIGKILL (the
 *   third).
 * - A job that fires rarely (hourly) gets no warm host: it would hold memory all day for a
 *   start-up that is a rounding error of an hourly batch (src/daemon/warm-policy.ts).
 * - `.ts` jobs in a CommonJS and in an ES module package scope run in hosts that had warmed tsx
 *   up before the fire (src/execution/tsx-warm-up.ts: the host's own report, in the runner's
 *   debug log, for the very pid that ran the job), and see what `tsx job.ts` gives a file
 *   (`import.meta.url`, `__dirname`, `__filename`, `require`), their ctx and ctx.log's line as
 *   before; tsx's disk cache keeps whole entries of the jobs' files (a host's exit no longer cuts
 *   its writes off: the CommonJS job's was left empty); a `.ts` file changed on disk runs as
 *   changed; warming writes nothing into the jobs' folders.
 * Real runner processes, /proc and the rows; no assertion on how fast anything is.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { command, ROOT, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { dbNow, runs, type RunRow } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { alive, killGroup, parentOf, processGone, watchdogsOf } from '../helpers/procfs.js';
import { sleep, waitFor } from '../helpers/wait.js';

const fleet = useFleet('warm_hosts', { perTest: true });

/** What each run of the probe job writes down about its own process. */
interface Probe {
  pid: number;
  pgid: number;
  startedAt: number;
  scheduledAt: number;
  cwd: string;
  mark: string | undefined;
  runId: string | undefined;
  version: string;
}

/** A module job that writes a Probe to `probe-<job>-<run id>.json` in its directory. */
function probeSource(version: string, typed = false): string {
  const ctx = typed ? 'ctx: { job: string; runId: number; scheduledAt: Date }' : 'ctx';
  return `import { readFileSync, writeFileSync } from 'node:fs';
export default async (${ctx}) => {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const probe = {
    pid: process.pid,
    pgid: Number(fields[2]),
    startedAt: performance.timeOrigin,
    scheduledAt: ctx.scheduledAt.getTime(),
    cwd: process.cwd(),
    mark: process.env.MARK,
    runId: process.env.BATON_RUN_ID,
    version: ${JSON.stringify(version)},
  };
  writeFileSync('probe-' + ctx.job + '-' + ctx.runId + '.json', JSON.stringify(probe));
  console.log('hello from run ' + ctx.runId);
};
`;
}

function readProbe(dir: string, job: string, runId: number): Probe | undefined {
  try {
    return JSON.parse(readFileSync(path.join(dir, `probe-${job}-${runId}.json`), 'utf8')) as Probe;
  } catch {
    return undefined;
  }
}

/** The runner's waiting or running module hosts started warm (`module-host.js --warm`). */
function warmHosts(runnerPid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        const host = argv.some((a) => a.endsWith('module-host.js')) && argv.includes('--warm');
        return host && alive(pid) && parentOf(pid) === runnerPid;
      } catch {
        return false; // gone meanwhile
      }
    });
}

/** The finished runs of `job`, oldest first, once there are at least `n`. */
function finishedRuns(job: string, n: number, timeoutMs = 20_000): Promise<RunRow[]> {
  return waitFor(
    `${n} finished runs of ${job}`,
    async () => {
      const rows = (await runs(fleet.db, job)).filter((r) => r.winner === 1);
      const done = rows.filter((r) => r.status !== 'running');
      return done.length >= n ? done : undefined;
    },
    { timeoutMs },
  );
}

const SCHEDULE = (mark: string) => `
namespace: warm
jobs:
  plain:
    schedule: "* * * * * *"
    module: probe.mjs
    env: { MARK: ${mark} }
  typed:
    schedule: "* * * * * *"
    module: probe.ts
    env: { MARK: ${mark} }
  slow:
    schedule: "*/2 * * * * *"
    module: slow.mjs
    timeout: 1s
`;

const SLOW = `export default (ctx) => new Promise((resolve) => {
  ctx.signal.addEventListener('abort', () => { console.log('aborted: ' + ctx.signal.reason.message); resolve(); });
  setTimeout(resolve, 10_000);
});
`;

async function startOne(yaml: string, files: Record<string, string>) {
  const config = writeSchedule(yaml, files);
  const [runner] = await fleet.start(['w1'], { config });
  return { config, dir: path.dirname(config), runner: runner!, pid: runner!.child.pid! };
}

/**
 * A `.ts` job that writes what tsx gave its file (read at the top level, and printed there when
 * the file is run as `tsx job.ts`), its ctx and its process to `probe-<job>-<run id>.json`.
 */
function typedProbe(version: string): string {
  return `import { readFileSync, writeFileSync } from 'node:fs';
const where = {
  url: import.meta.url,
  dirname: typeof __dirname === 'undefined' ? null : __dirname,
  filename: typeof __filename === 'undefined' ? null : __filename,
  require: typeof require,
};
if (process.env.BATON_RUN_ID == null) console.log(JSON.stringify(where));
interface Ctx {
  job: string;
  runId: number;
  scheduledAt: Date;
  fire: { worker: { slot: number } };
  log: { info(msg: string): void };
}
export default async (ctx: Ctx): Promise<void> => {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
  ctx.log.info('typed hello');
  const probe = {
    pid: process.pid,
    pgid,
    startedAt: performance.timeOrigin,
    scheduledAt: ctx.scheduledAt.getTime(),
    version: ${JSON.stringify(version)},
    ctx: { job: ctx.job, runId: ctx.runId, slot: ctx.fire.worker.slot },
    where,
  };
  writeFileSync('probe-' + ctx.job + '-' + ctx.runId + '.json', JSON.stringify(probe));
};
`;
}

interface TypedProbe {
  pid: number;
  pgid: number;
  startedAt: number;
  scheduledAt: number;
  version: string;
  ctx: { job: string; runId: number; slot: number };
  where: { url: string; dirname: string | null; filename: string | null; require: string };
}

/** The runner's debug line of a host that said it was warm (warm-hosts.ts). */
interface WarmLine {
  time: string;
  hostPid: number;
  warmUp?: { imported: string[]; esbuild: boolean; error?: string };
}

const SCOPES = [
  { job: 'cjs', type: 'commonjs' },
  { job: 'esm', type: 'module' },
] as const;

describe('warm module hosts', () => {
  it('runs each module run in its own process, started before the fire, with its env and output', async () => {
    const { dir, pid, runner } = await startOne(SCHEDULE('one'), {
      'probe.mjs': probeSource('v1'),
      'probe.ts': probeSource('v1', true),
      'slow.mjs': SLOW,
    });
    expect(warmHosts(pid).length).toBeGreaterThanOrEqual(2);
    for (const job of ['plain', 'typed']) {
      // The first fire may come within a moment of the runner's start: judge the later ones.
      const rows = (await finishedRuns(job, 3)).slice(1);
      const probes = rows.map((row) => {
        expect(row.status, `${job} ${row.id}: ${row.error}`).toBe('done');
        expect(row.output_tail).toContain(`hello from run ${row.id}`);
        const probe = readProbe(dir, job, row.id)!;
        expect(probe.runId).toBe(String(row.id));
        return probe;
      });
      for (const probe of probes) {
        // The process existed before the instant it runs for: it was not spawned for the fire.
        expect(probe.startedAt, job).toBeLessThan(probe.scheduledAt);
        expect(probe.pgid).toBe(probe.pid);
        expect(probe.cwd).toBe(dir);
        expect(probe.mark).toBe('one');
      }
      // One process per run.
      expect(new Set(probes.map((p) => p.pid)).size).toBe(probes.length);
    }
    const [slow] = await finishedRuns('slow', 1);
    expect(slow).toMatchObject({ status: 'timeout' });
    expect(slow!.output_tail).toContain('aborted: run stopped by the runner (SIGTERM)');

    const hosts = warmHosts(pid);
    expect(hosts.length).toBeGreaterThanOrEqual(2);
    await runner.stop('SIGTERM');
    for (const host of hosts) await waitFor(`warm host ${host} gone`, () => processGone(host));
  });

  it('runs a module changed on disk as changed, and a reload replaces the warm host', async () => {
    const yaml = SCHEDULE('one').replace(/ {2}typed:[\s\S]*$/, '');
    const { config, dir, runner, pid } = await startOne(yaml, { 'probe.mjs': probeSource('v1') });
    const before = await finishedRuns('plain', 2);
    expect(readProbe(dir, 'plain', before.at(-1)!.id)?.version).toBe('v1');
    writeFileSync(path.join(dir, 'probe.mjs'), probeSource('v2'));
    const changedAt = await dbNow(fleet.db);
    await waitFor('a run of the changed module', async () => {
      const rows = await finishedRuns('plain', 1);
      const later = rows.filter((r) => r.scheduled_at.getTime() > changedAt.getTime() + 1000);
      return later.length > 0 && readProbe(dir, 'plain', later[0]!.id)?.version === 'v2';
    });

    const old = await waitFor('a waiting host', () => {
      const hosts = warmHosts(pid);
      return hosts.length > 0 ? hosts : undefined;
    });
    writeFileSync(config, yaml.replace('MARK: one', 'MARK: two'));
    runner.child.kill('SIGHUP');
    await runner.waitForLog('schedule reloaded');
    const reloadedAt = await dbNow(fleet.db);
    for (const host of old) await waitFor(`old warm host ${host} gone`, () => processGone(host));
    const after = await waitFor('a run of the reloaded schedule', async () => {
      const rows = await finishedRuns('plain', 1);
      return rows.find((r) => r.scheduled_at.getTime() > reloadedAt.getTime() + 1000);
    });
    const probe = readProbe(dir, 'plain', after.id)!;
    expect(probe.mark).toBe('two');
    expect(old).not.toContain(probe.pid);
    expect(probe.startedAt).toBeLessThan(probe.scheduledAt);
  });

  it('replaces warm hosts killed while they wait, and the next fires still run', async () => {
    const yaml = `
namespace: warm
jobs:
  plain:
    schedule: "*/2 * * * * *"
    module: probe.mjs
`;
    const { dir, pid, runner } = await startOne(yaml, { 'probe.mjs': probeSource('v1') });
    const [first] = await finishedRuns('plain', 1);
    const ran = readProbe(dir, 'plain', first!.id)!.pid;
    // Each waiting host has its run's watchdog beside it already (watchdog.ts: a fire's path
    // spawns none, and no run is ever without one); a killed host's watchdog exits, stopping
    // nothing. Hosts and watchdogs are looked at together, retried: a fire that takes a host in
    // between ends with that host's watchdog gone a moment before the host. Without watchdogs
    // started with the hosts there is at most one (a run's), and this times out.
    const { waiting, dogs } = await waitFor('the waiting warm hosts, with their watchdogs', () => {
      const hosts = warmHosts(pid).filter((p) => p !== ran);
      const watchdogs = watchdogsOf(pid);
      return hosts.length === 2 && watchdogs.length >= 2
        ? { waiting: hosts, dogs: watchdogs }
        : undefined;
    });
    for (const host of waiting) killGroup(host);
    for (const host of waiting) await waitFor(`${host} gone`, () => processGone(host));
    for (const dog of dogs) await waitFor(`watchdog ${dog} gone`, () => processGone(dog));
    const killedAt = await dbNow(fleet.db);
    const replaced = await waitFor('new warm hosts', () => {
      const hosts = warmHosts(pid).filter((p) => p !== ran && !waiting.includes(p));
      return hosts.length === 2 ? hosts : undefined;
    });
    const rows = await waitFor('three fires after the kill', async () => {
      const all = await finishedRuns('plain', 1);
      const later = all.filter((r) => r.scheduled_at.getTime() > killedAt.getTime());
      return later.length >= 3 ? later : undefined;
    });
    for (const row of rows) expect(row.status, `${row.id}: ${row.error}`).toBe('done');
    const pids = rows.map((row) => readProbe(dir, 'plain', row.id)!.pid);
    for (const host of waiting) expect(pids).not.toContain(host);
    expect(pids.some((p) => replaced.includes(p))).toBe(true);

    // A runner killed outright: its waiting host exits when their channel closes.
    const left = await waitFor('a waiting host', () => {
      const hosts = warmHosts(pid);
      return hosts.length > 0 ? hosts : undefined;
    });
    await runner.stop('SIGKILL');
    for (const host of left) await waitFor(`warm host ${host} gone`, () => processGone(host));
  });

  it('warms tsx up before the fire for .ts jobs in a CommonJS and an ES module scope, which run as tsx runs them', async () => {
    const config = writeSchedule(`
namespace: warm
jobs:
${SCOPES.map(({ job }) => `  ${job}:\n    schedule: "*/2 * * * * *"\n    module: ${job}/job.ts\n    cwd: ${job}\n`).join('')}`);
    const dir = path.dirname(config);
    for (const { job, type } of SCOPES) {
      mkdirSync(path.join(dir, job));
      writeFileSync(path.join(dir, job, 'package.json'), JSON.stringify({ type }));
      writeFileSync(path.join(dir, job, 'job.ts'), typedProbe('v1'));
    }
    // tsx's disk cache (os.tmpdir()/tsx-<uid>) of this runner's jobs alone, to be looked at.
    const tmp = path.join(dir, 'tmp');
    mkdirSync(tmp);
    const [runner] = (await fleet.start(['w1'], {
      config,
      args: ['--log-level', 'debug'],
      env: { TMPDIR: tmp },
    })) as [RunnerProcess];
    for (const { job, type } of SCOPES) {
      const folder = path.join(dir, job);
      // What a user who tries the file with tsx sees.
      const tsx = await command(path.join(ROOT, 'node_modules/.bin/tsx'), ['job.ts'], {
        cwd: folder,
      });
      expect(tsx.code, tsx.stderr).toBe(0);
      const where = JSON.parse(tsx.stdout) as TypedProbe['where'];
      expect(where.url).toBe(pathToFileURL(path.join(folder, 'job.ts')).href);
      expect(where.dirname).toBe(type === 'commonjs' ? folder : null);

      // The first fire may come within a moment of the runner's start: judge the later ones.
      const rows = (await finishedRuns(job, 3)).slice(1);
      const warmedAhead: boolean[] = [];
      for (const row of rows) {
        expect(row.status, `${job} ${row.id}: ${row.error}`).toBe('done');
        const probe = JSON.parse(
          readFileSync(path.join(folder, `probe-${job}-${row.id}.json`), 'utf8'),
        ) as TypedProbe;
        expect(probe.where).toEqual(where);
        expect(probe.ctx).toEqual({ job, runId: row.id, slot: 1 });
        expect(probe.pgid).toBe(probe.pid);
        expect(probe.startedAt, job).toBeLessThan(probe.scheduledAt);
        // ctx.log: the run's child of the host's root logger writes the lines it always did.
        const line = (row.output_tail ?? '').split('\n').find((l) => l.includes('typed hello'))!;
        expect(Object.keys(JSON.parse(line) as object)).toEqual([
          'level',
          'time',
          'job',
          'runId',
          'host',
          'worker',
          'msg',
        ]);
        expect(JSON.parse(line)).toMatchObject({ job, runId: row.id, host: 'w1', worker: 1 });
        // The process that ran the job had warmed tsx up for its scope before the fire.
        const warm = runner.lines.find(
          (l) => l.msg === 'module host warm' && l.hostPid === probe.pid,
        ) as WarmLine | undefined;
        expect(warm, `${job}: no warm-up reported by ${probe.pid}`).toBeDefined();
        expect(warm!.warmUp).toEqual({ imported: ['commonjs', 'module'], ms: expect.any(Number) });
        warmedAhead.push(Date.parse(warm!.time) < probe.scheduledAt);
      }
      // Warmed ahead of the fire: each host's warm-up is begun before its fire (its process
      // started before, above), and on a busy machine one may finish a moment after the instant
      // (CI: 33 ms); at least one of the job's judged runs shows it done ahead.
      expect(warmedAhead, `${job}: no run's host was warm before its fire`).toContain(true);
    }

    // tsx's cache has whole entries (JSON) of the warm-up files and of both jobs, none cut off.
    const [cacheDir] = readdirSync(tmp).filter((d) => d.startsWith('tsx-'));
    const entries = readdirSync(path.join(tmp, cacheDir!)).map((f) =>
      readFileSync(path.join(tmp, cacheDir!, f), 'utf8'),
    );
    for (const entry of entries) expect(() => JSON.parse(entry), entry).not.toThrow();
    expect(entries.filter((e) => e.includes('typed hello'))).toHaveLength(SCOPES.length);

    // Changed on disk: the next runs import the new file (tsx's cache is keyed by the source).
    for (const { job } of SCOPES) writeFileSync(path.join(dir, job, 'job.ts'), typedProbe('v2'));
    const changedAt = await dbNow(fleet.db);
    for (const { job } of SCOPES) {
      await waitFor(`a run of the changed ${job}/job.ts`, async () => {
        const later = (await finishedRuns(job, 1)).filter(
          (r) => r.scheduled_at.getTime() > changedAt.getTime() + 1000,
        );
        const probe = later[0] && readProbe(path.join(dir, job), job, later[0].id);
        return (probe as unknown as TypedProbe | undefined)?.version === 'v2';
      });
    }
    // Warming wrote nothing into the jobs' folders (its files are baton's own, read only).
    for (const { job } of SCOPES) {
      const files = readdirSync(path.join(dir, job)).filter((f) => !f.startsWith('probe-'));
      expect(files.sort()).toEqual(['job.ts', 'package.json']);
    }
    expect(runner.errors()).toEqual([]);
  });

  it('keeps no warm host for a module job that fires rarely (it would start cold)', async () => {
    const yaml = `
namespace: warm
jobs:
  hourly:
    schedule: "0 * * * *"
    module: probe.mjs
`;
    const { pid } = await startOne(yaml, { 'probe.mjs': probeSource('v1') });
    // A frequent job's hosts are spawned within a moment of the load (the tests above): give
    // them far longer than that, and none may appear for a job that fires once an hour.
    await sleep(2_000);
    expect(warmHosts(pid)).toEqual([]);
  });
});
