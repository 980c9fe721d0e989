/**
 * The dashboard page (`GET /`): one self-contained HTML document — stylesheet and script inline,
 * no framework, no external asset — that loads its data from `api/overview` and refreshes itself.
 * It only reads, unless the runner has the write API on and the user enters a write token: then
 * the job and run pages get buttons (browser/dashboard.ts).
 *
 * The script is browser/dashboard.ts, compiled by `npm run build` (its own tsconfig: DOM types)
 * to browser/dashboard.js beside this module's JavaScript in dist/. It is read from there once,
 * when the HTTP endpoint starts: the document is static (the data arrives by fetch), so it is
 * built once. Its Content-Security-Policy, in a <meta> element and given to the server for its
 * header, allows only this page's own script and stylesheet (by hash) and requests to its own
 * origin: even if text from the history were ever parsed as markup, no injected script or
 * handler could run.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { errorMessage } from '../../errors.js';
import { DASHBOARD_CSS } from './styles.js';

export interface DashboardPage {
  html: string;
  /** For a `Content-Security-Policy` header on the page (the <meta> cannot say frame-ancestors). */
  csp: string;
}

/**
 * The compiled script, found from this module's own file: dist/http/dashboard/page.js reads
 * dist/http/dashboard/browser/dashboard.js, wherever the package is installed. (Run from src/ —
 * by tsx, say — there is no such file: the dashboard needs the build.)
 */
const BUILT_SCRIPT = new URL('./browser/dashboard.js', import.meta.url);

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

let built: DashboardPage | undefined;

/** The whole dashboard document and its policy; the first call reads the compiled script. */
export function dashboardPage(): DashboardPage {
  built ??= pageWith(readBuiltScript());
  return built;
}

function readBuiltScript(): string {
  let script: string;
  try {
    script = readFileSync(BUILT_SCRIPT, 'utf8');
  } catch (err) {
    throw new Error(
      `the dashboard's script cannot be read (${errorMessage(err)}): \`npm run build\` compiles ` +
        'it from src/http/dashboard/browser/ into dist/',
      { cause: err },
    );
  }
  // The HTML parser ends an inline script at the first `</script`, whatever JavaScript it is
  // inside (a string, a comment), and `<!--` changes how it looks for that end.
  if (/<\/script|<!--/i.test(script)) {
    throw new Error(
      `${fileURLToPath(BUILT_SCRIPT)} contains "</script" or "<!--": it cannot be inlined`,
    );
  }
  return script;
}

