/**
 * The dashboard's run and job pages in real headless Chromium against a real runner: a run's
 * output appears while the job is still running and grows until it ends; a job's output that
 * holds markup is shown as text (no injected element exists, no injected script ran); the job
 * page lists the job's runs linking to their pages; the "recent failures" panel links there. A
 * job with `after:` alone shows its parents in its schedule's place, and the job pages link its
 * parents and children (docs/dependencies.md).
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../helpers/browser.js';
import { startRunner, writeSchedule, type RunnerProcess } from '../helpers/cli.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { freePort } from '../helpers/private-server.js';
import { waitFor } from '../helpers/wait.js';

declare const window: { pwned?: unknown };
declare const document: {
  querySelector(selector: string): { textContent: string | null } | null;
};

const HOSTILE = `<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">`;

let browser: Browser;
let db: TestDatabase;
let runner: RunnerProcess;
let base: string;

beforeAll(async () => {
  browser = await launchChromium();
  db = await createTestDatabase('dash_run_page');
  const port = await freePort();
  base = `http://127.0.0.1:${port}/`;
  const config = writeSchedule(
    `namespace: pages
jobs:
  slowout:
    schedule: "* * * * * *"
    command: ["sh", "slowout.sh"]
  bad:
    schedule: "*/2 * * * * *"
    command: ["sh", "-c", "echo 'bad <b>news</b>' >&2; exit 4"]
  alarm:
    command: ["true"]
    enabled: false
    after: {jobs: bad, on: failure}
`,
    {
      'slowout.sh':
        '[ -e ran ] && exit 0\ntouch ran\n' +
        `echo '${HOSTILE}'\n` +
        'for i in $(seq 1 15); do echo "line $i"; sleep 0.2; done\n',
    },
  );
  runner = startRunner({
    config,
    databaseUrl: db.url,
    host: 'page-srv',
    args: ['--http', `127.0.0.1:${port}`],
  });
  await runner.ready();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await runner?.stop('SIGKILL');
  await db?.drop();
});

describe('dashboard run pages', () => {
  it('shows a running run’s output live, as text, until it ends', async () => {
    const run = await waitFor('slowout running', async () => {
      const [row] = await db.query<{ id: number }>(
        "SELECT id FROM baton_runs WHERE job = 'slowout' AND winner = 1 AND status = 'running'",
      );
      return row;
    });
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${base}#run/${run.id}`);
    await page.locator('#run-output').getByText('line 1', { exact: false }).first().waitFor();
    const [during] = await db.query<{ status: string }>(
      'SELECT status FROM baton_runs WHERE id = ?',
      [run.id],
    );
    expect(during!.status, 'the first line was shown while the job ran').toBe('running');

    await page.waitForFunction(
      () => document.querySelector('body[data-run-status="done"]') != null,
      null,
      {
        timeout: 20_000,
      },
    );
    const text = await page.locator('#run-output').textContent();
    expect(text).toContain(HOSTILE);
    for (let i = 1; i <= 15; i++) expect(text).toContain(`line ${i}\n`);
    expect(await page.locator('#run-output img, #run-output script').count()).toBe(0);
    expect(await page.evaluate(() => window.pwned)).toBeUndefined();
    expect(await page.locator('#detail-title').textContent()).toContain('slowout');
    expect(errors).toEqual([]);

    // The job page lists the run and links to it.
    await page.goto(`${base}#job/slowout`);
    await page.locator(`#job-runs tr[data-run="${run.id}"] a`).click();
    await page.waitForFunction(
      () => document.querySelector('#run-output')?.textContent?.includes('line 15') ?? false,
    );
    await page.close();
  });

  it('links a recent failure to its run page', async () => {
    const failed = await waitFor('a failed run of bad', async () => {
      const [row] = await db.query<{ id: number }>(
        "SELECT id FROM baton_runs WHERE job = 'bad' AND status = 'failed' ORDER BY id LIMIT 1",
      );
      return row;
    });
    const page = await browser.newPage();
    await page.goto(base);
    const link = page.locator('#failures-list a[href^="#run/"]').first();
    await link.waitFor();
    await link.click();
    await page.locator('#run-output').getByText('bad <b>news</b>').waitFor();
    expect(await page.locator('#detail-facts').textContent()).toContain('exit 4');
    expect(failed.id).toBeGreaterThan(0);
    await page.close();
  });

  it("links a job's parents and children, and shows after: in the schedule's place", async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(base);
    const row = page.locator('tr[data-job="alarm"]');
    await row.waitFor();
    expect(await row.textContent()).toContain('after bad (on failure)');
    expect(await row.locator('code.expr').count()).toBe(0);

    await page.goto(`${base}#job/alarm`);
    const parent = page.locator('#job-parents a');
    await parent.waitFor();
    expect(await parent.textContent()).toBe('bad');
    expect(await page.locator('#job-children').textContent()).toBe('no job');
    await parent.click();
    const child = page.locator('#job-children a');
    await child.waitFor();
    expect(await child.textContent()).toBe('alarm');
    expect(await page.locator('#job-parents').textContent()).toBe(
      'no job: it runs at its own schedule',
    );
    await child.click();
    await page.locator('#job-parents a').waitFor();
    expect(await page.locator('#detail-title').textContent()).toContain('alarm');
    expect(errors).toEqual([]);
    await page.close();
  });
});
