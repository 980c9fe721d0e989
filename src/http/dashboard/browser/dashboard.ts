/**
 * The dashboard's script. `npm run build` compiles it (./tsconfig.json: DOM types, no Node types)
 * to dist/http/dashboard/browser/dashboard.js, which ../page.ts inlines into the page.
 *
 * The overview (`#`) fetches `api/overview` (a relative URL, so the page works behind a reverse
 * proxy's path prefix) every few seconds and renders it. The run page (`#run/42`) shows one run's
 * whole output, read on from the last chunk while the run is running (`api/run`), each stream
 * decoded as one; the job page (`#job/settle`) shows a job's pause, next fires, the jobs it runs
 * after and those that run after it (`after:`, as links to their pages) and recent runs
 * (`api/job`). With the write API on and a write token entered, those pages get buttons: run now,
 * pause/resume, kill.
 *
 * Everything shown comes from the history — job output, errors, skip reasons, host ids — and is
 * hostile input: the script builds the page with createElement and textContent only, never
 * innerHTML, so no text from the server is ever parsed as markup (eslint.config.js refuses
 * innerHTML and its kin here). The page's Content-Security-Policy allows this one script by its
 * hash, as a second line of defence.
 *
 * A failed refresh keeps the last data on screen and says so, with when it was fetched. No
 * framework.
 *
 * One classic script, not a module: the page runs it inline (allowed by its hash), so it cannot
 * load another file, and an `import` or `export` here — even `import type` — would make tsc emit
 * `export {}`, a syntax error in a classic script. The shapes of the JSON it reads are declared
 * below, after the server's (the file named on each).
 */

// --- The JSON the dashboard reads -----------------------------------------------------------

/** `GET api/overview` (Overview in ../overview.ts). */
interface OverviewJson {
  namespace: string;
  host: string;
  /** Database time of this overview. */
  now: string;
  database: { connected: boolean; problem: string | null };
  limits: { firesPerJob: number; failures: number; outputTailChars: number; clockWarnMs: number };
  jobs: JobOverviewJson[];
  runners: RunnerJson[];
  failures: FailureJson[];
  pools: PoolJson[];
  blackouts: BlackoutJson[];
}

/** blackoutToJson in ../../../fleet/blackouts.ts. */
interface BlackoutJson {
  id: number;
  /** upcoming, active (ended and cancelled ones are not listed). */
  state: string;
  from: string;
  until: string;
  endsAt: string;
  /** null: every job. */
  jobs: string[] | null;
  reason: string;
  createdBy: string;
}

/** poolToJson in ../../../fleet/status.ts. */
interface PoolJson {
  name: string;
  slots: number;
  /** fleet or host. */
  scope: string;
  inUse: number;
  /** The fleet's slots (host null), or each live host's. */
  places: { host: string | null; used: number; slots: number }[];
  holders: { runId: number; job: string; host: string; startedAt: string }[];
  claiming: { holder: string; slots: number }[];
}

/** Who paused a job, when, why (PauseDocument in ../../../actions/documents.ts). */
interface PauseJson {
  pausedBy: string;
  pausedAt: string;
  reason: string | null;
}

/** JobOverview in ../overview.ts. */
interface JobOverviewJson {
  name: string;
  description: string | null;
  /** Null: it runs only after its parents (scheduleWords says after which). */
  schedule: string | null;
  timezone: string;
  scheduleWords: string;
  enabled: boolean;
  workers: number;
  /** Where it may run, in words; null: any runner. */
  runsOn: string | null;
  pause: PauseJson | null;
  nextFire: string | null;
  lastOutcome: FireJson | null;
  /** Oldest first. */
  fires: FireJson[];
}

/** FireMark in ../overview.ts; `outcome` is a FireOutcome. */
interface FireJson {
  scheduledAt: string;
  outcome: string;
  trigger: string;
  runs: FireRunJson[];
  skippedBy: string[];
  reason: string | null;
}

/** FireRun in ../overview.ts. */
interface FireRunJson {
  runId: number;
  host: string;
  slot: number;
  status: string;
  exitCode: number | null;
  durationMs: number | null;
  error: string | null;
  /** Past its warn (`duration.warn`). */
  slow: boolean;
  /** A success shorter than its `duration.min`. */
  tooShort: boolean;
}

/** RunnerOverview in ../overview.ts. */
interface RunnerJson {
  host: string;
  pid: number;
  version: string;
  /** alive, stopped or gone. */
  state: string;
  clockOffsetMs: number | null;
  startedAt: string;
  lastSeenAt: string;
  lastSeenAgoMs: number;
  stoppedAt: string | null;
  lockSessionHeld: boolean | null;
  /** Its tags; empty: none. */
  tags: string[];
  self: boolean;
}

/** FailureOverview in ../overview.ts. */
interface FailureJson {
  runId: number;
  job: string;
  scheduledAt: string;
  trigger: string;
  status: string;
  /** `upstream` on a child's skip that its parents caused (the job page lists those too). */
  reasonKind: string | null;
  host: string;
  startedAt: string;
  finishedAt: string | null;
  exitCode: number | null;
  attempts: number;
  error: string | null;
  outputTail: string | null;
}

/** A run on the run and job pages (runDocumentOverHttp in ../../../actions/documents.ts). */
interface RunJson {
  id: number;
  job: string;
  scheduledAt: string;
  trigger: string;
  status: string;
  /** `upstream` on a child's skip that its parents caused (the job page lists those too). */
  reasonKind: string | null;
  host: string;
  startedAt: string;
  finishedAt: string | null;
  exitCode: number | null;
  attempts: number;
  error: string | null;
}

