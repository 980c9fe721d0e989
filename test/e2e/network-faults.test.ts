/**
 * Real network faults, made by the kernel on a test host's link (helpers/netns.ts): the host is a
 * network namespace with a veth pair to the root namespace, where a private MariaDB listens on
 * 127.0.0.1 and on the pair's root-side address. partition.test.ts proves the same guarantees
 * behind a freezable TCP proxy, on any machine; this file shows what the real thing does.
 *
 * - A partition (every packet of the host's link dropped, both ways): nobody sends a FIN or an
 *   RST, so each side learns nothing from its kernel. The runner gives its lock session up by its
 *   heartbeat deadline (1 s + 3 s) and kills its job while the server still lists that session
 *   and still gives it the job's lock. The server would free the lock after the session's idle
 *   timeout (`wait_timeout`, a minute); the test `KILL`s the session on the server instead, to
 *   stay short — the same end, sooner. Then the other runners win the later fires; the link heals,
 *   the runner reconnects, its aborted run is `lost`.
 * - The host's interface down (`ip link set down`): the same detection, and here nobody frees the
 *   lock until the link is back, when the runner's kernel retransmits the close of the session
 *   the runner gave up; then the server ends that session and frees the lock.
 * - A slow link (the host's packets delayed 200 ms, 5 % of them lost) on one of three runners,
 *   a job every second: no fire has two winners, no two runs overlap, the history matches the
 *   journal, and the fire lag of each runner is printed (not asserted: speed is the
 *   benchmark's). The slow runner comes to each fire a second or more late, and a fire whose
 *   instant finds it holding the job's lock for a stale fire is lost (a known defect, issue 15,
 *   judged apart where it is true).
 *
 * After a real outage a fire sent into the dead link can hold up the job's later fires on that
 * runner until TCP retransmits, so they are contended late ("this runner is behind"): judged
 * apart too (`lateAfterHeal`).
 *
 * Each judged, as the other guarantee tests are, by the history and by the jobs' own journal.
 * Skipped, with the reason printed, where the machine does not allow namespaces (not root, no
 * `ip`) or cannot drop packets (neither `tc netem` nor nftables).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobLockName } from '../../src/lock-names.js';
import { startRunner, type RunnerProcess } from '../helpers/cli.js';
import {
  allRuns,
  byFire,
  createTestDatabase,
  dbNow,
  runs,
  type RunRow,
  type TestDatabase,
} from '../helpers/db.js';
import {
  expectCompleteFires,
  expectNoOverlapInHistory,
  expectOneWinnerPerFire,
} from '../helpers/fires.js';
import {
  expectHistoryMatchesJournal,
  expectNoOverlapInJournal,
  writeJournaledSchedule,
} from '../helpers/ground-truth.js';
import {
  createNetHost,
  faultSupport,
  lossUnsupported,
  netnsUnsupported,
  type NetHost,
} from '../helpers/netns.js';
import { startPrivateServer, type PrivateServer } from '../helpers/private-server.js';
import { alive } from '../helpers/procfs.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

const noNetns = netnsUnsupported();
const noLoss = lossUnsupported();
if (noNetns) console.warn(`network-faults: skipped, ${noNetns}`);
else if (noLoss) console.warn(`network-faults: partition and slow link skipped, ${noLoss}`);
else {
  const s = faultSupport();
  console.log(
    `network-faults: loss by ${s.loss}, delay by ${s.canDelay ? 'netem' : 'a TCP proxy (no netem in this kernel)'}`,
  );
}

const ARGS = [
  '--heartbeat',
  '1000ms',
  '--heartbeat-deadline',
  '3000ms',
  '--reaper-interval',
  '2000ms',
  '--grace',
  '5',
];
/** What a runner logs when its heartbeat missed the deadline (not a connection event). */
const DEADLINE_MISSED = /^the heartbeat failed: .*no answer from the database within 3000 ms$/;

let server: PrivateServer | undefined;
const hosts: Record<'cut' | 'down' | 'slow', NetHost | undefined> = {
  cut: undefined,
  down: undefined,
  slow: undefined,
};
const runners: RunnerProcess[] = [];
const databases: TestDatabase[] = [];
const proxies: TcpProxy[] = [];

