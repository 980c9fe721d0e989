/**
 * The read-only dashboard of `baton start --http` (issue 6), in a real headless Chromium against
 * real runners:
 * - Two runners (srv-02's clock half a second behind, by libfaketime) run a job that succeeds
 *   (the other runner skips each fire: it finds it running), a job that fails with hostile output
 *   (`<script>`, `<img onerror>`) and a paused job (every runner skips it). The page lists every
 *   job with its schedule in words (a disabled one too); the timeline marks of a fire read from
 *   the database carry its outcome (done, failed, paused: distinct letters and colours), its
 *   winning host and its skips with their hosts (attributes and title); the runners are listed
 *   with srv-02's clock offset; the failure's output tail is shown as text — no injected element
 *   exists, no injected script ran — as is the pause reason; no console error (the page's own
 *   Content-Security-Policy lets its script and style run). A new fire appears without reloading.
 *   A screenshot is saved to test/artifacts/dashboard.png. When the runner serving the page
 *   stops, the page says the refresh failed and keeps the last data.
 * - With `--http-token`: 401 (with a Basic challenge) without credentials or with a wrong token;
 *   with HTTP Basic credentials (any user, the token as password) the page loads and refreshes.
 * - buildOverview on a hand-written history: a fire's outcome for every status (fan-out: the
 *   most telling slot), missed and paused fires, the last outcome skipping skip-only fires, a
 *   crowded fleet's rows cut at whole fires, failures newest first with their tails cut from the
 *   start; without a database connection the schedule is still shown, with the reason.
 * - On a history of 150,000 rows, the dashboard's per-job reads stay bounded (ANALYZE: rows read)
 *   whatever the job's history.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { buildOverview, type DashboardSource } from '../../src/http/dashboard/overview.js';
import {
  FAILURE_CANDIDATES_SQL,
  fireRowsSql,
  firesPerJob,
  FIRES_PER_JOB,
  OUTPUT_TAIL_CHARS,
  ROWS_PER_FIRE,
} from '../../src/store/dashboard-reads.js';
import { launchChromium } from '../helpers/browser.js';
import { baton, ROOT, writeSchedule } from '../helpers/cli.js';
import { plantRun, GENERATED_RUN_FIELDS, plantRunsFrom } from '../helpers/db.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort } from '../helpers/private-server.js';
import { rowsRead } from '../helpers/query-cost.js';
import { waitFor } from '../helpers/wait.js';

// The callbacks given to page.evaluate run in the browser; the few browser globals they use
// (the project compiles without the DOM library).
declare const window: { pwned?: unknown; sameDocument?: boolean };
declare const document: {
  querySelector(selector: string): { textContent: string | null } | null;
  querySelectorAll(selector: string): ArrayLike<{ getAttribute(name: string): string | null }>;
};
declare function getComputedStyle(element: unknown): { backgroundColor: string };

const fleet = useFleet('dashboard', { perTest: true });
const SCREENSHOT = path.join(ROOT, 'test/artifacts/dashboard.png');

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

/** Console errors and uncaught exceptions of a page (a CSP violation is a console error). */
function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  return errors;
}

const HOSTILE = `<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">`;