/** `GET api/run` (runPage in ../run-pages.ts, with the server's writeApi). */
interface RunPageJson {
  run: RunJson;
  chunks: OutputChunkJson[];
  /** More chunks wait: ask again at once. */
  more: boolean;
  /** A run from before whole output was kept: only its tail. */
  outputTail: string | null;
  writeApi: boolean;
}

interface OutputChunkJson {
  seq: number;
  attempt: number;
  stream: 'stdout' | 'stderr';
  /** Where in its attempt's stream the chunk starts, in bytes. */
  offset: number;
  bytes: number;
  base64: string;
}

/** `GET api/job` (jobPage in ../run-pages.ts, with the server's writeApi). */
interface JobPageJson {
  job: string;
  known: boolean;
  enabled: boolean;
  schedule: string | null;
  timezone: string | null;
  /** The jobs it runs after; null: none. */
  after: { jobs: string[]; on: string; withinMs: number } | null;
  /** The jobs that run after it. */
  children: string[];
  pause: PauseJson | null;
  nextFires: string[];
  /** Newest first. */
  runs: RunJson[];
  writeApi: boolean;
}

/** The answers of the write API's routes the buttons use (../../write-api.ts). */
interface RunNowAnswer {
  runId: number;
  host: string;
}
interface PauseAnswer {
  /** Null only when a resume at the same time lifted it again. */
  pause: PauseJson | null;
}
interface ResumeAnswer {
  resumed: boolean;
}
interface KillAnswer {
  /** killed, finished, lost or pending. */
  outcome: string;
  tookMs: number | null;
  status: string;
}
/** Any refusal of the write API. */
interface ErrorAnswer {
  error?: { message?: string };
}

// --- The script --------------------------------------------------------------------------------

