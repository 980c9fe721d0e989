/**
 * The dashboard's write buttons in real headless Chromium against a real runner with a read token
 * (the browser's Basic credentials) and a write token file:
 *
 * - The job page shows the pause state and the next fires, and no button until a write token is
 *   entered on the page; then run now and pause appear.
 * - Pause asks for a reason: the `baton_pauses` row has it and the token's name, the audit row
 *   too, and the page shows who paused and why; resume lifts it.
 * - Run now starts a manual run on this runner: the page says which, its row exists, and the job
 *   page lists it; its run page offers kill, which kills it (the row says who and why).
 * - A wrong token is refused with the API's message and changes nothing. The token is kept in
 *   sessionStorage only: no cookie, nothing in localStorage, gone in a new browser context.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../helpers/browser.js';
import { writeSchedule } from '../helpers/cli.js';
import { useFleet } from '../helpers/fleet.js';
import { freePort } from '../helpers/private-server.js';

declare const document: { cookie: string };
declare const localStorage: { length: number };
declare const sessionStorage: { getItem(key: string): string | null };

const fleet = useFleet('dash_actions');
const READ = 'dash-read-token-0123456789abcdef';
const WRITE = 'dash-write-token-0123456789abcdef';

let browser: Browser;
let context: BrowserContext;
let base: string;

beforeAll(async () => {
  browser = await launchChromium();
  const config = writeSchedule(`
namespace: actions
jobs:
  slow:
    schedule: "0 0 1 1 *"
    command: ["sleep", "10"]
`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-tokens-'));
  const tokens = path.join(dir, 'write-tokens');
  writeFileSync(tokens, `ops:${WRITE}\n`, { mode: 0o600 });
  const port = await freePort();
  base = `http://127.0.0.1:${port}/`;
  await fleet.start(['dash-srv'], {
    config,
    args: ['--http', `127.0.0.1:${port}`, '--http-write-tokens-file', tokens],
    env: { BATON_HTTP_TOKEN: READ },
  });
  context = await browser.newContext({ httpCredentials: { username: 'viewer', password: READ } });
});

afterAll(async () => {
  await browser?.close();
});

/** Clicks `selector`, answers its reason prompt with `reason`, waits for the outcome shown. */
async function act(page: Page, selector: string, reason: string): Promise<string> {
  const before = await page.locator('#action-result').getAttribute('data-seq');
  page.once('dialog', (dialog) => void dialog.accept(reason));
  await page.locator(selector).click();
  await page.waitForFunction((seq) => {
    const out = (globalThis as unknown as { document: Document }).document.querySelector(
      '#action-result',
    );
    return out != null && !out.hidden && out.getAttribute('data-seq') !== seq;
  }, before);
  return (await page.locator('#action-result').textContent()) ?? '';
}

interface Document {
  querySelector(selector: string): {
    hidden: boolean;
    getAttribute(name: string): string | null;
  } | null;
}

describe('dashboard write buttons', () => {
  it('pauses with a reason, runs now and resumes with a write token entered on the page', async () => {
    const page = await context.newPage();
    await page.goto(`${base}#job/slow`);
    await page.locator('#job-pause').getByText('not paused').waitFor();
    expect(await page.locator('#job-next li').count()).toBe(5);
    // No button without a write token: only the box to enter one.
    await page.locator('#write-token').waitFor();
    expect(await page.locator('#action-run, #action-pause').count()).toBe(0);

    await page.locator('#write-token').fill(WRITE);
    await page.locator('#write-token-use').click();
    await page.locator('#action-pause').waitFor();

    const paused = await act(page, '#action-pause', 'provider maintenance');
    // Signed token@runner, as `baton pause` signs user@host.
    expect(paused).toContain('Paused slow (by ops@dash-srv)');
    const pauses = await fleet.db.query('SELECT job, paused_by, reason FROM baton_pauses');
    expect(pauses).toEqual([
      { job: 'slow', paused_by: 'ops@dash-srv', reason: 'provider maintenance' },
    ]);
    await page.locator('#job-pause').getByText('paused by ops@dash-srv').waitFor();
    expect(await page.locator('#job-pause').textContent()).toContain(': provider maintenance');
    expect(await page.locator('#job-next li').first().textContent()).toContain('paused');

    const started = await act(page, '#action-run', 'check the fix');
    const runId = Number(/Started run (\d+) of slow on dash-srv/.exec(started)?.[1]);
    expect(runId).toBeGreaterThan(0);
    const [run] = await fleet.db.query<{ host: string; triggered_by: string }>(
      'SELECT host, triggered_by FROM baton_runs WHERE id = ?',
      [runId],
    );
    expect(run).toEqual({ host: 'dash-srv', triggered_by: 'manual' });
    await page.locator(`#job-runs tr[data-run="${runId}"]`).waitFor();

    const audit = await fleet.db.query('SELECT action, operator, via, reason FROM baton_audit');
    expect(audit).toEqual([
      { action: 'pause', operator: 'ops', via: 'api', reason: 'provider maintenance' },
      { action: 'run', operator: 'ops', via: 'api', reason: 'check the fix' },
    ]);

    // The run's page offers kill while it runs: the run is killed, who and why on its row.
    await page.locator('#action-result a').click();
    await page.locator('#action-kill').waitFor();
    const killed = await act(page, '#action-kill', 'wrong data');
    expect(killed).toContain(`Killed run ${runId}`);
    const [after] = await fleet.db.query<{ status: string; error: string }>(
      'SELECT status, error FROM baton_runs WHERE id = ?',
      [runId],
    );
    expect(after).toEqual({ status: 'killed', error: expect.stringContaining('ops: wrong data') });

    await page.goto(`${base}#job/slow`);
    await page.locator('#action-resume').waitFor();
    expect(await act(page, '#action-resume', '')).toContain('Resumed slow');
    expect(await fleet.db.query('SELECT * FROM baton_pauses')).toEqual([]);
    await page.locator('#job-pause').getByText('not paused').waitFor();

    // Kept in this tab's sessionStorage only.
    expect(await page.evaluate(() => sessionStorage.getItem('baton.writeToken'))).toBe(WRITE);
    expect(await page.evaluate(() => document.cookie)).toBe('');
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    await page.close();
  });

  it('shows the refusal of a wrong token and changes nothing', async () => {
    const fresh = await browser.newContext({
      httpCredentials: { username: 'viewer', password: READ },
    });
    const page = await fresh.newPage();
    await page.goto(`${base}#job/slow`);
    await page.locator('#write-token').waitFor();
    const audited = (await fleet.db.query('SELECT id FROM baton_audit')).length;
    await page.locator('#write-token').fill(`${WRITE}-wrong`);
    await page.locator('#write-token-use').click();
    const refused = await act(page, '#action-pause', 'should not happen');
    expect(refused).toMatch(/^Pause refused: unknown token/);
    expect(await page.locator('#action-result').getAttribute('data-state')).toBe('error');
    expect(await fleet.db.query('SELECT * FROM baton_pauses')).toEqual([]);
    expect(await fleet.db.query('SELECT id FROM baton_audit')).toHaveLength(audited);
    // Cancelling the reason prompt sends nothing.
    page.once('dialog', (dialog) => void dialog.dismiss());
    await page.locator('#action-pause').click();
    expect(await fleet.db.query('SELECT id FROM baton_audit')).toHaveLength(audited);
    await fresh.close();
  });
});