describe('dashboard', () => {
  it('shows jobs, a timeline of fires with winners and skips, runners, failures as text; refreshes', async () => {
    const config = writeSchedule(
      `
namespace: dash
jobs:
  tick:
    schedule: "*/2 * * * * *"
    command: ["sh", "-c", "echo tick; sleep 1"]
    description: long enough that the other runner finds it running
  broken:
    schedule: "*/3 * * * * *"
    command: ["sh", "broken.sh"]
  held:
    schedule: "* * * * * *"
    command: ["true"]
  nightly:
    schedule: "0 3 * * *"
    timezone: Asia/Seoul
    command: ["true"]
    enabled: false
`,
      { 'broken.sh': `echo 'working on <b>batch</b>'\necho '${HOSTILE}' >&2\nexit 3\n` },
    );
    const db = fleet.db;
    const cli = (...args: string[]) =>
      baton([...args, '--config', config, '--database-url', db.url]);
    expect((await cli('migrate')).code).toBe(0);
    const pauseReason = '<i>maintenance</i> & "quotes"';
    expect((await cli('pause', 'held', '--reason', pauseReason, '--host', 'ops-laptop')).code).toBe(
      0,
    );

    const [port1, port2] = [await freePort(), await freePort()];
    const common = { config, args: ['--registry-interval', '1s'] };
    const [srv1] = await fleet.start(['srv-01'], {
      ...common,
      args: [...common.args, '--http', `127.0.0.1:${port1}`],
    });
    await fleet.start(
      ['srv-02'],
      { ...common, args: [...common.args, '--http', `127.0.0.1:${port2}`] },
      { 'srv-02': '-0.5' },
    );

    // What the page must show, read from the database first.
    const tick = await waitFor('a done fire of tick with a skip by the other runner', async () => {
      const [row] = await db.query<{ at: Date; host: string; skipper: string }>(
        `SELECT w.scheduled_at AS at, w.host, s.host AS skipper FROM baton_runs w
           JOIN baton_runs s ON s.namespace = w.namespace AND s.job = w.job
                            AND s.scheduled_at = w.scheduled_at AND s.winner IS NULL
          WHERE w.job = 'tick' AND w.winner = 1 AND w.status = 'done'
          ORDER BY w.scheduled_at DESC LIMIT 1`,
      );
      return row;
    });
    expect(tick.skipper).not.toBe(tick.host);
    const broken = await waitFor('a failed fire of broken', async () => {
      const [row] = await db.query<{ id: number; at: Date; host: string; output_tail: string }>(
        `SELECT id, scheduled_at AS at, host, output_tail FROM baton_runs
          WHERE job = 'broken' AND status = 'failed' ORDER BY scheduled_at DESC LIMIT 1`,
      );
      return row;
    });
    expect(broken.output_tail).toContain(HOSTILE);
    const held = await waitFor('a fire of held skipped by both runners', async () => {
      const [row] = await db.query<{ at: Date }>(
        `SELECT scheduled_at AS at FROM baton_runs WHERE job = 'held' AND status = 'skipped'
          GROUP BY scheduled_at HAVING COUNT(*) = 2 ORDER BY scheduled_at DESC LIMIT 1`,
      );
      return row;
    });

    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const errors = watchErrors(page);
    const response = await page.goto(`http://127.0.0.1:${port1}/`);
    expect(response?.status()).toBe(200);
    await page.waitForSelector('body[data-refreshes]');

    // Every job, sorted, with its schedule in words; the disabled one says so.
    const jobRows = await page.$$eval('#jobs-body tr', (rows) =>
      rows.map((r) => [r.getAttribute('data-job'), r.textContent]),
    );
    expect(jobRows.map(([job]) => job)).toEqual(['broken', 'held', 'nightly', 'tick']);
    const rowText = Object.fromEntries(jobRows) as Record<string, string>;
    expect(rowText.tick).toContain('Every 2 seconds');
    expect(rowText.tick).toContain('long enough that the other runner finds it running');
    expect(rowText.broken).toContain('Every 3 seconds');
    expect(rowText.nightly).toContain('At 03:00');
    expect(rowText.nightly).toContain('Asia/Seoul');
    expect(rowText.nightly).toContain('disabled');
    // The pause, by whom and why — its reason as text.
    expect(rowText.held).toMatch(/paused by \S+@ops-laptop/);
    expect(rowText.held).toContain(pauseReason);
    expect(await page.locator('tr[data-job="held"] i').count()).toBe(0);

    // The timeline: the fires read above, each with its outcome, winner and skips.
    const mark = async (job: string, at: Date) => {
      const li = page.locator(`tr[data-job="${job}"] li[data-at="${at.toISOString()}"]`);
      await li.waitFor({ state: 'attached', timeout: 10_000 });
      return {
        outcome: await li.getAttribute('data-outcome'),
        winner: await li.getAttribute('data-winner'),
        skips: await li.getAttribute('data-skips'),
        skipHosts: await li.getAttribute('data-skip-hosts'),
        letter: await li.locator('.sym').textContent(),
        title: await li.locator('.sym').getAttribute('title'),
        colour: await li.locator('.sym').evaluate((e) => getComputedStyle(e).backgroundColor),
      };
    };
    const done = await mark('tick', tick.at);
    expect(done).toMatchObject({
      outcome: 'done',
      winner: tick.host,
      skips: '1',
      skipHosts: tick.skipper,
      letter: 'D',
    });
    expect(done.title).toContain(`ran on ${tick.host}: done, exit 0`);
    expect(done.title).toContain(`\n1 skip, by ${tick.skipper}`);
    const failed = await mark('broken', broken.at);
    expect(failed).toMatchObject({ outcome: 'failed', winner: broken.host, letter: 'F' });
    expect(failed.title).toContain(`ran on ${broken.host}: failed, exit 3`);
    const paused = await mark('held', held.at);
    expect(paused).toMatchObject({ outcome: 'paused', winner: '', skips: '2', letter: 'P' });
    expect(paused.skipHosts!.split(' ').sort()).toEqual(['srv-01', 'srv-02']);
    expect(paused.title).toMatch(
      /\n2 skips, by srv-0[12], srv-0[12]: paused by \S+@ops-laptop at /,
    );
    expect(new Set([done.colour, failed.colour, paused.colour]).size).toBe(3);
    // The legend names every mark.
    const legend = await page.locator('.legend').textContent();
    for (const word of ['done', 'failed', 'timeout', 'lost', 'interrupted', 'running', 'missed']) {
      expect(legend).toContain(word);
    }

    // The runners, with srv-02's clock half a second behind (once its heartbeat measured it).
    await page.waitForFunction(
      () =>
        /behind/.test(
          document.querySelector('tr[data-host="srv-02"] td:nth-child(3)')?.textContent ?? '',
        ),
      undefined,
      { timeout: 20_000 },
    );
    const runners = await page.$$eval('#runners-body tr', (rows) =>
      rows.map((r) => ({
        host: r.getAttribute('data-host'),
        state: r.getAttribute('data-state'),
        text: r.textContent ?? '',
        offset: r.querySelector('td:nth-child(3)')?.textContent ?? '',
      })),
    );
    expect(runners.map((r) => [r.host, r.state])).toEqual([
      ['srv-01', 'alive'],
      ['srv-02', 'alive'],
    ]);
    expect(runners[0]!.text).toContain('serves this page');
    const behind = /^−(\d+) ms behind$/.exec(runners[1]!.offset);
    expect(behind, runners[1]!.offset).not.toBeNull();
    expect(Number(behind![1])).toBeGreaterThan(300);
    expect(Number(behind![1])).toBeLessThan(700);

    // The failure, with its output tail as text: nothing in it became an element or ran.
    const failure = page.locator(`li.failure[data-run="${broken.id}"]`);
    await failure.waitFor({ state: 'attached' });
    expect(await failure.getAttribute('data-status')).toBe('failed');
    expect(await failure.locator('h3').textContent()).toContain('broken');
    expect(await failure.locator('.error').textContent()).toBe('exited with code 3');
    expect(await failure.locator('pre.tail').textContent()).toBe(broken.output_tail);
    expect(
      await page.locator('#failures-list b, #failures-list img, #failures-list script').count(),
    ).toBe(0);
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('script').count()).toBe(1);
    expect(await page.evaluate(() => window.pwned)).toBeUndefined();

    // It refreshes: a newer fire of tick appears in the same document.
    await page.evaluate(() => (window.sameDocument = true));
    const newest = await page.locator('tr[data-job="tick"] li[data-at]').evaluateAll((lis) =>
      lis
        .map((li) => li.getAttribute('data-at')!)
        .sort()
        .pop()!,
    );
    await page.waitForFunction(
      (after) =>
        Array.from(document.querySelectorAll('tr[data-job="tick"] li[data-at]')).some(
          (li) => li.getAttribute('data-at')! > after,
        ),
      newest,
      { timeout: 20_000 },
    );
    expect(await page.evaluate(() => window.sameDocument)).toBe(true);
    expect(await page.locator('#updated').getAttribute('data-state')).toBe('ok');
    expect(errors).toEqual([]);

    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true, animations: 'disabled' });

    // The runner serving the page stops: the page says so and keeps what it showed.
    expect(await srv1!.stop('SIGTERM')).toBe(0);
    await page.waitForSelector('#updated[data-state="error"]', { timeout: 20_000 });
    expect(await page.locator('#fetch-error').isVisible()).toBe(true);
    expect(await page.locator('#fetch-error').textContent()).toMatch(
      /^Could not refresh the dashboard \(.+\)\. Showing the data from \d\d:\d\d:\d\d; retrying every 5 s\.$/,
    );
    expect(await page.locator('#jobs-body tr').count()).toBe(4);
    await page.close();
  });

  it('with --http-token: 401 without the token, the page and its refreshes with Basic credentials', async () => {
    const config = writeSchedule(`
namespace: dash
jobs:
  tick:
    schedule: "* * * * * *"
    command: ["true"]
`);
    const token = 'dashboard-test-token-0123456789';
    const port = await freePort();
    await fleet.start(['srv-01'], {
      config,
      args: ['--http', `127.0.0.1:${port}`, '--http-token', token],
    });
    const url = `http://127.0.0.1:${port}/`;

    const bare = await fetch(url);
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toMatch(/^Basic /);
    expect((await fetch(`${url}api/overview`)).status).toBe(401);

    const basic = (password: string) =>
      fetch(url, {
        headers: { authorization: `Basic ${Buffer.from(`ops:${password}`).toString('base64')}` },
      });
    expect((await basic(`${token}x`)).status).toBe(401);
    expect((await basic(token)).status).toBe(200);

    // A browser without the token (or with a wrong one) gets no dashboard: the 401 itself, or —
    // when Chromium gives up answering the challenge — a navigation error saying why.
    for (const httpCredentials of [undefined, { username: 'ops', password: `${token}x` }]) {
      const denied = await browser.newContext(httpCredentials ? { httpCredentials } : {});
      const page = await denied.newPage();
      const outcome = await page.goto(url).then(
        (res) => String(res?.status()),
        (err: Error) => err.message,
      );
      expect(outcome).toMatch(/^401$|ERR_INVALID_AUTH_CREDENTIALS/);
      expect(await page.locator('#jobs').count()).toBe(0);
      await denied.close();
    }

    const context = await browser.newContext({
      httpCredentials: { username: 'anyone', password: token },
    });
    const page = await context.newPage();
    const errors = watchErrors(page);
    expect((await page.goto(url))?.status()).toBe(200);
    // Two refreshes: the script's own fetches carry the credentials too.
    await page.waitForSelector('body[data-refreshes="2"]', { timeout: 20_000 });
    expect(await page.locator('#jobs-body tr').getAttribute('data-job')).toBe('tick');
    expect(await page.locator('#updated').getAttribute('data-state')).toBe('ok');
    expect(errors).toEqual([]);
    await context.close();
  });

  it('buildOverview: outcomes of every kind of fire, bounded rows, failures; and without a database', async () => {
    const db = fleet.db;
    expect((await baton(['migrate', '--database-url', db.url])).code).toBe(0);
    const config = loadConfig(
      writeSchedule(`
namespace: hist
jobs:
  mixed:
    schedule: "* * * * *"
    command: ["true"]
    workers: 2
  crowd:
    schedule: "* * * * *"
    command: ["true"]
  quiet:
    schedule: "@daily"
    command: ["true"]
    enabled: false
`),
    );
    const at = (minute: number) => new Date(Date.UTC(2027, 0, 1, 0, minute));
    const rows: [string, Date, number | null, string, string, string | null, string | null][] = [];
    const row = (
      job: string,
      minute: number,
      winner: number | null,
      status: string,
      host: string,
      reason: string | null = null,
      output: string | null = null,
    ) => rows.push([job, at(minute), winner, status, host, reason, output]);
    // mixed: one fire per kind of outcome.
    row('mixed', 0, 1, 'done', 'a');
    row('mixed', 0, null, 'skipped', 'b', 'this fire is running on a');
    row('mixed', 1, 1, 'done', 'a');
    row('mixed', 1, 2, 'failed', 'b', null, `${'x'.repeat(OUTPUT_TAIL_CHARS)}END`);
    row('mixed', 2, 1, 'timeout', 'a');
    row('mixed', 3, 1, 'lost', 'a');
    row('mixed', 4, 1, 'interrupted', 'a');
    row('mixed', 5, 0, 'missed', 'a', 'no runner could reach the database');
    row('mixed', 6, null, 'skipped', 'a', 'paused by ops at 2027-01-01T00:00:00.000Z');
    row('mixed', 6, null, 'skipped', 'b', 'paused by ops at 2027-01-01T00:00:00.000Z');
    row('mixed', 7, 1, 'running', 'b');
    row('mixed', 7, 2, 'done', 'a');
    row('mixed', 8, null, 'skipped', 'a', 'an earlier run is still running on b');
    // crowd: 30 fires of 12 rows each (a winner and 11 skips): more rows than are read for it.
    for (let m = 0; m < 30; m++) {
      row('crowd', m, 1, m === 29 ? 'failed' : 'done', 'h0', null, m === 29 ? 'crowd out' : null);
      for (let h = 1; h < 12; h++) row('crowd', m, null, 'skipped', `h${h}`, 'busy');
    }
    for (const [job, scheduledAt, winner, status, host, reason, output] of rows) {
      await plantRun(db, {
        namespace: 'hist',
        job,
        scheduledAt,
        winner,
        status,
        reason,
        host,
        pid: 1,
        finishedAt: status === 'running' ? null : new Date(scheduledAt.getTime() + 1500),
        exitCode: status === 'failed' ? 3 : status === 'done' ? 0 : null,
        attempts: 1,
        error: status === 'failed' ? 'exited with code 3' : null,
        outputTail: output,
      });
    }
    const source = (pool: DashboardSource['pool']): DashboardSource => ({
      pool,
      namespace: 'hist',
      config,
      host: 'a',
      now: at(9),
      nextFire: (job) => (job === 'quiet' ? null : at(10)),
      database: db.name,
    });

    const o = await buildOverview(source(db.conn));
    expect(o.database).toEqual({ connected: true, problem: null });
    expect(o.jobs.map((j) => j.name)).toEqual(['crowd', 'mixed', 'quiet']);
    const mixed = o.jobs.find((j) => j.name === 'mixed')!;
    expect(mixed.fires.map((f) => f.outcome)).toEqual([
      'done',
      'failed',
      'timeout',
      'lost',
      'interrupted',
      'missed',
      'paused',
      'running',
      'skipped',
    ]);
    expect(mixed.fires[0]).toMatchObject({ skippedBy: ['b'], reason: null });
    expect(mixed.fires[0]!.runs).toEqual([
      {
        runId: expect.any(Number),
        host: 'a',
        slot: 1,
        status: 'done',
        exitCode: 0,
        durationMs: 1500,
        error: null,
        slow: false,
        tooShort: false,
      },
    ]);
    expect(mixed.fires[1]!.runs.map((r) => [r.slot, r.host, r.status, r.error])).toEqual([
      [1, 'a', 'done', null],
      [2, 'b', 'failed', 'exited with code 3'],
    ]);
    expect(mixed.fires[5]!.reason).toBe('no runner could reach the database');
    expect(mixed.fires[6]).toMatchObject({
      skippedBy: ['a', 'b'],
      reason: 'paused by ops at 2027-01-01T00:00:00.000Z',
    });
    expect(mixed.fires[7]!.runs.map((r) => [r.host, r.status, r.durationMs])).toEqual([
      ['b', 'running', null],
      ['a', 'done', 1500],
    ]);
    // The last outcome: the running fire, not the skip after it.
    expect(mixed.lastOutcome?.outcome).toBe('running');
    expect(mixed.lastOutcome?.scheduledAt).toBe(at(7).toISOString());
    expect(mixed.nextFire).toBe(at(10).toISOString());

    // crowd: whole fires only — the oldest fire the row limit reached may be cut, so it is left out.
    const crowd = o.jobs.find((j) => j.name === 'crowd')!;
    expect(o.limits.firesPerJob).toBe(FIRES_PER_JOB);
    expect(crowd.fires).toHaveLength((FIRES_PER_JOB * ROWS_PER_FIRE) / 12 - 1);
    for (const f of crowd.fires) expect(f.skippedBy).toHaveLength(11);
    expect(crowd.fires.at(-1)!.scheduledAt).toBe(at(29).toISOString());
    expect(o.jobs.find((j) => j.name === 'quiet')).toMatchObject({
      enabled: false,
      nextFire: null,
      fires: [],
      lastOutcome: null,
      scheduleWords: 'At 00:00',
    });

    // Failures, newest fire first; a long tail keeps its end.
    expect(o.failures.map((f) => [f.job, f.status, f.scheduledAt])).toEqual([
      ['crowd', 'failed', at(29).toISOString()],
      ['mixed', 'lost', at(3).toISOString()],
      ['mixed', 'timeout', at(2).toISOString()],
      ['mixed', 'failed', at(1).toISOString()],
    ]);
    expect(o.failures[0]!.outputTail).toBe('crowd out');
    const tail = o.failures[3]!.outputTail!;
    expect(tail).toHaveLength(OUTPUT_TAIL_CHARS);
    expect(tail.startsWith('…x')).toBe(true);
    expect(tail.endsWith('xEND')).toBe(true);
    expect(JSON.parse(JSON.stringify(o))).toEqual(o);

    // Without a connection: the schedule, and why there is nothing else.
    const offline = await buildOverview(source(null));
    expect(offline.database.connected).toBe(false);
    expect(offline.database.problem).toMatch(/not connected to the database/);
    expect(offline.jobs.map((j) => [j.name, j.fires.length])).toEqual([
      ['crowd', 0],
      ['mixed', 0],
      ['quiet', 0],
    ]);
    expect([offline.runners, offline.failures]).toEqual([[], []]);
  });

  it('on a history of 150,000 rows the per-job reads stay bounded', async () => {
    const db = fleet.db;
    expect((await baton(['migrate', '--database-url', db.url])).code).toBe(0);
    // One statement, three shapes of job: flaky (40,000 fires × a winner, failing every other fire, and
    // two skips), steady (30,000 fires, one runner, all done), rare (100 fires an hour apart).
    await plantRunsFrom(
      db,
      GENERATED_RUN_FIELDS,
      `SELECT 'big', j.job, j.first + INTERVAL f.seq * j.every SECOND, IF(h.seq = 0, 1, NULL),
              'schedule', IF(h.seq > 0, 'skipped', IF(f.seq % 2 = j.fails, 'failed', 'done')),
              IF(h.seq > 0, 'busy', NULL), CONCAT('srv-', h.seq), 1,
              j.first + INTERVAL f.seq * j.every SECOND, j.first + INTERVAL f.seq * j.every SECOND,
              IF(h.seq = 0, 1, 0)
         FROM (SELECT 'flaky' AS job, TIMESTAMP'2027-01-01 00:00:00' AS first, 1 AS every,
                      40000 AS fires, 3 AS hosts, 0 AS fails
               UNION ALL SELECT 'steady', '2026-12-01', 1, 30000, 1, -1
               UNION ALL SELECT 'rare', '2026-11-01', 3600, 100, 1, -1) AS j
         JOIN seq_0_to_39999 AS f ON f.seq < j.fires
         JOIN seq_0_to_2 AS h ON h.seq < j.hosts`,
    );
    await db.query('ANALYZE TABLE baton_runs');

    const [count] = await db.query<{ n: number }>('SELECT COUNT(*) AS n FROM baton_runs');
    expect(Number(count!.n)).toBe(150_100);
    for (const job of ['flaky', 'steady', 'rare', 'none']) {
      // A few reads per row shown (the fires' key entries, the derived table, the rows, their
      // sort: flaky has 3 rows per fire) — never flaky's 120,000.
      expect(
        await rowsRead(db, fireRowsSql(FIRES_PER_JOB), ['big', job, 'big', job]),
        `${job}: recent fires`,
      ).toBeLessThanOrEqual(FIRES_PER_JOB * 3 * 4);
      for (const status of ['failed', 'timeout', 'lost']) {
        expect(
          await rowsRead(db, FAILURE_CANDIDATES_SQL, ['big', job, status]),
          `${job}: latest ${status}`,
        ).toBeLessThanOrEqual(10);
      }
    }
    const [fires] = await db.conn.query(fireRowsSql(FIRES_PER_JOB), [
      'big',
      'flaky',
      'big',
      'flaky',
    ]);
    expect(fires).toHaveLength(FIRES_PER_JOB * 3);
    // Many jobs show fewer fires each: the whole overview stays bounded too.
    expect([1, 300, 500, 1_000, 5_000].map(firesPerJob)).toEqual([30, 30, 20, 10, 10]);
  });
});