/** Time from `now` until 150 ms before the next fire of an every-2-seconds schedule. */
function msUntilBeforeFire(now: number): number {
  return (((2_000 - 150 - (now % 2_000)) % 2_000) + 2_000) % 2_000;
}

async function sessionIds(d: TestDatabase): Promise<number[]> {
  const rows = await d.query<{ id: number }>('SELECT ID AS id FROM information_schema.PROCESSLIST');
  return rows.map((r) => Number(r.id));
}

async function lockHolder(d: TestDatabase, name: string): Promise<number | null> {
  const [row] = await d.query<{ holder: number | null }>('SELECT IS_USED_LOCK(?) AS holder', [
    name,
  ]);
  return row!.holder == null ? null : Number(row!.holder);
}

async function database(label: string): Promise<TestDatabase> {
  const d = await createTestDatabase(label, server!.url);
  // The server may drop this connection when the test ends; never crash the file over it.
  d.conn.on('error', () => undefined);
  databases.push(d);
  return d;
}

function start(
  config: string,
  host: string,
  databaseUrl: string,
  seconds: number,
  netns?: string,
): RunnerProcess {
  const r = startRunner({
    config,
    databaseUrl,
    host,
    args: ARGS,
    env: { JOB_SECONDS: String(seconds) },
    ...(netns != null ? { netns } : {}),
  });
  runners.push(r);
  return r;
}

/** A long job every 2 s, journaled; `$JOB_SECONDS` is each runner's own. */
function longJobSchedule(namespace: string) {
  return writeJournaledSchedule(
    (j) => `
namespace: ${namespace}
jobs:
  long:
    schedule: "*/2 * * * * *"
    command: ${j.yaml({ work: 'sleep $JOB_SECONDS' })}
    overlap: skip
`,
  );
}

