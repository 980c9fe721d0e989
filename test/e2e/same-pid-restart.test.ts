/**
 * A runner restarted in a container has the pid its previous incarnation had (pid 1 of the
 * container's PID namespace). When that incarnation is stalled rather than gone — its lock
 * session still alive on the server (a frozen VM, a partition) — the new runner must take its
 * host's registry row over as from any other process, and say that another runner uses its host
 * id; it is not "another runner of this process" (library mode's check for two schedulers with
 * one identity, daemon/registrar.ts), which would refuse to start it.
 *
 * Real processes: each runner is pid 1 of its own PID namespace (`unshare --pid`); the first is
 * stopped with SIGSTOP, so its session stays open.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baton, startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { waitFor } from '../helpers/wait.js';

let db: TestDatabase;
const started: RunnerProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase('same_pid');
});
afterAll(async () => {
  // `unshare --kill-child`: the runner dies with it, stopped or not.
  for (const r of started) await r.stop('SIGKILL');
  await db?.drop();
});

/** The runner itself: the child of `unshare` (pid 1 inside its namespace). */
function innerPid(r: RunnerProcess): number {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === r.child.pid) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no runner under unshare ${r.child.pid}`);
}

describe('a runner restarted with the pid of a stalled previous incarnation', () => {
  it('starts and takes its host over, saying another runner uses the host id', async () => {
    const config = writeSchedule(`
namespace: samepid
jobs:
  rare:
    schedule: "0 0 1 1 *"
    command: ["true"]
`);
    expect((await baton(['migrate', '--database-url', db.url])).code).toBe(0);
    const first = startRunner({ config, databaseUrl: db.url, host: 'box', pidNamespace: true });
    started.push(first);
    await first.ready();
    const rowOf = async () =>
      (
        await db.query<{ pid: number; lock_connection_id: number }>(
          "SELECT pid, lock_connection_id FROM baton_runners WHERE host = 'box'",
        )
      )[0]!;
    const before = await rowOf();
    expect(before.pid).toBe(1);
    // Stalled, not gone: its lock session stays open on the server.
    process.kill(innerPid(first), 'SIGSTOP');

    const second = startRunner({ config, databaseUrl: db.url, host: 'box', pidNamespace: true });
    started.push(second);
    await second.ready();
    await second.waitForLog(
      'another runner uses the host id "box" (pid 1): give every runner its own --host, or ' +
        'history and status cannot tell them apart',
    );
    const after = await waitFor('the row to be the new runner’s', async () => {
      const row = await rowOf();
      return row.lock_connection_id !== before.lock_connection_id ? row : undefined;
    });
    expect(after.pid).toBe(1);
    expect(second.child.exitCode).toBeNull();
  });
});
