/**
 * The dashboard's stylesheet, inlined into the page (no external assets: it works offline and
 * behind any path prefix). Colours carry meaning only together with a letter and a title, and the
 * legend names both. Light and dark follow the viewer's system setting.
 */
export const DASHBOARD_CSS = String.raw`
:root {
  color-scheme: light dark;
  --bg: #f6f8fa; --panel: #ffffff; --text: #1f2328; --muted: #59636e; --line: #d1d9e0;
  --head: #f0f3f6; --accent: #0969da; --warn-bg: #fff8c5; --warn-line: #d4a72c;
  --err-bg: #ffebe9; --err-line: #ff8182; --code-bg: #f6f8fa;
  --done: #1a7f37; --failed: #cf222e; --timeout: #bc4c00; --lost: #8250df;
  --interrupted: #9a6700; --running: #0969da; --missed: #59636e; --skipped: #d1d9e0;
  --paused: #eac54f; --skip-dot: #59636e; --killed: #953800;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --panel: #151b23; --text: #e6edf3; --muted: #9198a1; --line: #3d444d;
    --head: #1c232c; --accent: #4493f8; --warn-bg: #3b2e0a; --warn-line: #9e6a03;
    --err-bg: #3c1618; --err-line: #da3633; --code-bg: #0d1117;
    --done: #2f9e4f; --failed: #e5484d; --timeout: #d9822b; --lost: #a371f7;
    --interrupted: #c69026; --running: #4493f8; --missed: #9198a1; --skipped: #3d444d;
    --paused: #d4a72c; --skip-dot: #c9d1d9; --killed: #e16f24;
  }
}
* { box-sizing: border-box; }
html { background: var(--bg); }
body {
  margin: 0; color: var(--text); background: var(--bg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; }
.visually-hidden {
  position: absolute; width: 1px; height: 1px; margin: -1px; padding: 0; overflow: hidden;
  clip: rect(0 0 0 0); white-space: nowrap; border: 0;
}
header.top {
  display: flex; flex-wrap: wrap; align-items: center; justify-content: space-between; gap: 8px 24px;
  padding: 12px 24px; background: var(--panel); border-bottom: 1px solid var(--line);
  position: sticky; top: 0; z-index: 2;
}
.brand { display: flex; align-items: baseline; gap: 12px; }
.brand h1 { margin: 0; font-size: 18px; letter-spacing: 0.02em; }
.brand .logo { color: var(--accent); margin-right: 6px; }
.brand .scope { color: var(--muted); }
.brand .scope b { color: var(--text); font-weight: 600; }
.meta { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 18px; color: var(--muted); }
.meta b { color: var(--text); font-weight: 600; }
.pill {
  display: inline-flex; align-items: center; gap: 6px; padding: 2px 10px; border-radius: 999px;
  border: 1px solid var(--line); background: var(--bg); color: var(--text); white-space: nowrap;
}
.pill::before { content: ""; width: 8px; height: 8px; border-radius: 50%; background: var(--muted); }
.pill.ok::before { background: var(--done); }
.pill.error { border-color: var(--err-line); background: var(--err-bg); }
.pill.error::before { background: var(--failed); }
main { padding: 16px 24px 32px; max-width: 1600px; margin: 0 auto; }
.banner {
  margin: 0 0 16px; padding: 10px 14px; border-radius: 6px; border: 1px solid var(--warn-line);
  background: var(--warn-bg);
}
.banner.error { border-color: var(--err-line); background: var(--err-bg); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px; margin-bottom: 20px; }
.card {
  background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px;
}
.card .value { font-size: 22px; font-weight: 600; }
.card .label { color: var(--muted); }
.card.bad .value { color: var(--failed); }
section.panel {
  background: var(--panel); border: 1px solid var(--line); border-radius: 8px; margin-bottom: 20px;
  overflow: hidden;
}
section.panel > h2 {
  margin: 0; padding: 10px 14px; font-size: 15px; border-bottom: 1px solid var(--line);
  display: flex; align-items: baseline; gap: 10px;
}
section.panel > h2 small { color: var(--muted); font-weight: normal; font-size: 13px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 8px 14px; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th {
  background: var(--head); font-size: 12px; font-weight: 600; color: var(--muted);
  text-transform: uppercase; letter-spacing: 0.04em; white-space: nowrap;
}
tbody tr:last-child > * { border-bottom: 0; }
tbody th { font-weight: 600; }
.sub { display: block; color: var(--muted); font-size: 12px; font-weight: normal; }
.expr { font-size: 12px; color: var(--muted); }
.nowrap { white-space: nowrap; }
.empty { padding: 14px; color: var(--muted); }
.tag {
  display: inline-block; padding: 0 6px; border-radius: 4px; font-size: 11px; font-weight: 600;
  border: 1px solid var(--line); color: var(--muted); margin-left: 6px; vertical-align: 1px;
}
.tag.paused { border-color: var(--warn-line); background: var(--warn-bg); color: var(--text); }
.badge {
  display: inline-flex; align-items: center; gap: 6px; font-weight: 600; white-space: nowrap;
}
.sym {
  display: inline-flex; align-items: center; justify-content: center; width: 16px; height: 16px;
  border-radius: 3px; font: 700 10px/1 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  color: #fff; background: var(--muted); flex: none;
}
.o-done .sym, .sym.o-done { background: var(--done); }
.o-failed .sym, .sym.o-failed { background: var(--failed); }
.o-timeout .sym, .sym.o-timeout { background: var(--timeout); }
.o-lost .sym, .sym.o-lost { background: var(--lost); }
.o-interrupted .sym, .sym.o-interrupted { background: var(--interrupted); }
.o-killed .sym, .sym.o-killed { background: var(--killed); }
.o-running .sym, .sym.o-running { background: var(--running); }
.o-missed .sym, .sym.o-missed { background: transparent; color: var(--missed); box-shadow: inset 0 0 0 1.5px var(--missed); }
.o-skipped .sym, .sym.o-skipped { background: var(--skipped); color: var(--text); }
.o-paused .sym, .sym.o-paused { background: var(--paused); color: #1f2328; }
.o-upstream .sym, .sym.o-upstream { background: transparent; color: var(--skip-dot); box-shadow: inset 0 0 0 1.5px var(--paused); }
.st-alive .sym { background: var(--done); }
.st-stopped .sym { background: var(--missed); }
.st-gone .sym { background: var(--failed); }
ol.timeline {
  list-style: none; margin: 0; padding: 5px 0 0; display: flex; gap: 3px; flex-wrap: nowrap;
}
ol.timeline li { position: relative; }
ol.timeline .sym { cursor: default; }
/* A fire someone ran (or nobody could) that others skipped: a dot above its mark. */
ol.timeline li[data-skips]:not([data-skips="0"]):not(.o-skipped):not(.o-paused):not(.o-upstream)::before {
  content: ""; position: absolute; left: 6px; top: -5px; width: 4px; height: 4px; border-radius: 50%;
  background: var(--skip-dot);
}
@media (prefers-reduced-motion: no-preference) {
  ol.timeline .o-running .sym, ol.timeline li.o-running .sym { animation: pulse 1.6s ease-in-out infinite; }
  @keyframes pulse { 50% { opacity: 0.45; } }
}
td.fires { width: 1%; }
.legend {
  display: flex; flex-wrap: wrap; gap: 6px 16px; padding: 10px 14px; border-top: 1px solid var(--line);
  color: var(--muted); font-size: 12px; margin: 0;
}
.legend dt, .legend dd { margin: 0; display: inline-flex; align-items: center; gap: 6px; }
.legend div { display: inline-flex; align-items: center; gap: 6px; }
.legend .dot { width: 4px; height: 4px; border-radius: 50%; background: var(--skip-dot); display: inline-block; }
.offset-bad { color: var(--failed); font-weight: 600; }
.failures { padding: 0; margin: 0; list-style: none; }
.failure { padding: 12px 14px; border-bottom: 1px solid var(--line); }
.failure:last-child { border-bottom: 0; }
.failure h3 { margin: 0 0 4px; font-size: 14px; display: flex; flex-wrap: wrap; align-items: center; gap: 6px 12px; }
.failure .facts { color: var(--muted); font-size: 12px; margin: 0 0 6px; }
.failure .error { margin: 0 0 6px; }
pre.tail {
  margin: 0; padding: 10px 12px; max-height: 240px; overflow: auto; background: var(--code-bg);
  border: 1px solid var(--line); border-radius: 6px; font-size: 12px; line-height: 1.4;
  white-space: pre-wrap; word-break: break-word;
}
pre.output {
  margin: 0; padding: 10px 12px; max-height: 70vh; overflow: auto; background: var(--code-bg);
  border: 1px solid var(--line); border-radius: 6px; font-size: 12px; line-height: 1.4;
  white-space: pre-wrap; word-break: break-word;
}
pre.output .stderr { color: var(--bad, #b42318); }
pre.output .note { color: var(--muted); font-style: italic; }
.back { margin: 0 0 8px; }
#job-runs td, #job-runs th { padding: 4px 10px 4px 0; text-align: left; }
.banner.ok { border-color: var(--line); background: var(--panel); }
.actions { display: flex; flex-wrap: wrap; align-items: center; gap: 8px; margin: 0 0 12px; }
.actions:empty { display: none; }
.actions input { font: inherit; padding: 4px 8px; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--text); }
.actions button {
  font: inherit; padding: 4px 12px; border-radius: 6px; border: 1px solid var(--line);
  background: var(--head); color: var(--text); cursor: pointer;
}
.actions button.action { border-color: var(--accent); }
.actions button.quiet { color: var(--muted); }
.actions button:disabled { opacity: 0.5; cursor: progress; }
.next-fires, .job-links { margin: 0 0 12px; padding-left: 18px; }
footer { color: var(--muted); font-size: 12px; text-align: center; padding: 0 24px 24px; }
`;