describe.skipIf(noNetns != null)('test hosts in network namespaces, real kernel faults', () => {
  beforeAll(async () => {
    hosts.down = createNetHost();
    if (noLoss == null) {
      hosts.cut = createNetHost();
      hosts.slow = createNetHost();
    }
    const present = Object.values(hosts).filter((h): h is NetHost => h != null);
    server = await startPrivateServer({
      bindAddresses: present.map((h) => h.gateway),
      clientHosts: present.map((h) => h.address),
    });
  });

  afterAll(async () => {
    await Promise.all(runners.splice(0).map((r) => r.stop('SIGKILL')));
    for (const d of databases.splice(0)) await d.conn.destroy();
    for (const p of proxies.splice(0)) await p.close();
    await server?.destroy();
    for (const h of Object.values(hosts)) h?.destroy();
  });

  /** The runner's lock session: the server sees it come from the host's own address. */
  async function expectSessionFrom(d: TestDatabase, session: number, h: NetHost): Promise<void> {
    const [row] = await d.query<{ host: string }>(
      'SELECT HOST AS host FROM information_schema.PROCESSLIST WHERE ID = ?',
      [session],
    );
    expect(row?.host, 'the lock session comes through the host’s link').toMatch(
      new RegExp(`^${h.address.replace(/\./g, '\\.')}:\\d+$`),
    );
  }

  describe.skipIf(noLoss != null)('a partition: every packet of the link dropped', () => {
    it('the runner aborts its run by its heartbeat deadline while the server still gives it the lock; one run at a time throughout', async () => {
      const net = hosts.cut!;
      const d = await database('netcut');
      const [NAMESPACE, JOB] = ['netcut', 'long'];
      const { config, journal } = longJobSchedule(NAMESPACE);
      const serverUrl = (h: string) => `mysql://root@${h}:${server!.port}/${d.name}`;

      // `a` alone first, in its namespace, so that it is the one running when the link drops.
      const a = start(config, 'a', serverUrl(net.gateway), 20, net.name);
      const aStarted = await a.ready();
      // `ip netns exec` execs node in place: the child the test holds is the runner itself, so
      // its pid and the signals sent to it are the runner's (the clean SIGTERM stop below).
      expect(Number(aStarted.pid)).toBe(a.child.pid);
      const aSession = Number(aStarted.lockConnectionId);
      await expectSessionFrom(d, aSession, net);
      const won = await a.waitForLog('fire won: running', () => true, 15_000);
      const runId = Number(won.runId);
      const jobPid = Number(won.jobPid);
      const b = start(config, 'b', serverUrl('127.0.0.1'), 3);
      const c = start(config, 'c', serverUrl('127.0.0.1'), 3);
      await Promise.all([b.ready(), c.ready()]);
      for (const r of [b, c]) {
        await r.waitForLog('fire skipped', (l) => /running on a /.test(String(l.reason)), 15_000);
      }
      const lockName = jobLockName(d.name, NAMESPACE, JOB);
      expect(await lockHolder(d, lockName)).toBe(aSession);
      expect(alive(jobPid), 'the job runs when the link drops').toBe(true);

      const faultDb = await dbNow(d);
      net.partition();
      const cutAt = Date.now();

      // No FIN, no RST reached `a`: it gives up by its heartbeat's deadline alone.
      const lost = await a.waitForLog('lock session lost', () => true, 15_000);
      expect(lost.reason).toMatch(DEADLINE_MISSED);
      expect(lost.aborting).toEqual([JOB]);
      await waitFor('the job process of a to be gone', () => !alive(jobPid), {
        timeoutMs: 10_000,
        intervalMs: 20,
      });
      const goneAt = Date.now();
      console.log(
        `partition (kernel): lost after ${Date.parse(String(lost.time)) - cutAt} ms, ` +
          `job gone after ${goneAt - cutAt} ms; the server still lists the session`,
      );

      // Nor did anything reach the server: it still lists `a`'s session and gives it the lock.
      // This is the point of the client-side deadline: the job is gone while the lock still
      // keeps everyone else out.
      expect(await sessionIds(d), 'the server still lists a’s session').toContain(aSession);
      expect(await lockHolder(d, lockName), 'the server still gives a the lock').toBe(aSession);
      expect(net.dropped(), 'packets the kernel dropped on the link').toBeGreaterThan(0);

      // The server ends the session: the idle timeout would, after a minute; a KILL does it now,
      // just before a fire, so that `b` or `c` take over before any reaper looks at `a`'s row.
      await sleep(msUntilBeforeFire(Date.now()));
      expect(await lockHolder(d, lockName)).toBe(aSession);
      const killDb = await dbNow(d);
      await d.query('KILL ?', [aSession]);
      await waitFor(
        'the server to free the lock',
        async () => (await lockHolder(d, lockName)) !== aSession,
      );
      const takeover = await waitFor(
        'a winner on b or c',
        async () => (await runs(d, JOB)).find((r) => r.winner === 1 && r.host !== 'a'),
        { timeoutMs: 20_000 },
      );
      expect(takeover.started_at.getTime()).toBeGreaterThanOrEqual(killDb.getTime());

      // The link heals: `a` reconnects, and its aborted run is `lost`.
      const healedDb = await dbNow(d);
      net.clear();
      const reopened = await a.waitForLog('lock session reopened', () => true, 40_000);
      expect(Number(reopened.lockConnectionId)).not.toBe(aSession);
      const aborted = await waitFor(
        "a's aborted run to get its verdict",
        async () => {
          const [row] = await d.query<{ status: string; error: string | null }>(
            'SELECT status, error FROM baton_runs WHERE id = ?',
            [runId],
          );
          return row && row.status !== 'running' ? row : undefined;
        },
        { timeoutMs: 20_000 },
      );
      expect(aborted.status).toBe('lost');
      const reopenedDb = await dbNow(d);
      await waitFor(
        'a row of a for a fire after it reconnected',
        async () =>
          (await runs(d, JOB)).some(
            (r) => r.host === 'a' && r.scheduled_at.getTime() > reopenedDb.getTime(),
          ),
        { timeoutMs: 20_000 },
      );

      for (const r of [a, b, c]) expect(r.child.exitCode, `${r.host} still running`).toBeNull();
      expect(await Promise.all([a, b, c].map((r) => r.stop('SIGTERM')))).toEqual([0, 0, 0]);

      const rows = await allRuns(d, JOB);
      expect(rows.filter((r) => r.status === 'running')).toEqual([]);
      const late = lateAfterHeal(rows, 'a', faultDb, healedDb);
      judged(rows, () =>
        expectOneWinnerPerFire(
          rows.filter((r) => !late.includes(r)),
          JOB,
          { noWinner: ['overlap', 'lock-being-released'] },
        ),
      );
      // Until the server freed the lock, every fire `b` and `c` saw was skipped for `a`'s run.
      for (const r of rows) {
        if (r.host === 'a' || r.started_at.getTime() >= killDb.getTime()) continue;
        expect(r.winner, `${r.host} ${r.scheduled_at.toISOString()}`).toBeNull();
        expect(r.reason).toMatch(/running on a /);
      }
      expectNoOverlapInHistory(rows, JOB);
      const attempts = journal.attempts(JOB);
      expectNoOverlapInJournal(attempts, JOB);
      expectHistoryMatchesJournal(rows, attempts, JOB);
    });
  });

  describe('the host’s interface down', () => {
    it('the runner aborts its run by its deadline; the lock is freed only once the link is back', async () => {
      const net = hosts.down!;
      const d = await database('netdown');
      const [NAMESPACE, JOB] = ['netdown', 'long'];
      const { config, journal } = longJobSchedule(NAMESPACE);
      const a = start(
        config,
        'a',
        `mysql://root@${net.gateway}:${server!.port}/${d.name}`,
        20,
        net.name,
      );
      const aSession = Number((await a.ready()).lockConnectionId);
      await expectSessionFrom(d, aSession, net);
      const won = await a.waitForLog('fire won: running', () => true, 15_000);
      const runId = Number(won.runId);
      const jobPid = Number(won.jobPid);
      const b = start(config, 'b', `mysql://root@127.0.0.1:${server!.port}/${d.name}`, 3);
      await b.waitForLog('fire skipped', (l) => /running on a /.test(String(l.reason)), 15_000);
      const lockName = jobLockName(d.name, NAMESPACE, JOB);

      const faultDb = await dbNow(d);
      net.linkDown();
      const downAt = Date.now();
      const lost = await a.waitForLog('lock session lost', () => true, 15_000);
      expect(lost.reason).toMatch(DEADLINE_MISSED);
      await waitFor('the job process of a to be gone', () => !alive(jobPid), {
        timeoutMs: 10_000,
        intervalMs: 20,
      });
      console.log(`link down: lost after ${Date.parse(String(lost.time)) - downAt} ms`);
      expect(await sessionIds(d), 'the server still lists a’s session').toContain(aSession);
      expect(await lockHolder(d, lockName), 'the server still gives a the lock').toBe(aSession);

      // Up again: `a` closed the session it gave up; its kernel retransmits that close now
      // that there is a route, the server ends the session and frees the lock — no KILL here.
      const healedDb = await dbNow(d);
      net.clear();
      const upAt = Date.now();
      await waitFor(
        'the server to end a’s old session',
        async () => !(await sessionIds(d)).includes(aSession),
        { timeoutMs: 30_000 },
      );
      console.log(
        `link down: the server ended the old session ${Date.now() - upAt} ms after the link came back`,
      );
      await a.waitForLog('lock session reopened', () => true, 40_000);
      await waitFor(
        "a's aborted run to be lost",
        async () => {
          const [row] = await d.query<{ status: string }>(
            'SELECT status FROM baton_runs WHERE id = ?',
            [runId],
          );
          return row?.status === 'lost';
        },
        { timeoutMs: 20_000 },
      );
      // Any run started since the link came back: `a`'s first fire after its reconnect often
      // starts a few milliseconds after its aborted run is recorded `lost` — sometimes before
      // the test reads the clock here, and then, with `a`'s 20 s job and `overlap: skip`, no
      // other run starts for as long as this wait would last.
      await waitFor(
        'a run after the link came back',
        async () => (await runs(d, JOB)).some((r) => r.winner === 1 && r.started_at > healedDb),
        { timeoutMs: 20_000 },
      );
      expect(await Promise.all([a, b].map((r) => r.stop('SIGTERM')))).toEqual([0, 0]);

      const rows = await allRuns(d, JOB);
      expect(rows.filter((r) => r.status === 'running')).toEqual([]);
      const late = lateAfterHeal(rows, 'a', faultDb, healedDb);
      judged(rows, () =>
        expectOneWinnerPerFire(
          rows.filter((r) => !late.includes(r)),
          JOB,
          { noWinner: ['overlap', 'lock-being-released'] },
        ),
      );
      expectNoOverlapInHistory(rows, JOB);
      const attempts = journal.attempts(JOB);
      expectNoOverlapInJournal(attempts, JOB);
      expectHistoryMatchesJournal(rows, attempts, JOB);
    });
  });

  describe.skipIf(noLoss != null)(
    'a slow, lossy link (200 ms, 5 %) on one of three runners',
    () => {
      it('no fire runs twice, no two runs overlap; the fire lag of each runner is printed', async () => {
        const net = hosts.slow!;
        const d = await database('netslow');
        const JOB = 'tick';
        const { config, journal } = writeJournaledSchedule(
          (j) => `
namespace: netslow
jobs:
  ${JOB}:
    schedule: "* * * * * *"
    command: ${j.yaml({ work: 'sleep 0.1' })}
`,
        );
        // The host's packets: 200 ms late (netem, or the proxy where the kernel has no netem) and
        // 5 % of them lost (by the kernel, either way).
        let slowUrl = `mysql://root@${net.gateway}:${server!.port}/${d.name}`;
        if (faultSupport().canDelay) {
          net.degrade({ delayMs: 200, lossPercent: 5 });
        } else {
          net.degrade({ lossPercent: 5 });
          const proxy = await startTcpProxy(
            { host: '127.0.0.1', port: server!.port },
            { upMs: 200, listenHost: net.gateway },
          );
          proxies.push(proxy);
          slowUrl = proxy.url(d.name);
        }
        const near = `mysql://root@127.0.0.1:${server!.port}/${d.name}`;
        const all = [
          start(config, 'slow', slowUrl, 0, net.name),
          start(config, 'near1', near, 0),
          start(config, 'near2', near, 0),
        ];
        await Promise.all(all.map((r) => r.ready()));
        const from = new Date((await dbNow(d)).getTime() + 2_000);
        const until = new Date(from.getTime() + 20_000);
        const last = new Date(Math.floor(until.getTime() / 1_000) * 1_000);
        await waitFor(
          'every runner to have attempted the last fire of the window',
          async () => {
            const [row] = await d.query<{ n: number }>(
              'SELECT COUNT(*) AS n FROM baton_runs WHERE job = ? AND scheduled_at = ?',
              [JOB, last],
            );
            return Number(row!.n) === all.length;
          },
          { timeoutMs: 60_000 },
        );
        expect(await Promise.all(all.map((r) => r.stop('SIGTERM')))).toEqual([0, 0, 0]);

        const rows = (await allRuns(d, JOB)).filter(
          (r) => r.scheduled_at >= from && r.scheduled_at <= until,
        );
        expectCompleteFires(rows, JOB, {
          from,
          until,
          everyMs: 1_000,
          hosts: ['slow', 'near1', 'near2'],
        });
        // The whole history: a skip in the window may name a run of a fire before it.
        const history = await allRuns(d, JOB);
        // The slow runner comes to each fire late (0.7–2 s here: each fire a few round trips),
        // and may hold the job's lock while the fire key refuses it a fire already run — when
        // the next instant comes. The near runners then ask for the lock again while it passes
        // (fire-protocol.ts, LOCK_PASSING_WAIT_MS, 1 s) and win the fire; only a lock that
        // passes slower than that (a lost packet's retransmission on top of the round trips)
        // can still leave a fire without a winner. Such a fire is judged apart, and only where
        // it is true: a row from every runner, no winner, every near skip naming slow, and
        // slow's row of an earlier fire written after this fire's instant.
        // (A near skip may name slow's session by its connection alone: see holdsForSlow.)
        // Or the slow runner's lock session dies (a lost packet's retransmission past the
        // heartbeat deadline): until the server drops the old session, or until the registry has
        // the new one the slow runner reconnected with, a near runner meets "the lock is held by
        // connection N, which has no running row" — true only if N is a lock session the slow
        // runner itself logged (started, lost or reopened with), and only after it lost one.
        const sessionsOf = (...messages: string[]) =>
          new Set(
            all[0]!.lines
              .filter((l) => messages.includes(l.msg) && l.lockConnectionId != null)
              .map((l) => Number(l.lockConnectionId)),
          );
        const slowLostSessions = sessionsOf('lock session lost');
        const slowSessions = sessionsOf(
          'runner started',
          'lock session lost',
          'lock session reopened',
        );
        const namesSlow = (reason: string | null) => {
          if (/^this fire is being claimed by slow /.test(reason ?? '')) return 'claiming';
          const held = /^the lock is held by connection (\d+), which has no running row/.exec(
            reason ?? '',
          );
          return held && slowSessions.has(Number(held[1])) ? 'lost-session' : null;
        };
        const lostToLostSession = new Set(
          [...byFire(rows)]
            .filter(([, fire]) => {
              const nearSkips = fire.filter((r) => r.host !== 'slow');
              return (
                fire.every((r) => r.winner == null) &&
                nearSkips.length === 2 &&
                nearSkips.some((r) => namesSlow(r.reason) === 'lost-session') &&
                nearSkips.every((r) => namesSlow(r.reason) != null)
              );
            })
            .map(([at]) => at),
        );
        // The near runners name slow when the registry names its lock session as a live
        // runner's; one it cannot name is reported by its connection alone (seen once in a
        // clean-clone run, 2026-12-06, slow's late row of the fire before proving that it was
        // contending). The holder is then slow's if it is no lock session a near runner logged:
        // near1 and near2 are the ones asking.
        const nearSessions = new Set(
          all
            .slice(1)
            .flatMap((r) => r.lines)
            .filter((l) => l.lockConnectionId != null)
            .map((l) => Number(l.lockConnectionId)),
        );
        const holdsForSlow = (reason: string | null) => {
          if (namesSlow(reason) === 'claiming') return true;
          const held = /^the lock is held by connection (\d+), which has no running row/.exec(
            reason ?? '',
          );
          return held != null && !nearSessions.has(Number(held[1]));
        };
        const lostToLateContention = new Set(
          [...byFire(rows)]
            .filter(([at, fire]) => {
              const nearSkips = fire.filter((r) => r.host !== 'slow');
              return (
                fire.every((r) => r.winner == null) &&
                nearSkips.length === 2 &&
                nearSkips.every((r) => holdsForSlow(r.reason)) &&
                history.some(
                  (r) =>
                    r.host === 'slow' &&
                    r.scheduled_at.getTime() < at &&
                    r.started_at.getTime() > at,
                )
              );
            })
            .map(([at]) => at),
        );
        console.log(
          `slow link: ${lostToLateContention.size} of ${byFire(rows).size} fires lost to the slow ` +
            `runner's late contention: ${[...lostToLateContention].map((t) => new Date(t).toISOString().slice(17, 19)).join(' ')}`,
        );
        expect(lostToLateContention.size, 'fires lost to late contention').toBeLessThanOrEqual(2);
        console.log(
          `slow link: ${lostToLostSession.size} fires lost to a lock session the slow runner ` +
            `lost (${slowLostSessions.size} lost)`,
        );
        // A fire or two per session lost (none if it lost none).
        expect(lostToLostSession.size, 'fires lost to a lost session').toBeLessThanOrEqual(
          2 * slowLostSessions.size,
        );
        try {
          expectOneWinnerPerFire(
            history.filter(
              (r) =>
                !lostToLateContention.has(r.scheduled_at.getTime()) &&
                !lostToLostSession.has(r.scheduled_at.getTime()),
            ),
            JOB,
            { noWinner: ['overlap', 'lock-being-released'] },
          );
        } catch (err) {
          printHistory(history);
          throw err;
        }
        expectNoOverlapInHistory(history, JOB);
        expectNoOverlapInJournal(journal.attempts(JOB), JOB);
        expectHistoryMatchesJournal(rows, journal.attempts(JOB, { from, until }), JOB);

        // Fire lag by runner: a winner's `started_at` is when it claimed the fire; a skipper's,
        // when it wrote its skip row. Reported, not bounded (only a sanity bound, far above).
        const lag = (r: (typeof rows)[number]) => r.started_at.getTime() - r.scheduled_at.getTime();
        const stats = (xs: number[]) => {
          const s = [...xs].sort((x, y) => x - y);
          return s.length === 0
            ? 'none'
            : `p50 ${s[Math.floor((s.length - 1) / 2)]} ms, max ${s[s.length - 1]} ms (${s.length})`;
        };
        const median = (xs: number[]) =>
          [...xs].sort((x, y) => x - y)[Math.floor((xs.length - 1) / 2)] ?? 0;
        for (const host of ['slow', 'near1', 'near2']) {
          const mine = rows.filter((r) => r.host === host);
          const wins = mine.filter((r) => r.winner === 1);
          console.log(
            `slow link: ${host}: won ${wins.length} of ${mine.length}; lag of its wins ${stats(wins.map(lag))}; ` +
              `of all its rows ${stats(mine.map(lag))}`,
          );
        }
        for (const r of rows)
          expect(lag(r), `${r.host} ${r.scheduled_at.toISOString()}`).toBeLessThan(30_000);
        // The situation: the kernel dropped the slow host's packets, and its rows came later than
        // the near runners' (the delay was there).
        console.log(`slow link: ${net.dropped()} packets dropped by the kernel`);
        expect(net.dropped()).toBeGreaterThan(0);
        const slowRows = rows.filter((r) => r.host === 'slow').map(lag);
        const nearRows = rows.filter((r) => r.host !== 'slow').map(lag);
        expect(median(slowRows)).toBeGreaterThan(median(nearRows));
      });
    },
  );
});