// Everything inside one function: nothing of the script becomes a global of the page.
(function dashboard() {
  const REFRESH_MS = 5000;
  const LETTERS: Record<string, string> = {
    done: 'D',
    failed: 'F',
    timeout: 'T',
    lost: 'L',
    interrupted: 'I',
    killed: 'K',
    running: 'R',
    missed: 'M',
    skipped: 'S',
    paused: 'P',
    upstream: 'U',
  };
  const HOSTS_LISTED = 8;
  const state = { lastAt: null as Date | null, inFlight: false, okCount: 0 };

  /** An element of the page's markup (page.ts); it is always there. */
  function $(id: string): HTMLElement {
    const node = document.getElementById(id);
    if (!node) throw new Error('the page has no #' + id);
    return node;
  }

  type AttributeValue = string | number | boolean | null | undefined;
  type Child = Node | string | null | undefined;

  /**
   * An element; attrs: class, title, text, role, aria-*, data-*, scope, … (null, undefined and
   * false leave the attribute out); children: nodes or text.
   */
  function el<Tag extends keyof HTMLElementTagNameMap>(
    tag: Tag,
    attrs?: Record<string, AttributeValue> | null,
    children?: Child[],
  ): HTMLElementTagNameMap[Tag] {
    const node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach((key) => {
        const value = attrs[key];
        if (value == null || value === false) return;
        if (key === 'text') node.textContent = String(value);
        else if (key === 'class') node.className = String(value);
        else node.setAttribute(key, String(value));
      });
    }
    (children || []).forEach((child) => {
      if (child == null) return;
      node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
    });
    return node;
  }

  function pad(n: number, width?: number): string {
    let s = String(n);
    while (s.length < (width || 2)) s = '0' + s;
    return s;
  }

  /** An ISO instant as "2026-11-30 03:00:00" (UTC; milliseconds only when there are some). */
  function utc(iso: string | null): string {
    if (!iso) return '';
    const d = new Date(iso);
    const date = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
    const text = `${date} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
    return d.getUTCMilliseconds() ? text + '.' + pad(d.getUTCMilliseconds(), 3) : text;
  }

  /** 1500 → "1.5s", 125000 → "2m05s", 7500000 → "2h05m", 200000000 → "2d07h". */
  function span(ms: number): string {
    ms = Math.max(0, Math.round(ms));
    if (ms < 1000) return ms + 'ms';
    if (ms < 10000) return Math.round(ms / 100) / 10 + 's';
    const s = Math.round(ms / 1000);
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm' + pad(s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h' + pad(Math.floor((s % 3600) / 60)) + 'm';
    return Math.floor(s / 86400) + 'd' + pad(Math.floor((s % 86400) / 3600)) + 'h';
  }

  /** "in 12s" / "3m05s ago", from the overview's database time. */
  function relative(iso: string, nowIso: string): string {
    const diff = Date.parse(iso) - Date.parse(nowIso);
    if (Math.abs(diff) < 1000) return 'now';
    return diff > 0 ? 'in ' + span(diff) : span(-diff) + ' ago';
  }

  function plural(n: number, word: string): string {
    return n + ' ' + word + (n === 1 ? '' : 's');
  }

  /** What a rejected promise says: its Error's message, else the value as text. */
  function messageOf(err: unknown): string {
    const message = err ? (err as { message?: unknown }).message : undefined;
    return message ? String(message) : String(err);
  }

  function sym(outcome: string): HTMLElement {
    return el('span', {
      class: 'sym o-' + outcome,
      'aria-hidden': 'true',
      text: LETTERS[outcome] || '?',
    });
  }

  function badge(outcome: string, label?: string): HTMLElement {
    return el('span', { class: 'badge o-' + outcome }, [sym(outcome), label || outcome]);
  }

  // --- The overview ------------------------------------------------------------------------------

  function runLine(r: FireRunJson, workers: number): string {
    const parts = [
      'ran on ' + r.host + (workers > 1 ? ' (worker ' + r.slot + ')' : '') + ': ' + r.status,
    ];
    if (r.exitCode != null) parts.push('exit ' + r.exitCode);
    if (r.durationMs != null) parts.push(span(r.durationMs));
    if (r.slow) parts.push('slow: past its warn');
    if (r.tooShort) parts.push('too short: under its min');
    const line = parts.join(', ');
    return r.error ? line + ' — ' + r.error : line;
  }

  function hostList(hosts: string[]): string {
    const shown = hosts.slice(0, HOSTS_LISTED).join(', ');
    return hosts.length > HOSTS_LISTED
      ? shown + ' and ' + (hosts.length - HOSTS_LISTED) + ' more'
      : shown;
  }

  /** Everything a fire's rows say, for its title (tooltip) and its accessible name. */
  function fireText(f: FireJson, workers: number): string {
    const trigger = f.trigger !== 'schedule' ? ' (' + f.trigger + ')' : '';
    const lines = [utc(f.scheduledAt) + ' UTC — ' + f.outcome + trigger];
    f.runs.forEach((r) => {
      lines.push(runLine(r, workers));
    });
    if (f.outcome === 'missed') {
      lines.push('nobody attempted it' + (f.reason ? ': ' + f.reason : ''));
    }
    if (f.skippedBy.length > 0) {
      const why = f.runs.length === 0 && f.outcome !== 'missed' && f.reason ? ': ' + f.reason : '';
      lines.push(plural(f.skippedBy.length, 'skip') + ', by ' + hostList(f.skippedBy) + why);
    }
    return lines.join('\n');
  }

  /** The soft limits its runs passed (`duration:`): `slow`, `too-short`, both, or ''. */
  function limitWords(f: FireJson): string {
    const words: string[] = [];
    if (f.runs.some((r) => r.slow)) words.push('slow');
    if (f.runs.some((r) => r.tooShort)) words.push('too-short');
    return words.join(' ');
  }

  function fireHosts(f: FireJson): string {
    return f.runs.map((r) => r.host).join(' ');
  }

  function timeline(job: JobOverviewJson): HTMLElement {
    const list = el('ol', {
      class: 'timeline',
      'aria-label': 'Recent fires of ' + job.name + ', oldest first',
    });
    job.fires.forEach((f) => {
      const text = fireText(f, job.workers);
      const mark = el('span', {
        class: 'sym o-' + f.outcome,
        role: 'img',
        'aria-label': text,
        title: text,
        text: LETTERS[f.outcome] || '?',
      });
      list.appendChild(
        el(
          'li',
          {
            class: 'fire o-' + f.outcome,
            'data-outcome': f.outcome,
            'data-at': f.scheduledAt,
            'data-trigger': f.trigger,
            'data-winner': fireHosts(f),
            'data-skips': f.skippedBy.length,
            'data-skip-hosts': f.skippedBy.join(' '),
            'data-limits': limitWords(f),
          },
          [mark],
        ),
      );
    });
    if (job.fires.length === 0) return el('span', { class: 'sub', text: 'no fires yet' });
    return list;
  }

  function jobRow(job: JobOverviewJson, now: string): HTMLElement {
    const pauseReason = job.pause && job.pause.reason ? ': ' + job.pause.reason : '';
    const name = el('th', { scope: 'row' }, [
      el('a', { href: '#job/' + encodeURIComponent(job.name), text: job.name }),
    ]);
    if (!job.enabled) name.appendChild(el('span', { class: 'tag', text: 'disabled' }));
    if (job.pause) {
      name.appendChild(
        el('span', {
          class: 'tag paused',
          title:
            'paused by ' +
            job.pause.pausedBy +
            ' at ' +
            utc(job.pause.pausedAt) +
            ' UTC' +
            pauseReason,
          text: 'paused',
        }),
      );
    }
    if (job.workers > 1) {
      name.appendChild(el('span', { class: 'tag', text: job.workers + ' workers' }));
    }
    if (job.description) name.appendChild(el('span', { class: 'sub', text: job.description }));
    if (job.pause) {
      name.appendChild(
        el('span', {
          class: 'sub pause-note',
          text:
            'paused by ' +
            job.pause.pausedBy +
            ' ' +
            relative(job.pause.pausedAt, now) +
            pauseReason,
        }),
      );
    }

    const schedule = el('td', null, [
      job.scheduleWords,
      job.schedule != null
        ? el('span', { class: 'sub' }, [
            el('code', { class: 'expr', text: job.schedule }),
            job.timezone !== 'UTC' ? ' · ' + job.timezone : '',
          ])
        : null,
      job.runsOn != null ? el('span', { class: 'sub runs-on', text: 'on ' + job.runsOn }) : null,
    ]);

    const last = el('td', { class: 'last nowrap' });
    const lo = job.lastOutcome;
    if (lo) {
      last.setAttribute('title', fireText(lo, job.workers));
      last.setAttribute('data-outcome', lo.outcome);
      last.appendChild(badge(lo.outcome));
      // A run past its warn (going on, or ended): said beside the outcome, not only in the title.
      const limits = limitWords(lo);
      if (limits) last.appendChild(el('span', { class: 'tag limits', text: limits }));
      const hosts = fireHosts(lo);
      last.appendChild(
        el('span', {
          class: 'sub',
          text: relative(lo.scheduledAt, now) + (hosts ? ' on ' + hosts.split(' ').join(', ') : ''),
        }),
      );
    } else {
      last.appendChild(el('span', { class: 'sub', text: 'never ran' }));
    }

    const next = el('td', { class: 'next nowrap' });
    if (!job.enabled) next.appendChild(el('span', { class: 'sub', text: 'disabled' }));
    else if (!job.nextFire) next.appendChild(el('span', { class: 'sub', text: 'none' }));
    else {
      next.appendChild(document.createTextNode(utc(job.nextFire)));
      next.appendChild(
        el('span', {
          class: 'sub',
          text: relative(job.nextFire, now) + (job.pause ? ' · will be skipped (paused)' : ''),
        }),
      );
    }

    return el('tr', { 'data-job': job.name }, [
      name,
      schedule,
      last,
      next,
      el('td', { class: 'fires' }, [timeline(job)]),
    ]);
  }

  function offsetText(ms: number | null): string {
    if (ms == null) return 'not measured';
    if (ms === 0) return '0 ms';
    const size =
      Math.abs(ms) < 1000 ? Math.abs(ms) + ' ms' : (Math.abs(ms) / 1000).toFixed(2) + ' s';
    return (ms > 0 ? '+' : '−') + size + (ms > 0 ? ' ahead' : ' behind');
  }

  function runnerRow(r: RunnerJson, o: OverviewJson): HTMLElement {
    const host = el('th', { scope: 'row' }, [r.host]);
    if (r.self) host.appendChild(el('span', { class: 'tag', text: 'serves this page' }));
    for (const t of r.tags) host.appendChild(el('span', { class: 'tag', text: t }));
    const letter = ({ alive: 'A', stopped: 'S', gone: 'G' } as Record<string, string>)[r.state];
    const stateCell = el('td', { class: 'nowrap st-' + r.state }, [
      el('span', { class: 'badge' }, [
        el('span', { class: 'sym', 'aria-hidden': 'true', text: letter || '?' }),
        r.state,
      ]),
    ]);
    if (r.stoppedAt) {
      stateCell.appendChild(
        el('span', { class: 'sub', text: 'stopped ' + relative(r.stoppedAt, o.now) }),
      );
    }
    const offsetBad = r.clockOffsetMs != null && Math.abs(r.clockOffsetMs) > o.limits.clockWarnMs;
    const offset = el('td', {
      class: 'nowrap' + (offsetBad ? ' offset-bad' : ''),
      text: offsetText(r.clockOffsetMs),
    });
    const lock = r.lockSessionHeld == null ? '—' : r.lockSessionHeld ? 'held' : 'lost';
    return el('tr', { 'data-host': r.host, 'data-state': r.state }, [
      host,
      stateCell,
      offset,
      el('td', { class: 'nowrap', text: span(r.lastSeenAgoMs) + ' ago' }),
      el('td', { text: lock }),
      el('td', { class: 'mono', text: r.version }),
      el('td', { class: 'mono', text: r.pid }),
      el('td', { class: 'nowrap' }, [
        utc(r.startedAt),
        el('span', { class: 'sub', text: relative(r.startedAt, o.now) }),
      ]),
    ]);
  }

  function poolRow(p: PoolJson, o: OverviewJson): HTMLElement {
    const used =
      p.scope === 'host'
        ? p.places.map((h) => h.host + ' ' + h.used + ' / ' + h.slots).join(', ') ||
          'no live runner'
        : p.inUse + ' / ' + p.slots;
    const full = p.places.some((h) => h.used >= h.slots);
    const holders = p.holders.map(
      (h) =>
        h.job + ' on ' + h.host + ' (run ' + h.runId + ', ' + relative(h.startedAt, o.now) + ')',
    );
    for (const c of p.claiming) holders.push(c.holder + ' (taking a slot)');
    return el('tr', { 'data-pool': p.name }, [
      el('th', { scope: 'row', text: p.name }),
      el('td', { class: 'nowrap', text: p.scope === 'host' ? p.slots + ' per host' : p.slots }),
      el('td', { class: 'nowrap' + (full ? ' offset-bad' : ''), text: used }),
      el('td', { text: holders.join(', ') || '—' }),
    ]);
  }

  function blackoutRow(b: BlackoutJson, o: OverviewJson): HTMLElement {
    const when =
      b.state === 'active'
        ? 'on, ends ' + relative(b.endsAt, o.now)
        : 'starts ' + relative(b.from, o.now);
    return el('tr', { 'data-blackout': String(b.id) }, [
      el('th', { scope: 'row', text: '#' + b.id }),
      el('td', { class: 'nowrap' + (b.state === 'active' ? ' offset-bad' : ''), text: when }),
      el('td', { class: 'nowrap', text: utc(b.from) + ' – ' + utc(b.endsAt) + ' UTC' }),
      el('td', { text: b.jobs == null ? 'every job' : b.jobs.join(', ') }),
      el('td', { text: b.createdBy + ': ' + b.reason }),
    ]);
  }

  function failureItem(f: FailureJson, o: OverviewJson): HTMLElement {
    const facts = [
      'fire ' + utc(f.scheduledAt) + ' UTC (' + relative(f.scheduledAt, o.now) + ')',
      f.trigger,
      'on ' + f.host,
    ];
    if (f.exitCode != null) facts.push('exit ' + f.exitCode);
    if (f.attempts > 1) facts.push(plural(f.attempts, 'attempt'));
    if (f.finishedAt) facts.push('ran ' + span(Date.parse(f.finishedAt) - Date.parse(f.startedAt)));
    facts.push('run ' + f.runId);
    const tail = f.outputTail
      ? el('pre', {
          class: 'tail',
          tabindex: '0',
          'aria-label': 'Output of run ' + f.runId,
          text: f.outputTail,
        })
      : el('p', { class: 'sub', text: 'no output' });
    return el(
      'li',
      { class: 'failure', 'data-run': f.runId, 'data-job': f.job, 'data-status': f.status },
      [
        el('h3', null, [
          el('a', { class: 'job', href: '#run/' + f.runId, text: f.job }),
          badge(f.status),
        ]),
        el('p', { class: 'facts', text: facts.join(' · ') }),
        f.error ? el('p', { class: 'error', text: f.error }) : null,
        tail,
      ],
    );
  }

  function card(value: string, label: string, detail: string, bad?: boolean): HTMLElement {
    return el('div', { class: 'card' + (bad ? ' bad' : '') }, [
      el('div', { class: 'value', text: value }),
      el('div', { class: 'label', text: label }),
      detail ? el('div', { class: 'sub', text: detail }) : null,
    ]);
  }

  /** Replaces the children of #id with `nodes` (nulls left out). */
  function replace(id: string, nodes: (Node | null | undefined)[]): void {
    const node = $(id);
    while (node.firstChild) node.removeChild(node.firstChild);
    nodes.forEach((n) => {
      if (n) node.appendChild(n);
    });
  }

  function render(o: OverviewJson): void {
    $('namespace').textContent = o.namespace;
    $('host').textContent = o.host;
    $('now').textContent = utc(o.now) + ' UTC';
    document.title = 'baton · ' + o.namespace;

    const problem = $('problem');
    problem.hidden = o.database.connected;
    problem.textContent = o.database.connected ? '' : o.database.problem;

    const disabled = o.jobs.filter((j) => !j.enabled).length;
    const paused = o.jobs.filter((j) => j.pause).length;
    const running = o.jobs.filter((j) => j.fires.some((f) => f.outcome === 'running')).length;
    const alive = o.runners.filter((r) => r.state === 'alive').length;
    const gone = o.runners.filter((r) => r.state === 'gone');
    const latest = o.failures[0];
    replace('cards', [
      card(
        String(o.jobs.length),
        o.jobs.length === 1 ? 'job' : 'jobs',
        [disabled ? disabled + ' disabled' : '', paused ? paused + ' paused' : '']
          .filter(Boolean)
          .join(', ') || 'all enabled',
      ),
      card(
        alive + ' / ' + o.runners.length,
        'runners alive',
        gone.length ? 'gone: ' + gone.map((r) => r.host).join(', ') : '',
        gone.length > 0,
      ),
      card(String(running), 'jobs running now', ''),
      card(
        String(o.failures.length),
        'recent failures',
        latest ? 'latest: ' + latest.job + ', ' + relative(latest.scheduledAt, o.now) : 'none',
        o.failures.length > 0,
      ),
    ]);

    replace(
      'jobs-body',
      o.jobs.map((j) => jobRow(j, o.now)),
    );
    $('jobs-empty').hidden = o.jobs.length > 0;
    $('fires-limit').textContent =
      'the latest ' + o.limits.firesPerJob + ' fires of each job, oldest first';

    replace(
      'runners-body',
      o.runners.map((r) => runnerRow(r, o)),
    );
    $('runners-empty').hidden = o.runners.length > 0;
    $('runners-empty').textContent = o.database.connected
      ? 'No runner has registered in this namespace.'
      : 'Not known while the database cannot be read.';

    $('pools-panel').hidden = o.pools.length === 0;
    replace(
      'pools-body',
      o.pools.map((p) => poolRow(p, o)),
    );

    $('blackouts-panel').hidden = o.blackouts.length === 0;
    replace(
      'blackouts-body',
      o.blackouts.map((b) => blackoutRow(b, o)),
    );

    replace(
      'failures-list',
      o.failures.map((f) => failureItem(f, o)),
    );
    $('failures-empty').hidden = o.failures.length > 0;
    $('failures-empty').textContent = o.database.connected
      ? 'No failed, timed-out or lost run in the history.'
      : 'Not known while the database cannot be read.';
    $('failures-limit').textContent =
      `failed, timeout and lost runs; the latest ${o.limits.failures}, ` +
      `with the last ${o.limits.outputTailChars} characters of output`;
    // Output tails read from their end.
    document.querySelectorAll('pre.tail').forEach((pre) => {
      pre.scrollTop = pre.scrollHeight;
    });
  }

  function clock(date: Date): string {
    return pad(date.getHours()) + ':' + pad(date.getMinutes()) + ':' + pad(date.getSeconds());
  }

  function setStatus(ok: boolean, why?: string): void {
    const pill = $('updated');
    const banner = $('fetch-error');
    pill.setAttribute('data-state', ok ? 'ok' : 'error');
    pill.className = 'pill ' + (ok ? 'ok' : 'error');
    if (ok && state.lastAt) {
      pill.textContent = 'updated ' + clock(state.lastAt);
      banner.hidden = true;
      banner.textContent = '';
      return;
    }
    pill.textContent = state.lastAt
      ? 'refresh failed · data from ' + clock(state.lastAt)
      : 'could not load';
    banner.hidden = false;
    const kept = state.lastAt ? 'Showing the data from ' + clock(state.lastAt) + '; ' : '';
    const retry = `retrying every ${REFRESH_MS / 1000} s.`;
    banner.textContent = `Could not refresh the dashboard (${why}). ${kept}${retry}`;
  }

  function refresh(): void {
    if (state.inFlight) return;
    state.inFlight = true;
    fetch('api/overview', {
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { Accept: 'application/json' },
    })
      .then((res) => {
        if (!res.ok) {
          throw new Error('HTTP ' + res.status + (res.statusText ? ' ' + res.statusText : ''));
        }
        return res.json() as Promise<OverviewJson>;
      })
      .then((overview) => {
        render(overview);
        state.lastAt = new Date();
        state.okCount += 1;
        document.body.setAttribute('data-refreshes', String(state.okCount));
        setStatus(true);
      })
      .catch((err: unknown) => {
        setStatus(false, messageOf(err));
      })
      .then(() => {
        state.inFlight = false;
      });
  }

  // --- The run and job pages (#run/42, #job/settle) -----------------------------------------------

  const page = { gen: 0, timer: undefined as ReturnType<typeof setTimeout> | undefined };
  const RUN_POLL_MS = 1000;

  function getJson<T>(url: string): Promise<T> {
    return fetch(url, {
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { Accept: 'application/json' },
    }).then((res) => {
      if (!res.ok) throw new Error(res.status === 404 ? 'not found' : 'HTTP ' + res.status);
      return res.json() as Promise<T>;
    });
  }

  function showPage(on: boolean): void {
    $('detail').hidden = !on;
    $('overview').hidden = on;
  }

  function clearAction(): void {
    $('action-result').hidden = true;
    replace('action-result', []);
    replace('detail-actions', []);
  }

  function runFacts(r: RunJson): string {
    const facts = ['fire ' + utc(r.scheduledAt) + ' UTC', r.trigger, 'on ' + r.host];
    if (r.exitCode != null) facts.push('exit ' + r.exitCode);
    if (r.attempts > 1) facts.push(plural(r.attempts, 'attempt'));
    if (r.finishedAt) facts.push('ran ' + span(Date.parse(r.finishedAt) - Date.parse(r.startedAt)));
    if (r.error) facts.push(r.error);
    return facts.join(' · ');
  }

  /** Page generation `gen`: a poll that finds the page moved on (a newer gen) stops. */
  function openRun(id: string, gen: number): void {
    let after = -1;
    /** Per attempt, the byte offset the next chunk should start at (a gap: bytes dropped). */
    const next: Record<number, number> = {};
    let attempt = 0;
    /** One decoder per attempt and stream: a character may be cut between two chunks. */
    const decoders: Record<string, TextDecoder> = {};
    function decode(c: OutputChunkJson): string {
      const key = c.attempt + ':' + c.stream;
      const decoder = decoders[key] || (decoders[key] = new TextDecoder('utf-8'));
      const bin = atob(c.base64);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      return decoder.decode(bytes, { stream: true });
    }
    let shownStatus: string | null = null;
    const out = el('pre', {
      id: 'run-output',
      class: 'output',
      tabindex: '0',
      'aria-label': 'Output of run ' + id,
    });
    replace('detail-title', [document.createTextNode('Run ' + id)]);
    replace('detail-body', [out]);
    function poll(): void {
      if (gen !== page.gen) return;
      getJson<RunPageJson>('api/run?id=' + encodeURIComponent(id) + '&after=' + after)
        .then((d) => {
          if (gen !== page.gen) return;
          const r = d.run;
          replace('detail-title', [
            el('a', { href: '#job/' + encodeURIComponent(r.job), text: r.job }),
            document.createTextNode(' · run ' + r.id + ' '),
            badge(r.status),
          ]);
          $('detail-facts').textContent = runFacts(r);
          if (r.status !== shownStatus) {
            shownStatus = r.status;
            runActions(r, d.writeApi);
          }
          d.chunks.forEach((c) => {
            if (c.attempt !== attempt) {
              if (attempt !== 0 || c.attempt > 1) {
                out.appendChild(
                  el('span', { class: 'note', text: '── attempt ' + c.attempt + ' ──\n' }),
                );
              }
              attempt = c.attempt;
            }
            const gap = c.offset - (next[c.attempt] || 0);
            if (gap > 0) {
              out.appendChild(
                el('span', {
                  class: 'note',
                  text: '\n… ' + gap + ' bytes dropped here (over output.max) …\n',
                }),
              );
            }
            next[c.attempt] = c.offset + c.bytes;
            out.appendChild(el('span', { class: c.stream, text: decode(c) }));
            after = c.seq;
          });
          if (d.outputTail) out.appendChild(el('span', { text: d.outputTail }));
          document.body.setAttribute('data-run-status', r.status);
          if (d.more) poll();
          else if (r.status === 'running') page.timer = setTimeout(poll, RUN_POLL_MS);
          else if (!out.firstChild) {
            out.appendChild(el('span', { class: 'note', text: '(no output)' }));
          }
        })
        .catch((err: unknown) => {
          if (gen !== page.gen) return;
          const message = messageOf(err);
          $('detail-facts').textContent = 'Could not load run ' + id + ': ' + message;
          if (message === 'not found') return;
          page.timer = setTimeout(poll, RUN_POLL_MS * 5);
        });
    }
    poll();
  }

  function openJob(name: string, gen: number): void {
    replace('detail-title', [document.createTextNode(name)]);
    $('detail-facts').textContent = 'recent runs, newest first';
    replace('detail-body', []);
    function load(): void {
      getJson<JobPageJson>('api/job?name=' + encodeURIComponent(name))
        .then((d) => {
          if (gen !== page.gen) return;
          renderJob(d);
        })
        .catch((err: unknown) => {
          if (gen === page.gen) {
            $('detail-facts').textContent =
              'Could not load ' + name + ': ' + (err as Error).message;
          }
        });
    }
    function renderJob(d: JobPageJson): void {
      const own =
        d.schedule != null
          ? 'schedule ' + d.schedule + (d.timezone !== 'UTC' ? ' (' + d.timezone + ')' : '')
          : 'no schedule of its own';
      $('detail-facts').textContent = d.known
        ? (d.enabled ? own : 'disabled') + ' · recent runs, newest first'
        : 'not in the schedules file this runner loaded; its recent runs:';
      jobActions(d, load);
      const rows = d.runs.map((r) =>
        el('tr', { 'data-run': r.id }, [
          el('td', { class: 'nowrap' }, [
            // An `upstream` skip ran nothing: no run page to open.
            r.reasonKind === 'upstream'
              ? el('span', { text: utc(r.scheduledAt) + ' UTC' })
              : el('a', { href: '#run/' + r.id, text: utc(r.scheduledAt) + ' UTC' }),
          ]),
          el('td', null, [r.reasonKind === 'upstream' ? badge('upstream') : badge(r.status)]),
          el('td', { text: r.trigger }),
          el('td', { text: r.host }),
          el('td', {
            text: r.finishedAt ? span(Date.parse(r.finishedAt) - Date.parse(r.startedAt)) : '',
          }),
          el('td', { text: r.exitCode != null ? String(r.exitCode) : '' }),
        ]),
      );
      const head = el(
        'tr',
        null,
        ['fire', 'status', 'trigger', 'host', 'took', 'exit'].map((h) =>
          el('th', { scope: 'col', text: h }),
        ),
      );
      const next = d.nextFires.length
        ? el(
            'ul',
            { id: 'job-next', class: 'next-fires' },
            d.nextFires.map((at) =>
              el('li', {
                class: 'mono',
                text: utc(at) + ' UTC' + (d.pause ? ' (will be skipped: paused)' : ''),
              }),
            ),
          )
        : el('p', {
            id: 'job-next',
            class: 'sub',
            text: !d.enabled
              ? 'none: the job is disabled'
              : d.schedule == null && d.after
                ? "none of its own: it runs at its parents' instants"
                : 'no more fires',
          });
      replace('detail-body', [
        el('p', {
          id: 'job-pause',
          class: d.pause ? 'pause-note paused' : 'sub',
          'data-paused': d.pause ? 'yes' : 'no',
          text: pauseText(d.pause),
        }),
        el('h3', { text: 'Next fires' }),
        next,
        ...graph(d),
        el('h3', { text: 'Recent runs' }),
        rows.length
          ? el('table', { id: 'job-runs' }, [el('thead', null, [head]), el('tbody', null, rows)])
          : el('p', { class: 'empty', text: 'no runs recorded' }),
      ]);
    }
    load();
  }

  /** The jobs it runs after and those that run after it (`after:`), as links to their pages. */
  function graph(d: JobPageJson): HTMLElement[] {
    if (!d.after && d.children.length === 0) return [];
    const links = (id: string, names: string[], empty: string) =>
      names.length
        ? el(
            'ul',
            { id, class: 'job-links' },
            names.map((n) =>
              el('li', null, [el('a', { href: '#job/' + encodeURIComponent(n), text: n })]),
            ),
          )
        : el('p', { id, class: 'sub', text: empty });
    const on = d.after
      ? d.after.on === 'success'
        ? 'once every one of them succeeded'
        : d.after.on === 'failure'
          ? 'once every one of them failed'
          : 'once every one of them ended'
      : '';
    return [
      el('h3', { text: 'Runs after' }),
      d.after
        ? el('div', null, [
            links('job-parents', d.after.jobs, ''),
            el('p', {
              class: 'sub',
              text: on + ', for the same instant, waiting up to ' + span(d.after.withinMs),
            }),
          ])
        : links('job-parents', [], 'no job: it runs at its own schedule'),
      el('h3', { text: 'Run after it' }),
      links('job-children', d.children, 'no job'),
    ];
  }

  function pauseText(p: PauseJson | null): string {
    return p
      ? 'paused by ' +
          p.pausedBy +
          ' at ' +
          utc(p.pausedAt) +
          ' UTC' +
          (p.reason ? ': ' + p.reason : '')
      : 'not paused';
  }

  function route(): void {
    page.gen += 1;
    clearTimeout(page.timer);
    const hash = location.hash.replace(/^#/, '');
    const run = /^run\/(\d+)$/.exec(hash);
    const job = /^job\/(.+)$/.exec(hash);
    showPage(Boolean(run || job));
    clearAction();
    if (run) openRun(run[1]!, page.gen);
    else if (job) openJob(decodeURIComponent(job[1]!), page.gen);
  }

  // --- Write buttons (run now, pause/resume, kill) ------------------------------------------------
  //
  // Shown only when the runner has the write API on and the user has entered a write token on the
  // page. The token is kept in this tab's sessionStorage (gone with the tab, never in a cookie or
  // the URL) and sent as `Authorization: Bearer` with the POST alone, with `credentials: 'omit'`:
  // the browser's own Basic credentials (the read token) are not sent along, and no other site can
  // make the browser send the write token. Each button asks for a reason (a prompt; Cancel does
  // nothing) and shows the outcome: what happened, or the error's message from the JSON answer.

  const TOKEN_KEY = 'baton.writeToken';
  let outcomes = 0;

  function writeToken(): string {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || '';
    } catch {
      return '';
    }
  }

  function setWriteToken(token: string): void {
    try {
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // Storage refused (private mode): the token is simply not kept.
    }
  }

  /** What a button says it did, and maybe a link to what it started. */
  interface Said {
    text: string;
    link?: { href: string; text: string };
  }

  function showOutcome(ok: boolean, said: Said): void {
    const out = $('action-result');
    out.hidden = false;
    out.setAttribute('data-state', ok ? 'ok' : 'error');
    outcomes += 1;
    out.setAttribute('data-seq', String(outcomes));
    out.className = 'banner ' + (ok ? 'ok' : 'error');
    replace('action-result', [
      document.createTextNode(said.text),
      said.link ? el('a', { href: said.link.href, text: said.link.text }) : null,
    ]);
  }

  /** POSTs {reason} to `path` with the write token; resolves with the JSON answer or rejects. */
  function post<Answer>(path: string, reason: string): Promise<Answer> {
    return fetch(path, {
      method: 'POST',
      credentials: 'omit',
      cache: 'no-store',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json',
        Authorization: 'Bearer ' + writeToken(),
      },
      body: JSON.stringify(reason ? { reason: reason } : {}),
    }).then((res) =>
      (res.json() as Promise<Answer & ErrorAnswer>)
        .catch(() => ({}) as Answer & ErrorAnswer)
        .then((body) => {
          if (res.ok) return body;
          const message =
            body && body.error && body.error.message ? body.error.message : 'HTTP ' + res.status;
          throw new Error(message);
        }),
    );
  }

  /** A button that asks for a reason, POSTs, shows the outcome and calls done(). */
  function actionButton<Answer>(
    id: string,
    label: string,
    question: string,
    path: string,
    describe: (answer: Answer) => Said,
    done?: () => void,
  ): HTMLButtonElement {
    const button = el('button', { id: id, type: 'button', class: 'action', text: label });
    button.addEventListener('click', () => {
      const reason = window.prompt(question + ' Reason (optional):', '');
      if (reason === null) return;
      button.disabled = true;
      post<Answer>(path, reason.trim())
        .then(
          (answer) => {
            showOutcome(true, describe(answer));
          },
          (err: unknown) => {
            showOutcome(false, { text: label + ' refused: ' + messageOf(err) });
          },
        )
        .then(() => {
          button.disabled = false;
          if (done) done();
        });
    });
    return button;
  }

  /** The token box, or (with a token) the buttons make() builds; nothing without the write API. */
  function renderActions(writeApi: boolean, make: () => HTMLElement[], rerender: () => void): void {
    if (!writeApi) {
      replace('detail-actions', []);
      return;
    }
    if (!writeToken()) {
      const input = el('input', {
        id: 'write-token',
        type: 'password',
        autocomplete: 'off',
        'aria-label': 'Write token',
        placeholder: 'write token',
      });
      const use = el('button', { id: 'write-token-use', type: 'button', text: 'Use write token' });
      use.addEventListener('click', () => {
        if (!input.value.trim()) return;
        setWriteToken(input.value.trim());
        rerender();
      });
      input.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') use.click();
      });
      replace('detail-actions', [
        el('span', { class: 'sub', text: 'Actions need a write token (kept in this tab only): ' }),
        input,
        use,
      ]);
      return;
    }
    const forget = el('button', {
      id: 'write-token-forget',
      type: 'button',
      class: 'quiet',
      text: 'Forget token',
    });
    forget.addEventListener('click', () => {
      setWriteToken('');
      rerender();
    });
    replace('detail-actions', make().concat([forget]));
  }

  function jobActions(d: JobPageJson, reload: () => void): void {
    const name = d.job;
    const base = 'api/jobs/' + encodeURIComponent(name) + '/';
    renderActions(
      d.writeApi,
      () => {
        const buttons = [
          actionButton<RunNowAnswer>(
            'action-run',
            'Run now',
            'Run ' + name + ' now on this runner?',
            base + 'run',
            (b) => ({
              text: 'Started run ' + b.runId + ' of ' + name + ' on ' + b.host + ' ',
              link: { href: '#run/' + b.runId, text: 'show run ' + b.runId },
            }),
            reload,
          ),
        ];
        if (d.pause) {
          buttons.push(
            actionButton<ResumeAnswer>(
              'action-resume',
              'Resume',
              'Resume ' + name + ' on every runner?',
              base + 'resume',
              (b) => ({ text: b.resumed ? 'Resumed ' + name : name + ' was not paused' }),
              reload,
            ),
          );
        } else {
          buttons.push(
            actionButton<PauseAnswer>(
              'action-pause',
              'Pause',
              'Pause ' + name + ' on every runner from its next fire?',
              base + 'pause',
              (b) => ({
                text: b.pause
                  ? 'Paused ' + name + ' (by ' + b.pause.pausedBy + ')'
                  : name + ' was resumed again at once by someone else',
              }),
              reload,
            ),
          );
        }
        return buttons;
      },
      () => jobActions(d, reload),
    );
  }

  function runActions(r: RunJson, writeApi: boolean): void {
    renderActions(
      writeApi && r.status === 'running',
      () => [
        actionButton<KillAnswer>(
          'action-kill',
          'Kill',
          'Kill run ' + r.id + ' of ' + r.job + '?',
          'api/runs/' + r.id + '/kill',
          (b) => {
            const took = b.tookMs != null ? ' in ' + (b.tookMs / 1000).toFixed(1) + ' s' : '';
            const said: Record<string, string> = {
              killed: 'Killed run ' + r.id + took,
              finished: 'Run ' + r.id + ' had already finished (' + b.status + ')',
              lost: 'Run ' + r.id + ' was lost: its runner is gone',
              pending: 'Kill of run ' + r.id + ' asked; its runner has not acted yet',
            };
            return { text: said[b.outcome] || 'Kill of run ' + r.id + ': ' + b.outcome };
          },
        ),
      ],
      () => runActions(r, writeApi),
    );
  }

  // --- Start ---------------------------------------------------------------------------------------

  window.addEventListener('hashchange', route);
  route();
  refresh();
  // A tab in the background asks nothing (several viewers are several readers of the database);
  // brought back, it refreshes at once.
  setInterval(() => {
    if (!document.hidden) refresh();
  }, REFRESH_MS);
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) refresh();
  });
})();