function pageWith(script: string): DashboardPage {
  const csp = [
    "default-src 'none'",
    `script-src ${sha256(script)}`,
    `style-src ${sha256(DASHBOARD_CSS)}`,
    "connect-src 'self'",
    'img-src data:',
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  // The policy a <meta> element may carry (browsers ignore frame-ancestors there, with a warning).
  const metaCsp = csp.replace("; frame-ancestors 'none'", '');
  return { html: pageHtml(script, metaCsp), csp };
}

const LEGEND: [outcome: string, letter: string, meaning: string][] = [
  ['done', 'D', 'done'],
  ['failed', 'F', 'failed'],
  ['timeout', 'T', 'timeout'],
  ['lost', 'L', 'lost (its runner vanished)'],
  ['interrupted', 'I', 'interrupted (runner stopped)'],
  ['killed', 'K', 'killed (by an operator)'],
  ['running', 'R', 'running'],
  ['missed', 'M', 'missed (nobody attempted it)'],
  ['skipped', 'S', 'skipped by every runner'],
  ['paused', 'P', 'skipped: paused'],
  ['upstream', 'U', 'skipped: upstream (its parents did not let it run)'],
];

function pageHtml(script: string, metaCsp: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="${metaCsp}">
<meta name="referrer" content="no-referrer">
<title>baton</title>
<link rel="icon" href="data:,">
<style>${DASHBOARD_CSS}</style>
</head>
<body>
<header class="top">
  <div class="brand">
    <h1><span class="logo" aria-hidden="true">◆</span>baton</h1>
    <span class="scope">namespace <b id="namespace">…</b></span>
  </div>
  <div class="meta">
    <span>served by <b id="host">…</b></span>
    <span>database time <b id="now" class="mono">…</b></span>
    <span id="updated" class="pill" data-state="loading" role="status" aria-live="polite">loading…</span>
  </div>
</header>
<main>
  <div id="fetch-error" class="banner error" role="alert" hidden></div>
  <div id="problem" class="banner" role="alert" hidden></div>
  <section id="detail" class="panel" aria-labelledby="detail-title" hidden>
    <p class="back"><a href="#">← overview</a></p>
    <h2 id="detail-title"></h2>
    <p id="detail-facts" class="facts"></p>
    <div id="detail-actions" class="actions"></div>
    <div id="action-result" class="banner" role="status" aria-live="polite" hidden></div>
    <div id="detail-body"></div>
  </section>
  <div id="overview">
  <div id="cards" class="cards" aria-label="Summary"></div>

  <section class="panel" aria-labelledby="jobs-title">
    <h2 id="jobs-title">Jobs <small id="fires-limit"></small></h2>
    <div class="scroll">
      <table id="jobs">
        <caption class="visually-hidden">Every job of the schedules file: its schedule, last outcome, next fire and recent fires</caption>
        <thead><tr>
          <th scope="col">Job</th><th scope="col">Schedule</th><th scope="col">Last outcome</th>
          <th scope="col">Next fire (UTC)</th><th scope="col">Recent fires</th>
        </tr></thead>
        <tbody id="jobs-body"></tbody>
      </table>
    </div>
    <p id="jobs-empty" class="empty" hidden>The schedules file has no jobs.</p>
    <dl class="legend" aria-label="Legend">
${LEGEND.map(
  ([outcome, letter, meaning]) =>
    `      <div><dt><span class="sym o-${outcome}" aria-hidden="true">${letter}</span><span class="visually-hidden">${letter}</span></dt><dd>${meaning}</dd></div>`,
).join('\n')}
      <div><dt><span class="dot" aria-hidden="true"></span><span class="visually-hidden">dot</span></dt><dd>other runners skipped it (hover a fire for who ran it, who skipped, and why)</dd></div>
    </dl>
  </section>

  <section class="panel" aria-labelledby="runners-title">
    <h2 id="runners-title">Runners <small>registered in this namespace, with their clocks against the database's</small></h2>
    <div class="scroll">
      <table id="runners">
        <caption class="visually-hidden">Runners, their state and clock offsets</caption>
        <thead><tr>
          <th scope="col">Host</th><th scope="col">State</th><th scope="col">Clock offset</th>
          <th scope="col">Last heartbeat</th><th scope="col">Lock session</th>
          <th scope="col">Version</th><th scope="col">PID</th><th scope="col">Started (UTC)</th>
        </tr></thead>
        <tbody id="runners-body"></tbody>
      </table>
    </div>
    <p id="runners-empty" class="empty" hidden></p>
  </section>

  <section id="pools-panel" class="panel" aria-labelledby="pools-title" hidden>
    <h2 id="pools-title">Pools <small>at most this many runs of their jobs at once</small></h2>
    <div class="scroll">
      <table id="pools">
        <caption class="visually-hidden">Pools, their slots and the runs holding them</caption>
        <thead><tr>
          <th scope="col">Pool</th><th scope="col">Slots</th><th scope="col">In use</th>
          <th scope="col">Held by</th>
        </tr></thead>
        <tbody id="pools-body"></tbody>
      </table>
    </div>
  </section>

  <section id="blackouts-panel" class="panel" aria-labelledby="blackouts-title" hidden>
    <h2 id="blackouts-title">Blackouts <small>scheduled fires inside them are skipped as paused</small></h2>
    <div class="scroll">
      <table id="blackouts">
        <caption class="visually-hidden">Blackouts going on and to come</caption>
        <thead><tr>
          <th scope="col">Blackout</th><th scope="col">When</th><th scope="col">From – until</th>
          <th scope="col">Jobs</th><th scope="col">By, why</th>
        </tr></thead>
        <tbody id="blackouts-body"></tbody>
      </table>
    </div>
  </section>

  <section class="panel" aria-labelledby="failures-title">
    <h2 id="failures-title">Recent failures <small id="failures-limit"></small></h2>
    <ol id="failures-list" class="failures"></ol>
    <p id="failures-empty" class="empty" hidden></p>
  </section>
  </div>
</main>
<footer>View of the run history · refreshes every 5 s · actions need a write token</footer>
<script>${script}</script>
</body>
</html>
`;
}