/**
 * The skips of `host` decided late after its link healed (more than a second after their fire's
 * instant). Seen after a real outage, not behind the proxy: a fire due after the link dropped
 * but before the runner noticed sent its statements (its skip row, on the pool) into the dead
 * link; they got through only after the heal, at TCP's next retransmission (its timer backed
 * off through the outage), and the job's later fires, chained behind that one, were contended
 * only then, all at once — against a later state ("a later fire … is already running on …;
 * this runner is behind", or a lock being released a second after the instant). The one-winner
 * judge reads a skip as decided at its instant, so these rows are judged apart, and only where
 * that is what they are: skips (no winner) of `host`, of fires after the fault began, decided
 * after the heal; the fires' other rows still meet the one-winner judgement.
 */
function lateAfterHeal(
  rows: readonly RunRow[],
  host: string,
  faultDb: Date,
  healedDb: Date,
): RunRow[] {
  const late = rows.filter(
    (r) =>
      r.host === host &&
      r.winner == null &&
      r.started_at.getTime() >= healedDb.getTime() &&
      r.started_at.getTime() - r.scheduled_at.getTime() > 1_000,
  );
  for (const r of late) {
    expect(
      r.scheduled_at.getTime(),
      `${host}'s late skip of ${r.scheduled_at.toISOString()}: a fire after the fault`,
    ).toBeGreaterThanOrEqual(faultDb.getTime());
  }
  if (late.length > 0) {
    console.log(
      `${host} decided ${late.length} fire(s) late after the heal: ` +
        late
          .map(
            (r) =>
              `${r.scheduled_at.toISOString().slice(14, 23)} at ${r.started_at.toISOString().slice(14, 23)}`,
          )
          .join(', '),
    );
  }
  return late;
}

/** Runs a judgement of the history; on a failure, prints the history first. */
function judged(rows: readonly RunRow[], judge: () => void): void {
  try {
    judge();
  } catch (err) {
    printHistory(rows);
    throw err;
  }
}

/** The history, one line a row, in database time: to read a failure by. */
function printHistory(rows: readonly RunRow[]): void {
  const t = (d: Date | null) => (d ? d.toISOString().slice(14, 23) : '-');
  console.log(
    rows
      .map(
        (r) =>
          `${t(r.scheduled_at)} ${r.host.padEnd(6)} ${String(r.winner ?? '-')} ${r.status.padEnd(8)} ` +
          `${t(r.started_at)}..${t(r.finished_at)} ${r.reason ?? ''}`,
      )
      .join('\n'),
  );
}
