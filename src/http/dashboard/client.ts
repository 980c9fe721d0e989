/**
 * The dashboard's script, inlined into the page: it fetches `api/overview` (a relative URL, so the
 * page works behind a reverse proxy's path prefix) every few seconds and renders it.
 *
 * Everything shown comes from the history — job output, errors, skip reasons, host ids — and is
 * hostile input: the script builds the page with createElement and textContent only, never
 * innerHTML, so no text from the server is ever parsed as markup. (The page's Content-Security-
 * Policy allows this one script by its hash, as a second line of defence.)
 *
 * A failed refresh keeps the last data on screen and says so, with when it was fetched. Plain
 * ES2017, no framework, no build step.
 */
import { ACTIONS_SCRIPT } from './client-actions.js';
import { PAGES_SCRIPT } from './client-pages.js';

export const DASHBOARD_SCRIPT = String.raw`
(function () {
  'use strict';
  var REFRESH_MS = 5000;
  var LETTERS = {
    done: 'D', failed: 'F', timeout: 'T', lost: 'L', interrupted: 'I', killed: 'K', running: 'R',
    missed: 'M', skipped: 'S', paused: 'P'
  };
  var HOSTS_LISTED = 8;
  var state = { lastAt: null, inFlight: false, okCount: 0 };

  function $(id) { return document.getElementById(id); }

  /** An element; attrs: class, title, text, role, aria-*, data-*, scope; children: nodes or text. */
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (key) {
        var value = attrs[key];
        if (value == null || value === false) return;
        if (key === 'text') node.textContent = String(value);
        else if (key === 'class') node.className = value;
        else node.setAttribute(key, String(value));
      });
    }
    (children || []).forEach(function (child) {
      if (child == null) return;
      node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
    });
    return node;
  }

  function pad(n, width) { var s = String(n); while (s.length < (width || 2)) s = '0' + s; return s; }

  /** An ISO instant as "2026-11-30 03:00:00" (UTC; milliseconds only when there are some). */
  function utc(iso) {
    if (!iso) return '';
    var d = new Date(iso);
    var text = d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) +
      ' ' + pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes()) + ':' + pad(d.getUTCSeconds());
    return d.getUTCMilliseconds() ? text + '.' + pad(d.getUTCMilliseconds(), 3) : text;
  }

  /** 1500 → "1.5s", 125000 → "2m05s", 7500000 → "2h05m", 200000000 → "2d07h". */
  function span(ms) {
    ms = Math.max(0, Math.round(ms));
    if (ms < 1000) return ms + 'ms';
    if (ms < 10000) return (Math.round(ms / 100) / 10) + 's';
    var s = Math.round(ms / 1000);
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm' + pad(s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h' + pad(Math.floor((s % 3600) / 60)) + 'm';
    return Math.floor(s / 86400) + 'd' + pad(Math.floor((s % 86400) / 3600)) + 'h';
  }

  /** "in 12s" / "3m05s ago", from the overview's database time. */
  function relative(iso, nowIso) {
    var diff = Date.parse(iso) - Date.parse(nowIso);
    if (Math.abs(diff) < 1000) return 'now';
    return diff > 0 ? 'in ' + span(diff) : span(-diff) + ' ago';
  }

  function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 's'); }

  function sym(outcome) {
    return el('span', { class: 'sym o-' + outcome, 'aria-hidden': 'true', text: LETTERS[outcome] || '?' });
  }

  function badge(outcome, label) {
    return el('span', { class: 'badge o-' + outcome }, [sym(outcome), label || outcome]);
  }

  function runLine(r, workers) {
    var parts = ['ran on ' + r.host + (workers > 1 ? ' (worker ' + r.slot + ')' : '') + ': ' + r.status];
    if (r.exitCode != null) parts.push('exit ' + r.exitCode);
    if (r.durationMs != null) parts.push(span(r.durationMs));
    var line = parts.join(', ');
    return r.error ? line + ' — ' + r.error : line;
  }

  function hostList(hosts) {
    var shown = hosts.slice(0, HOSTS_LISTED).join(', ');
    return hosts.length > HOSTS_LISTED ? shown + ' and ' + (hosts.length - HOSTS_LISTED) + ' more' : shown;
  }

  /** Everything a fire's rows say, for its title (tooltip) and its accessible name. */
  function fireText(f, workers) {
    var lines = [utc(f.scheduledAt) + ' UTC — ' + f.outcome +
      (f.trigger !== 'schedule' ? ' (' + f.trigger + ')' : '')];
    f.runs.forEach(function (r) { lines.push(runLine(r, workers)); });
    if (f.outcome === 'missed') lines.push('nobody attempted it' + (f.reason ? ': ' + f.reason : ''));
    if (f.skippedBy.length > 0) {
      lines.push(plural(f.skippedBy.length, 'skip') + ', by ' + hostList(f.skippedBy) +
        (f.runs.length === 0 && f.outcome !== 'missed' && f.reason ? ': ' + f.reason : ''));
    }
    return lines.join('\n');
  }

  function fireHosts(f) {
    return f.runs.map(function (r) { return r.host; }).join(' ');
  }

  function timeline(job) {
    var list = el('ol', { class: 'timeline', 'aria-label': 'Recent fires of ' + job.name + ', oldest first' });
    job.fires.forEach(function (f) {
      var text = fireText(f, job.workers);
      var mark = el('span', { class: 'sym o-' + f.outcome, role: 'img', 'aria-label': text, title: text,
        text: LETTERS[f.outcome] || '?' });
      list.appendChild(el('li', {
        class: 'fire o-' + f.outcome,
        'data-outcome': f.outcome,
        'data-at': f.scheduledAt,
        'data-trigger': f.trigger,
        'data-winner': fireHosts(f),
        'data-skips': f.skippedBy.length,
        'data-skip-hosts': f.skippedBy.join(' ')
      }, [mark]));
    });
    if (job.fires.length === 0) return el('span', { class: 'sub', text: 'no fires yet' });
    return list;
  }

  function jobRow(job, now) {
    var name = el('th', { scope: 'row' }, [el('a', { href: '#job/' + encodeURIComponent(job.name), text: job.name })]);
    if (!job.enabled) name.appendChild(el('span', { class: 'tag', text: 'disabled' }));
    if (job.pause) {
      name.appendChild(el('span', {
        class: 'tag paused',
        title: 'paused by ' + job.pause.pausedBy + ' at ' + utc(job.pause.pausedAt) + ' UTC' +
          (job.pause.reason ? ': ' + job.pause.reason : ''),
        text: 'paused'
      }));
    }
    if (job.workers > 1) name.appendChild(el('span', { class: 'tag', text: job.workers + ' workers' }));
    if (job.description) name.appendChild(el('span', { class: 'sub', text: job.description }));
    if (job.pause) {
      name.appendChild(el('span', { class: 'sub pause-note', text: 'paused by ' + job.pause.pausedBy + ' ' +
        relative(job.pause.pausedAt, now) + (job.pause.reason ? ': ' + job.pause.reason : '') }));
    }

    var schedule = el('td', null, [
      job.scheduleWords,
      el('span', { class: 'sub' }, [el('code', { class: 'expr', text: job.schedule }),
        job.timezone !== 'UTC' ? ' · ' + job.timezone : ''])
    ]);

    var last = el('td', { class: 'last nowrap' });
    var lo = job.lastOutcome;
    if (lo) {
      last.setAttribute('title', fireText(lo, job.workers));
      last.setAttribute('data-outcome', lo.outcome);
      last.appendChild(badge(lo.outcome));
      var hosts = fireHosts(lo);
      last.appendChild(el('span', { class: 'sub', text: relative(lo.scheduledAt, now) +
        (hosts ? ' on ' + hosts.split(' ').join(', ') : '') }));
    } else {
      last.appendChild(el('span', { class: 'sub', text: 'never ran' }));
    }

    var next = el('td', { class: 'next nowrap' });
    if (!job.enabled) next.appendChild(el('span', { class: 'sub', text: 'disabled' }));
    else if (!job.nextFire) next.appendChild(el('span', { class: 'sub', text: 'none' }));
    else {
      next.appendChild(document.createTextNode(utc(job.nextFire)));
      next.appendChild(el('span', { class: 'sub', text: relative(job.nextFire, now) +
        (job.pause ? ' · will be skipped (paused)' : '') }));
    }

    return el('tr', { 'data-job': job.name }, [name, schedule, last, next,
      el('td', { class: 'fires' }, [timeline(job)])]);
  }

  function offsetText(ms) {
    if (ms == null) return 'not measured';
    if (ms === 0) return '0 ms';
    var size = Math.abs(ms) < 1000 ? Math.abs(ms) + ' ms' : (Math.abs(ms) / 1000).toFixed(2) + ' s';
    return (ms > 0 ? '+' : '−') + size + (ms > 0 ? ' ahead' : ' behind');
  }

  function runnerRow(r, o) {
    var host = el('th', { scope: 'row' }, [r.host]);
    if (r.self) host.appendChild(el('span', { class: 'tag', text: 'serves this page' }));
    var letter = { alive: 'A', stopped: 'S', gone: 'G' }[r.state] || '?';
    var stateCell = el('td', { class: 'nowrap st-' + r.state }, [
      el('span', { class: 'badge' }, [el('span', { class: 'sym', 'aria-hidden': 'true', text: letter }), r.state])
    ]);
    if (r.stoppedAt) stateCell.appendChild(el('span', { class: 'sub', text: 'stopped ' + relative(r.stoppedAt, o.now) }));
    var offset = el('td', { class: 'nowrap' + (r.clockOffsetMs != null &&
      Math.abs(r.clockOffsetMs) > o.limits.clockWarnMs ? ' offset-bad' : ''), text: offsetText(r.clockOffsetMs) });
    var lock = r.lockSessionHeld == null ? '—' : r.lockSessionHeld ? 'held' : 'lost';
    return el('tr', { 'data-host': r.host, 'data-state': r.state }, [
      host,
      stateCell,
      offset,
      el('td', { class: 'nowrap', text: span(r.lastSeenAgoMs) + ' ago' }),
      el('td', { text: lock }),
      el('td', { class: 'mono', text: r.version }),
      el('td', { class: 'mono', text: r.pid }),
      el('td', { class: 'nowrap' }, [utc(r.startedAt), el('span', { class: 'sub', text: relative(r.startedAt, o.now) })])
    ]);
  }

  function failureItem(f, o) {
    var facts = ['fire ' + utc(f.scheduledAt) + ' UTC (' + relative(f.scheduledAt, o.now) + ')',
      f.trigger, 'on ' + f.host];
    if (f.exitCode != null) facts.push('exit ' + f.exitCode);
    if (f.attempts > 1) facts.push(plural(f.attempts, 'attempt'));
    if (f.finishedAt) facts.push('ran ' + span(Date.parse(f.finishedAt) - Date.parse(f.startedAt)));
    facts.push('run ' + f.runId);
    var tail = f.outputTail
      ? el('pre', { class: 'tail', tabindex: '0', 'aria-label': 'Output of run ' + f.runId, text: f.outputTail })
      : el('p', { class: 'sub', text: 'no output' });
    return el('li', { class: 'failure', 'data-run': f.runId, 'data-job': f.job, 'data-status': f.status }, [
      el('h3', null, [el('a', { class: 'job', href: '#run/' + f.runId, text: f.job }), badge(f.status)]),
      el('p', { class: 'facts', text: facts.join(' · ') }),
      f.error ? el('p', { class: 'error', text: f.error }) : null,
      tail
    ]);
  }

  function card(value, label, detail, bad) {
    return el('div', { class: 'card' + (bad ? ' bad' : '') }, [
      el('div', { class: 'value', text: value }),
      el('div', { class: 'label', text: label }),
      detail ? el('div', { class: 'sub', text: detail }) : null
    ]);
  }

  function replace(id, nodes) {
    var node = $(id);
    while (node.firstChild) node.removeChild(node.firstChild);
    nodes.forEach(function (n) { if (n) node.appendChild(n); });
  }

  function render(o) {
    $('namespace').textContent = o.namespace;
    $('host').textContent = o.host;
    $('now').textContent = utc(o.now) + ' UTC';
    document.title = 'baton · ' + o.namespace;

    var problem = $('problem');
    problem.hidden = o.database.connected;
    problem.textContent = o.database.connected ? '' : o.database.problem;

    var disabled = o.jobs.filter(function (j) { return !j.enabled; }).length;
    var paused = o.jobs.filter(function (j) { return j.pause; }).length;
    var running = o.jobs.filter(function (j) {
      return j.fires.some(function (f) { return f.outcome === 'running'; });
    }).length;
    var alive = o.runners.filter(function (r) { return r.state === 'alive'; }).length;
    var gone = o.runners.filter(function (r) { return r.state === 'gone'; });
    var latest = o.failures[0];
    replace('cards', [
      card(String(o.jobs.length), o.jobs.length === 1 ? 'job' : 'jobs',
        [disabled ? disabled + ' disabled' : '', paused ? paused + ' paused' : ''].filter(Boolean).join(', ') || 'all enabled'),
      card(alive + ' / ' + o.runners.length, 'runners alive',
        gone.length ? 'gone: ' + gone.map(function (r) { return r.host; }).join(', ') : '', gone.length > 0),
      card(String(running), 'jobs running now', ''),
      card(String(o.failures.length), 'recent failures',
        latest ? 'latest: ' + latest.job + ', ' + relative(latest.scheduledAt, o.now) : 'none', o.failures.length > 0)
    ]);

    replace('jobs-body', o.jobs.map(function (j) { return jobRow(j, o.now); }));
    $('jobs-empty').hidden = o.jobs.length > 0;
    $('fires-limit').textContent = 'the latest ' + o.limits.firesPerJob + ' fires of each job, oldest first';

    replace('runners-body', o.runners.map(function (r) { return runnerRow(r, o); }));
    $('runners-empty').hidden = o.runners.length > 0;
    $('runners-empty').textContent = o.database.connected
      ? 'No runner has registered in this namespace.' : 'Not known while the database cannot be read.';

    replace('failures-list', o.failures.map(function (f) { return failureItem(f, o); }));
    $('failures-empty').hidden = o.failures.length > 0;
    $('failures-empty').textContent = o.database.connected
      ? 'No failed, timed-out or lost run in the history.' : 'Not known while the database cannot be read.';
    $('failures-limit').textContent = 'failed, timeout and lost runs; the latest ' + o.limits.failures +
      ', with the last ' + o.limits.outputTailChars + ' characters of output';
    // Output tails read from their end.
    Array.prototype.forEach.call(document.querySelectorAll('pre.tail'), function (pre) {
      pre.scrollTop = pre.scrollHeight;
    });
  }

  function clock(date) {
    return pad(date.getHours()) + ':' + pad(date.getMinutes()) + ':' + pad(date.getSeconds());
  }

  function setStatus(ok, why) {
    var pill = $('updated');
    var banner = $('fetch-error');
    pill.setAttribute('data-state', ok ? 'ok' : 'error');
    pill.className = 'pill ' + (ok ? 'ok' : 'error');
    if (ok) {
      pill.textContent = 'updated ' + clock(state.lastAt);
      banner.hidden = true;
      banner.textContent = '';
      return;
    }
    pill.textContent = state.lastAt ? 'refresh failed · data from ' + clock(state.lastAt) : 'could not load';
    banner.hidden = false;
    banner.textContent = 'Could not refresh the dashboard (' + why + '). ' +
      (state.lastAt ? 'Showing the data from ' + clock(state.lastAt) + '; ' : '') +
      'retrying every ' + REFRESH_MS / 1000 + ' s.';
  }

  function refresh() {
    if (state.inFlight) return;
    state.inFlight = true;
    fetch('api/overview', { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } })
      .then(function (res) {
        if (!res.ok) throw new Error('HTTP ' + res.status + (res.statusText ? ' ' + res.statusText : ''));
        return res.json();
      })
      .then(function (overview) {
        render(overview);
        state.lastAt = new Date();
        state.okCount += 1;
        document.body.setAttribute('data-refreshes', String(state.okCount));
        setStatus(true);
      })
      .catch(function (err) { setStatus(false, err && err.message ? err.message : String(err)); })
      .then(function () { state.inFlight = false; });
  }

${PAGES_SCRIPT}
${ACTIONS_SCRIPT}

  refresh();
  // A tab in the background asks nothing (several viewers are several readers of the database);
  // brought back, it refreshes at once.
  setInterval(function () { if (!document.hidden) refresh(); }, REFRESH_MS);
  document.addEventListener('visibilitychange', function () { if (!document.hidden) refresh(); });
})();
`;
