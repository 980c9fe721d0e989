/**
 * Fail closed on a demoted primary: GET_LOCK succeeds on a `read_only` server (and root, which
 * baton connects as here, may even write there), yet a lock on a demoted primary excludes nobody.
 * So baton checks `read_only` itself, in the same statement as GET_LOCK.
 *
 * Two runners and an every-second job on a private server (read_only is a global setting: never
 * on the shared one), and a third runner started while the server is read-only. Once runs
 * happen, the test sets `read_only = ON` and proves, in database time, that no winner row started
 * from the moment the SET returned until it set `read_only = OFF` again. To make that instant
 * exact, the test holds the job's own lock across the SET (a fence): a fire contended before the
 * SET either finished (its row is older) or found the lock taken, so no claim can straddle the
 * SET, and there is no margin to allow. Meanwhile every runner
 * says (once) why it does not run, refuses each fire, keeps running, and a manual `baton run`
 * exits 69 naming the cause. After `read_only = OFF`, every runner says so and runs resume.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobLockName } from '../../src/lock-names.js';
import { baton, startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { createTestDatabase, dbNow, runs, type TestDatabase } from '../helpers/db.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { waitFor } from '../helpers/wait.js';

const NAMESPACE = 'ro';
const JOB = 'tick';
const READ_ONLY =
  'the database is read-only (a demoted primary?): no fire runs until it is writable';
const FIRE_REFUSED = 'fire not run: the database is read-only';
const WRITABLE = 'the database is writable again: fires run again';

let server: PrivateServer | undefined;
let db: TestDatabase | undefined;
const runners: RunnerProcess[] = [];

beforeAll(async () => {
  server = await startPrivateServer();
  db = await createTestDatabase('read_only', server.url);
  db.conn.on('error', () => undefined);
});

afterAll(async () => {
  await Promise.all(runners.splice(0).map((r) => r.stop('SIGKILL')));
  await db?.conn.query('SET GLOBAL read_only = OFF').catch(() => undefined);
  await db?.conn.destroy();
  await server?.destroy();
});

describe('a demoted primary (read_only = ON)', () => {
  it('runs nothing while read-only, refuses a manual run, and resumes when writable', async () => {
    const d = db!;
    const config = writeSchedule(`
namespace: ${NAMESPACE}
jobs:
  ${JOB}:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const started = ['a', 'b'].map((host) =>
      startRunner({ config, databaseUrl: d.url, host, args: ['--heartbeat', '1000ms'] }),
    );
    runners.push(...started);
    const [a, b] = started as [RunnerProcess, RunnerProcess];
    await Promise.all([a.ready(), b.ready()]);
    const doneWinners = async (after: Date) =>
      (await runs(d, JOB)).filter(
        (r) => r.winner === 1 && r.status === 'done' && r.started_at > after,
      );
    await waitFor('two finished runs', async () => (await doneWinners(new Date(0))).length >= 2);

    // The fence: take the job's lock (as soon as no run holds it), flip read_only, note the
    // instant, give the lock back. All on one connection, so `onAt` comes after the SET returned.
    const lockName = jobLockName(d.name, NAMESPACE, JOB);
    await waitFor(
      "the job's lock",
      async () => {
        const [row] = await d.query<{ got: number }>('SELECT GET_LOCK(?, 0) AS got', [lockName]);
        return row!.got === 1;
      },
      { intervalMs: 5 },
    );
    await d.conn.query('SET GLOBAL read_only = ON');
    const onAt = await dbNow(d.conn);
    await d.query('SELECT RELEASE_LOCK(?)', [lockName]);

    // A runner that starts now, on the read-only server, starts (it waits for the server to
    // become writable like the others) and says why it does not run anything.
    const c = startRunner({
      config,
      databaseUrl: d.url,
      host: 'c',
      args: ['--heartbeat', '1000ms'],
    });
    runners.push(c);
    await c.ready();

    // Fires keep coming and are refused, on every runner, with the reason in words.
    const refusedSince = (r: RunnerProcess) =>
      r.lines.filter((l) => l.msg === FIRE_REFUSED && Date.parse(String(l.time)) > onAt.getTime());
    for (const r of [a, b, c]) {
      await r.waitForLog(READ_ONLY, () => true, 10_000);
      await waitFor(`${r.host}: two refused fires`, () => refusedSince(r).length >= 2, {
        timeoutMs: 15_000,
      });
    }

    // A manual run is refused too, with the documented exit code and a clear message.
    const manual = await baton([
      'run',
      JOB,
      '--config',
      config,
      '--database-url',
      d.url,
      '--host',
      'ops-laptop',
    ]);
    expect(manual.stderr).toMatch(/^baton: the database is read-only\b/);
    expect(manual.code).toBe(69);

    for (const r of [a, b, c]) expect(r.child.exitCode, `${r.host} still running`).toBeNull();
    const offAt = await dbNow(d.conn);
    await d.conn.query('SET GLOBAL read_only = OFF');

    // Not one winner started while the server was read-only (database time, no margin).
    const whileReadOnly = (await runs(d, JOB)).filter(
      (r) => r.winner === 1 && r.started_at >= onAt && r.started_at <= offAt,
    );
    expect(whileReadOnly).toEqual([]);
    expect((await runs(d, JOB)).filter((r) => r.triggered_by === 'manual')).toEqual([]);

    // Writable again: both runners say so, and runs resume.
    await Promise.all([a, b, c].map((r) => r.waitForLog(WRITABLE, () => true, 10_000)));
    await waitFor('two finished runs after read_only = OFF', async () => {
      return (await doneWinners(offAt)).length >= 2;
    });

    expect(await Promise.all([a, b, c].map((r) => r.stop('SIGTERM')))).toEqual([0, 0, 0]);
    // The only errors were the read-only ones; nothing else went wrong.
    for (const r of [a, b, c]) {
      expect(
        r.errors().filter((l) => l.msg !== READ_ONLY && l.msg !== FIRE_REFUSED),
        r.host,
      ).toEqual([]);
      expect(r.stderr, r.host).toBe('');
      // Told once when it became read-only, once when it became writable.
      expect(r.lines.filter((l) => l.msg === READ_ONLY).length, r.host).toBe(1);
      expect(r.lines.filter((l) => l.msg === WRITABLE).length, r.host).toBe(1);
    }
    const rows = await runs(d, JOB);
    expect(rows.filter((r) => r.status === 'running')).toEqual([]);
  });
});
