/**
 * The dashboard's write buttons, part of its one script (client.ts puts it inside the same
 * function: it uses $, el, replace, utc): on the job page run now and pause/resume, on a running
 * run's page kill — shown only when the runner has the write API on and the user has entered a
 * write token on the page.
 *
 * The token is kept in this tab's sessionStorage (gone with the tab, never in a cookie or the
 * URL) and sent as `Authorization: Bearer` with the POST alone, with `credentials: 'omit'`: the
 * browser's own Basic credentials (the read token) are not sent along, and no other site can
 * make the browser send the write token. Each button asks for a reason (a prompt; Cancel does
 * nothing) and shows the outcome: what happened, or the error's message from the JSON answer.
 */
export const ACTIONS_SCRIPT = String.raw`
  // Write buttons (run now, pause/resume, kill): only with a write token entered on this page.
  var TOKEN_KEY = 'baton.writeToken';
  var outcomes = 0;

  function writeToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }

  function setWriteToken(token) {
    try {
      if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) { /* storage refused (private mode): the token is simply not kept */ }
  }

  function showOutcome(ok, text, link) {
    var out = $('action-result');
    out.hidden = false;
    out.setAttribute('data-state', ok ? 'ok' : 'error');
    outcomes += 1;
    out.setAttribute('data-seq', String(outcomes));
    out.className = 'banner ' + (ok ? 'ok' : 'error');
    replace('action-result', [document.createTextNode(text),
      link ? el('a', { href: link.href, text: link.text }) : null]);
  }

  /** POSTs {reason} to api/PATH with the write token; resolves with the JSON answer or rejects. */
  function post(path, reason) {
    return fetch(path, {
      method: 'POST',
      credentials: 'omit',
      cache: 'no-store',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json',
        Authorization: 'Bearer ' + writeToken() },
      body: JSON.stringify(reason ? { reason: reason } : {})
    }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (body) {
        if (res.ok) return body;
        var message = body && body.error && body.error.message ? body.error.message : 'HTTP ' + res.status;
        throw new Error(message);
      });
    });
  }

  /** A button that asks for a reason, POSTs, shows the outcome and calls done(). */
  function actionButton(id, label, question, path, describe, done) {
    var button = el('button', { id: id, type: 'button', class: 'action', text: label });
    button.addEventListener('click', function () {
      var reason = window.prompt(question + ' Reason (optional):', '');
      if (reason === null) return;
      button.disabled = true;
      post(path, reason.trim()).then(function (body) {
        var said = describe(body);
        showOutcome(true, said.text, said.link);
      }, function (err) {
        showOutcome(false, label + ' refused: ' + (err && err.message ? err.message : String(err)));
      }).then(function () {
        button.disabled = false;
        if (done) done();
      });
    });
    return button;
  }

  /** The token box, or (with a token) the buttons make() builds; nothing without the write API. */
  function renderActions(writeApi, make, rerender) {
    if (!writeApi) return replace('detail-actions', []);
    if (!writeToken()) {
      var input = el('input', { id: 'write-token', type: 'password', autocomplete: 'off',
        'aria-label': 'Write token', placeholder: 'write token' });
      var use = el('button', { id: 'write-token-use', type: 'button', text: 'Use write token' });
      use.addEventListener('click', function () {
        if (!input.value.trim()) return;
        setWriteToken(input.value.trim());
        rerender();
      });
      input.addEventListener('keydown', function (e) { if (e.key === 'Enter') use.click(); });
      return replace('detail-actions', [el('span', { class: 'sub', text: 'Actions need a write token (kept in this tab only): ' }), input, use]);
    }
    var forget = el('button', { id: 'write-token-forget', type: 'button', class: 'quiet', text: 'Forget token' });
    forget.addEventListener('click', function () { setWriteToken(''); rerender(); });
    replace('detail-actions', make().concat([forget]));
  }

  function jobActions(d, reload) {
    var name = d.job;
    var base = 'api/jobs/' + encodeURIComponent(name) + '/';
    renderActions(d.writeApi, function () {
      var buttons = [actionButton('action-run', 'Run now', 'Run ' + name + ' now on this runner?', base + 'run',
        function (b) { return { text: 'Started run ' + b.runId + ' of ' + name + ' on ' + b.host + ' ',
          link: { href: '#run/' + b.runId, text: 'show run ' + b.runId } }; }, reload)];
      if (d.pause) {
        buttons.push(actionButton('action-resume', 'Resume', 'Resume ' + name + ' on every runner?', base + 'resume',
          function (b) { return { text: b.resumed ? 'Resumed ' + name : name + ' was not paused' }; }, reload));
      } else {
        buttons.push(actionButton('action-pause', 'Pause', 'Pause ' + name + ' on every runner from its next fire?', base + 'pause',
          function (b) { return { text: 'Paused ' + name + ' (by ' + b.pause.pausedBy + ')' }; }, reload));
      }
      return buttons;
    }, function () { jobActions(d, reload); });
  }

  function runActions(r, writeApi) {
    renderActions(writeApi && r.status === 'running', function () {
      return [actionButton('action-kill', 'Kill', 'Kill run ' + r.id + ' of ' + r.job + '?',
        'api/runs/' + r.id + '/kill', function (b) {
          var took = b.tookMs != null ? ' in ' + (b.tookMs / 1000).toFixed(1) + ' s' : '';
          var said = { killed: 'Killed run ' + r.id + took, finished: 'Run ' + r.id + ' had already finished (' + b.status + ')',
            lost: 'Run ' + r.id + ' was lost: its runner is gone', pending: 'Kill of run ' + r.id + ' asked; its runner has not acted yet' };
          return { text: said[b.outcome] || ('Kill of run ' + r.id + ': ' + b.outcome) };
        })];
    }, function () { runActions(r, writeApi); });
  }

  function pauseText(p) {
    return p ? 'paused by ' + p.pausedBy + ' at ' + utc(p.pausedAt) + ' UTC' + (p.reason ? ': ' + p.reason : '') : 'not paused';
  }
`;
