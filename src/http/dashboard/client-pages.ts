/**
 * The dashboard's run and job pages, part of its one script (client.ts puts it inside the same
 * function, so it uses that file's helpers: $, el, replace, badge, utc, span, plural): `#run/42`
 * shows one run's whole output, read on from the last chunk while the run is running
 * (`api/run`), each stream decoded as one; `#job/settle` shows a job's pause, next fires and
 * recent runs (`api/job`). Their write buttons are client-actions.ts's. Text only ever goes in
 * through textContent.
 */
export const PAGES_SCRIPT = String.raw`
  // The run and job pages (#run/42, #job/settle): one run's whole output, read on while it runs;
  // a job's recent runs. Text only ever goes in through textContent.
  var page = { gen: 0, timer: null };
  var RUN_POLL_MS = 1000;

  function getJson(url) {
    return fetch(url, { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } })
      .then(function (res) {
        if (!res.ok) throw new Error(res.status === 404 ? 'not found' : 'HTTP ' + res.status);
        return res.json();
      });
  }

  function showPage(on) {
    $('detail').hidden = !on;
    $('overview').hidden = on;
  }

  function clearAction() {
    $('action-result').hidden = true;
    replace('action-result', []);
    replace('detail-actions', []);
  }

  function runFacts(r) {
    var facts = ['fire ' + utc(r.scheduledAt) + ' UTC', r.trigger, 'on ' + r.host];
    if (r.exitCode != null) facts.push('exit ' + r.exitCode);
    if (r.attempts > 1) facts.push(plural(r.attempts, 'attempt'));
    if (r.finishedAt) facts.push('ran ' + span(Date.parse(r.finishedAt) - Date.parse(r.startedAt)));
    if (r.error) facts.push(r.error);
    return facts.join(' · ');
  }

  function openRun(id, gen) {
    var after = -1;
    var next = {};
    var attempt = 0;
    var decoders = {};
    function decode(c) {
      var key = c.attempt + ':' + c.stream;
      if (!decoders[key]) decoders[key] = new TextDecoder('utf-8');
      var bin = atob(c.base64);
      var bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      return decoders[key].decode(bytes, { stream: true });
    }
    var shownStatus = null;
    var out = el('pre', { id: 'run-output', class: 'output', tabindex: '0', 'aria-label': 'Output of run ' + id });
    replace('detail-title', [document.createTextNode('Run ' + id)]);
    replace('detail-body', [out]);
    function poll() {
      if (gen !== page.gen) return;
      getJson('api/run?id=' + encodeURIComponent(id) + '&after=' + after).then(function (d) {
        if (gen !== page.gen) return;
        var r = d.run;
        replace('detail-title', [
          el('a', { href: '#job/' + encodeURIComponent(r.job), text: r.job }),
          document.createTextNode(' · run ' + r.id + ' '), badge(r.status)
        ]);
        $('detail-facts').textContent = runFacts(r);
        if (r.status !== shownStatus) {
          shownStatus = r.status;
          runActions(r, d.writeApi);
        }
        d.chunks.forEach(function (c) {
          if (c.attempt !== attempt) {
            if (attempt !== 0 || c.attempt > 1) out.appendChild(el('span', { class: 'note', text: '── attempt ' + c.attempt + ' ──\n' }));
            attempt = c.attempt;
          }
          var gap = c.offset - (next[c.attempt] || 0);
          if (gap > 0) out.appendChild(el('span', { class: 'note', text: '\n… ' + gap + ' bytes dropped here (over output.max) …\n' }));
          next[c.attempt] = c.offset + c.bytes;
          out.appendChild(el('span', { class: c.stream, text: decode(c) }));
          after = c.seq;
        });
        if (d.outputTail) out.appendChild(el('span', { text: d.outputTail }));
        document.body.setAttribute('data-run-status', r.status);
        if (d.more) poll();
        else if (r.status === 'running') page.timer = setTimeout(poll, RUN_POLL_MS);
        else if (!out.firstChild) out.appendChild(el('span', { class: 'note', text: '(no output)' }));
      }).catch(function (err) {
        if (gen !== page.gen) return;
        $('detail-facts').textContent = 'Could not load run ' + id + ': ' + (err && err.message ? err.message : String(err));
        if (err && err.message === 'not found') return;
        page.timer = setTimeout(poll, RUN_POLL_MS * 5);
      });
    }
    poll();
  }

  function openJob(name, gen) {
    replace('detail-title', [document.createTextNode(name)]);
    $('detail-facts').textContent = 'recent runs, newest first';
    replace('detail-body', []);
    function load() {
      getJson('api/job?name=' + encodeURIComponent(name)).then(function (d) {
        if (gen !== page.gen) return;
        render(d);
      }).catch(function (err) {
        if (gen === page.gen) $('detail-facts').textContent = 'Could not load ' + name + ': ' + err.message;
      });
    }
    function render(d) {
      $('detail-facts').textContent = d.known
        ? (d.enabled ? 'schedule ' + d.schedule + (d.timezone !== 'UTC' ? ' (' + d.timezone + ')' : '') : 'disabled') +
          ' · recent runs, newest first'
        : 'not in the schedules file this runner loaded; its recent runs:';
      jobActions(d, load);
      var rows = d.runs.map(function (r) {
        return el('tr', { 'data-run': r.id }, [
          el('td', { class: 'nowrap' }, [el('a', { href: '#run/' + r.id, text: utc(r.scheduledAt) + ' UTC' })]),
          el('td', null, [badge(r.status)]),
          el('td', { text: r.trigger }),
          el('td', { text: r.host }),
          el('td', { text: r.finishedAt ? span(Date.parse(r.finishedAt) - Date.parse(r.startedAt)) : '' }),
          el('td', { text: r.exitCode != null ? String(r.exitCode) : '' })
        ]);
      });
      var head = el('tr', null, ['fire', 'status', 'trigger', 'host', 'took', 'exit'].map(function (h) {
        return el('th', { scope: 'col', text: h });
      }));
      var next = d.nextFires.length
        ? el('ul', { id: 'job-next', class: 'next-fires' }, d.nextFires.map(function (at) {
          return el('li', { class: 'mono', text: utc(at) + ' UTC' + (d.pause ? ' (will be skipped: paused)' : '') });
        }))
        : el('p', { id: 'job-next', class: 'sub', text: d.enabled ? 'no more fires' : 'none: the job is disabled' });
      replace('detail-body', [
        el('p', { id: 'job-pause', class: d.pause ? 'pause-note paused' : 'sub', 'data-paused': d.pause ? 'yes' : 'no',
          text: pauseText(d.pause) }),
        el('h3', { text: 'Next fires' }), next,
        el('h3', { text: 'Recent runs' }),
        rows.length
          ? el('table', { id: 'job-runs' }, [el('thead', null, [head]), el('tbody', null, rows)])
          : el('p', { class: 'empty', text: 'no runs recorded' })
      ]);
    }
    load();
  }

  function route() {
    page.gen += 1;
    clearTimeout(page.timer);
    var hash = location.hash.replace(/^#/, '');
    var run = /^run\/(\d+)$/.exec(hash);
    var job = /^job\/(.+)$/.exec(hash);
    showPage(Boolean(run || job));
    clearAction();
    if (run) openRun(run[1], page.gen);
    else if (job) openJob(decodeURIComponent(job[1]), page.gen);
  }
  window.addEventListener('hashchange', route);
  route();
`;
