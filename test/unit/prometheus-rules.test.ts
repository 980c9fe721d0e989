/**
 * The shipped Prometheus rules (deploy/prometheus/) and Grafana dashboard (deploy/grafana/),
 * checked with the real promtool (Debian's `prometheus` package): the rules load and pass their
 * own unit tests, every dashboard query parses as PromQL and returns data from series shaped like
 * baton's, and every metric, label and label value they name is one that baton exports. The metric list below is the contract of
 * src/http/metrics.ts; test/e2e checks the real `/metrics` against Prometheus.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROOT } from '../helpers/cli.js';

const RULES = 'deploy/prometheus/baton.rules.yml';
const RULE_TESTS = 'deploy/prometheus/baton.rules.test.yml';
const DASHBOARD = 'deploy/grafana/baton.json';

const COUNTERS = [
  'baton_runs_total',
  'baton_skips_total',
  'baton_fires_not_attempted_total',
  'baton_fires_missed_total',
  'baton_lock_session_losses_total',
  'baton_database_failovers_total',
];
const HISTOGRAMS = [
  'baton_run_duration_seconds',
  'baton_fire_lag_seconds',
  'baton_lock_acquisition_seconds',
];
const GAUGES = [
  'baton_job_last_success_timestamp_seconds',
  'baton_job_last_failure_timestamp_seconds',
  'baton_job_last_run_timestamp_seconds',
  'baton_job_expect_seconds',
  'baton_scheduler_last_wake_timestamp_seconds',
  'baton_database_up',
  'baton_database_read_only',
  'baton_database_detached',
  'baton_clock_offset_seconds',
  'baton_runs_running',
  'baton_jobs_loaded',
  'baton_runner_info',
];
/**
 * What a query may name: baton's series, a histogram's parts, the standard process metric baton
 * exports (a runner's start, for counters that first appear at their first increment), and
 * Prometheus' own `up`.
 */
const EXPORTED = new Set([
  ...COUNTERS,
  ...GAUGES,
  ...HISTOGRAMS.flatMap((h) => [`${h}_bucket`, `${h}_sum`, `${h}_count`]),
  'process_start_time_seconds',
  'up',
]);
/** baton's labels, the histograms' `le`, and Prometheus' target labels. */
const LABELS = new Set([
  'baton_job',
  'status',
  'reason',
  'outcome',
  'host',
  'namespace',
  'version',
  'le',
  'job',
  'instance',
]);
/** The values a matcher on these labels may name (skips' and not-attempted reasons share one). */
const LABEL_VALUES: Record<string, Set<string>> = {
  status: new Set(['done', 'failed', 'timeout', 'interrupted', 'killed', 'lost']),
  reason: new Set(['taken', 'overlap', 'paused', 'no-database', 'read-only', 'late-wake', 'error']),
  outcome: new Set(['won', 'skipped']),
};
const PROMQL_WORDS = new Set([
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'inf',
  'nan',
]);

const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

function promtool(args: string[]): { code: number | null; output: string } {
  const result = spawnSync('promtool', args, { cwd: ROOT, encoding: 'utf8' });
  if (result.error) throw new Error(`promtool (Debian's prometheus package): ${result.error}`);
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'baton-prom-rules-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** `promtool check rules` over the expressions, each as a recording rule of its own. */
function checkExpressions(exprs: string[]): { code: number | null; output: string } {
  const file = path.join(scratch, `exprs-${Math.random().toString(36).slice(2)}.yml`);
  const rules = exprs.map((expr, i) => ({ record: `dashboard_expr_${i}`, expr }));
  writeFileSync(file, JSON.stringify({ groups: [{ name: 'dashboard', rules }] }));
  return promtool(['check', 'rules', file]);
}

/**
 * What an expression names, read the simple way: label names from matchers and grouping lists,
 * metric names from what remains (identifiers that are not calls, keywords or durations).
 */
function namesIn(expr: string): {
  metrics: string[];
  labels: string[];
  values: [string, string][];
} {
  const labels: string[] = [];
  const values: [string, string][] = [];
  let rest = expr.replace(/\{([^}]*)\}/g, (_, body: string) => {
    for (const m of body.matchAll(/([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g)) {
      labels.push(m[1]!);
      for (const v of m[3]!.split('|')) values.push([m[1]!, v]);
    }
    return ' ';
  });
  rest = rest.replace(
    /\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g,
    (_, _word, list: string) => {
      labels.push(
        ...list
          .split(',')
          .map((l) => l.trim())
          .filter(Boolean),
      );
      return ' ';
    },
  );
  rest = rest.replace(/"(?:[^"\\]|\\.)*"/g, ' ').replace(/\[[^\]]*\]/g, ' ');
  const metrics: string[] = [];
  for (const m of rest.matchAll(/(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?/g)) {
    if (m[2] || PROMQL_WORDS.has(m[1]!.toLowerCase())) continue;
    metrics.push(m[1]!);
  }
  return { metrics, labels, values };
}

/** Every name the expressions use that baton does not export (`where: name`). */
function unknownNames(exprs: { where: string; expr: string }[], recorded: Set<string>) {
  const unknown: string[] = [];
  for (const { where, expr } of exprs) {
    const { metrics, labels, values } = namesIn(expr);
    for (const m of metrics)
      if (!EXPORTED.has(m) && !recorded.has(m)) unknown.push(`${where}: ${m}`);
    for (const l of labels) if (!LABELS.has(l)) unknown.push(`${where}: label ${l}`);
    for (const [l, v] of values) {
      const allowed = LABEL_VALUES[l];
      if (allowed && !allowed.has(v)) unknown.push(`${where}: ${l}="${v}"`);
    }
  }
  return unknown;
}

// --- the rules -----------------------------------------------------------------------------------

interface Rule {
  record?: string;
  alert?: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
const rules = (parse(read(RULES)) as { groups: { name: string; rules: Rule[] }[] }).groups.flatMap(
  (g) => g.rules,
);
const alerts = rules.filter((r) => r.alert != null);
const recorded = new Set(rules.flatMap((r) => (r.record ? [r.record] : [])));

describe('the Prometheus rules', () => {
  it('pass promtool check rules', () => {
    const { code, output } = promtool(['check', 'rules', RULES]);
    expect(output).toContain('SUCCESS');
    expect(code, output).toBe(0);
  });

  it('pass their promtool unit tests', () => {
    const { code, output } = promtool(['test', 'rules', RULE_TESTS]);
    expect(output).toContain('SUCCESS');
    expect(code, output).toBe(0);
  });

  it('have the alerts the runbook documents, each with a severity, a summary and a description', () => {
    expect(alerts.map((a) => a.alert).sort()).toEqual(
      [
        'BatonClockOffset',
        'BatonDatabaseDetached',
        'BatonDatabaseDown',
        'BatonDatabaseReadOnly',
        'BatonFiresMissed',
        'BatonJobFailed',
        'BatonJobNeverSucceeded',
        'BatonJobNoRecentSuccess',
        'BatonLockSessionLost',
        'BatonNoRunnerAlive',
        'BatonRunnerGone',
        'BatonSchedulerStuck',
      ].sort(),
    );
    const runbook = read('docs/runbook.md');
    for (const a of alerts) {
      expect(['warning', 'critical'], a.alert).toContain(a.labels?.severity);
      expect(a.annotations?.summary, a.alert).toBeTruthy();
      expect(a.annotations?.description, a.alert).toBeTruthy();
      // An alert about a batch names it; one about a runner names the runner.
      if (/\bby \(job, baton_job\)|baton_job:/.test(a.expr)) {
        expect(a.annotations?.summary, a.alert).toContain('{{ $labels.baton_job }}');
      }
      expect(runbook.includes(`\`${a.alert}\``), `docs/runbook.md documents ${a.alert}`).toBe(true);
    }
  });

  it('have a case where each alert fires and one where it does not', () => {
    const file = parse(read(RULE_TESTS)) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
    };
    const cases = file.tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const a of alerts) {
      const mine = cases.filter((c) => c.alertname === a.alert);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length > 0),
        `${a.alert} fires somewhere`,
      ).toBe(true);
      expect(
        mine.some((c) => (c.exp_alerts ?? []).length === 0),
        `${a.alert} stays quiet somewhere`,
      ).toBe(true);
    }
  });

  it('leave interrupted (a drain) out of the failure alert', () => {
    const failed = alerts.find((a) => a.alert === 'BatonJobFailed')!;
    const statuses = namesIn(failed.expr).values.filter(([l]) => l === 'status');
    expect(statuses.map(([, v]) => v).sort()).toEqual(['failed', 'lost', 'timeout']);
  });

  it('name only metrics, labels and values baton exports', () => {
    const exprs = rules.map((r) => ({ where: r.alert ?? r.record!, expr: r.expr }));
    expect(unknownNames(exprs, recorded)).toEqual([]);
  });
});

// --- the dashboard -------------------------------------------------------------------------------

interface Panel {
  id: number;
  title?: string;
  type: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type?: string; uid?: string };
  targets?: { expr?: string; datasource?: { uid?: string } }[];
  panels?: Panel[];
}
interface Dashboard {
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: unknown; definition?: string }[] };
}

/** Grafana's built-in interval variables, and a value for each of the dashboard's own. */
const BUILT_INS: Record<string, string> = {
  __rate_interval: '5m',
  __interval: '1m',
  __range: '1d',
  __range_s: '86400',
  __interval_ms: '60000',
};
const VARIABLE_VALUES: Record<string, string> = { job: 'baton', baton_job: 'report|settle' };

/** The query as Prometheus receives it: every `$var`, `${var}` and `[[var]]` replaced. */
function substitute(expr: string, defined: Set<string>): string {
  return expr.replace(/\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]/g, (whole, a, b, c) => {
    const name = (a ?? b ?? c) as string;
    const value = BUILT_INS[name] ?? (defined.has(name) ? VARIABLE_VALUES[name] : undefined);
    if (value == null) throw new Error(`${whole} is neither a built-in nor a dashboard variable`);
    return value;
  });
}

function allPanels(panels: Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

describe('the Grafana dashboard', () => {
  const dashboard = JSON.parse(read(DASHBOARD)) as Dashboard;
  const variables = new Set(dashboard.templating.list.map((v) => v.name));
  const panels = allPanels(dashboard.panels).filter((p) => p.type !== 'row');
  const queries = panels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({
      where: p.title ?? '?',
      expr: substitute(t.expr ?? '', variables),
    })),
  );

  it('is a dashboard of the current schema, on a ${datasource} Prometheus variable', () => {
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(dashboard.templating.list.find((v) => v.name === 'datasource')).toMatchObject({
      type: 'datasource',
      query: 'prometheus',
    });
    const batonJob = dashboard.templating.list.find((v) => v.name === 'baton_job');
    expect(batonJob?.definition).toMatch(/^label_values\(baton_runs_total\b.*, baton_job\)$/);
    for (const p of panels) {
      expect(p.datasource?.uid, p.title).toBe('${datasource}');
      for (const t of p.targets ?? []) expect(t.datasource?.uid, p.title).toBe('${datasource}');
    }
  });

  it('has the panels the runbook promises', () => {
    const titles = panels.map((p) => p.title);
    for (const title of [
      'Runs by status',
      'Failures by job',
      'Last success per job',
      'Fire lag p99',
      'Lock acquisition',
      'Missed fires',
      'Runners up',
      'Clock offset',
      'Database up / read-only',
    ]) {
      expect(titles).toContain(title);
    }
  });

  it('has queries that all parse (promtool check rules)', () => {
    expect(queries.length).toBeGreaterThan(10);
    for (const q of queries) expect(q.expr, q.where).not.toBe('');
    const { code, output } = checkExpressions(queries.map((q) => q.expr));
    expect(output).toContain(`SUCCESS: ${queries.length} rules found`);
    expect(code, output).toBe(0);
  });

  const variableQueries = dashboard.templating.list.flatMap((v) => {
    const m = /^label_values\((.*),\s*(\w+)\)$/.exec(v.definition ?? '');
    return m ? [{ where: `$${v.name}`, expr: substitute(m[1]!, variables), label: m[2]! }] : [];
  });

  it('names only metrics, labels and values baton exports, in panels and variables', () => {
    expect(variableQueries).toHaveLength(2);
    expect(unknownNames([...queries, ...variableQueries], new Set())).toEqual([]);
    for (const v of variableQueries) expect(LABELS.has(v.label), v.where).toBe(true);
  });

  it("has queries that all return data from series shaped like baton's", () => {
    const all = [...queries, ...variableQueries];
    const { code, output } = returnData(all.map((q) => q.expr));
    const failed = [...output.matchAll(/alertname: q(\d+)/g)].map((m) => all[Number(m[1])]!.where);
    expect(failed, output).toEqual([]);
    expect(code, output).toBe(0);
  });

  it('lays its panels out on the 24-column grid without overlaps, each with its own id', () => {
    const ids = allPanels(dashboard.panels).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Map<string, string>();
    for (const p of allPanels(dashboard.panels)) {
      const { x, y, w, h } = p.gridPos;
      expect(x >= 0 && w > 0 && x + w <= 24 && h > 0, p.title).toBe(true);
      for (let i = x; i < x + w; i++) {
        for (let j = y; j < y + h; j++) {
          const other = cells.get(`${i},${j}`);
          expect(other, `${p.title} overlaps ${other}`).toBeUndefined();
          cells.set(`${i},${j}`, p.title ?? '?');
        }
      }
    }
  });
});

/**
 * Every contract series, two runners (a, b) and two batches (report, settle), scraped every
 * minute for 30 minutes: counters and histogram buckets that grow, gauges that hold.
 */
function syntheticSeries(): { series: string; values: string }[] {
  const out: { series: string; values: string }[] = [];
  const add = (name: string, labels: Record<string, string>, values: string) => {
    const body = Object.entries(labels)
      .map(([k, v]) => `${k}="${v}"`)
      .join(',');
    out.push({ series: `${name}{${body}}`, values });
  };
  const growing = '0+1x30';
  for (const instance of ['a:9464', 'b:9464']) {
    const runner = { job: 'baton', instance };
    add('up', runner, '1x30');
    add('process_start_time_seconds', runner, '0x30');
    add(
      'baton_runner_info',
      { ...runner, host: instance, namespace: 'default', version: '0.1.0' },
      '1x30',
    );
    add('baton_database_up', runner, '1x30');
    add('baton_database_read_only', runner, '0x30');
    add('baton_clock_offset_seconds', runner, '0.1x30');
    add('baton_runs_running', runner, '1x30');
    add('baton_jobs_loaded', runner, '2x30');
    add('baton_scheduler_last_wake_timestamp_seconds', runner, '0+60x30');
    add('baton_lock_session_losses_total', runner, growing);
    for (const outcome of LABEL_VALUES.outcome!) {
      for (const le of ['0.01', '0.1', '+Inf']) {
        add('baton_lock_acquisition_seconds_bucket', { ...runner, outcome, le }, growing);
      }
      add('baton_lock_acquisition_seconds_sum', { ...runner, outcome }, growing);
      add('baton_lock_acquisition_seconds_count', { ...runner, outcome }, growing);
    }
    for (const batonJob of ['report', 'settle']) {
      const job = { ...runner, baton_job: batonJob };
      for (const status of LABEL_VALUES.status!)
        add('baton_runs_total', { ...job, status }, growing);
      for (const reason of ['taken', 'overlap', 'paused']) {
        add('baton_skips_total', { ...job, reason }, growing);
      }
      for (const reason of ['no-database', 'read-only', 'late-wake', 'error']) {
        add('baton_fires_not_attempted_total', { ...job, reason }, growing);
      }
      add('baton_fires_missed_total', job, growing);
      for (const h of ['baton_run_duration_seconds', 'baton_fire_lag_seconds']) {
        for (const le of ['0.1', '1', '+Inf']) add(`${h}_bucket`, { ...job, le }, growing);
        add(`${h}_sum`, job, growing);
        add(`${h}_count`, job, growing);
      }
      add('baton_job_last_success_timestamp_seconds', job, '60x30');
      add('baton_job_last_failure_timestamp_seconds', job, '30x30');
      add('baton_job_last_run_timestamp_seconds', job, '60x30');
      add('baton_job_expect_seconds', job, '300x30');
    }
  }
  return out;
}

/**
 * `promtool test rules` with an alert `q<i>` per expression, `count(expr) > 0`, expected to fire
 * at 20 minutes: the expression returned at least one sample. The output names the ones that
 * did not.
 */
function returnData(exprs: string[]): { code: number | null; output: string } {
  const dir = mkdtempSync(path.join(scratch, 'data-'));
  const rules = exprs.map((expr, i) => ({ alert: `q${i}`, expr: `count(${expr}) > 0` }));
  writeFileSync(path.join(dir, 'q.rules.yml'), JSON.stringify({ groups: [{ name: 'q', rules }] }));
  const test = {
    rule_files: ['q.rules.yml'],
    evaluation_interval: '1m',
    tests: [
      {
        interval: '1m',
        input_series: syntheticSeries(),
        alert_rule_test: exprs.map((_, i) => ({
          eval_time: '20m',
          alertname: `q${i}`,
          exp_alerts: [{ exp_labels: {} }],
        })),
      },
    ],
  };
  writeFileSync(path.join(dir, 'q.test.yml'), JSON.stringify(test));
  return promtool(['test', 'rules', path.join(dir, 'q.test.yml')]);
}

// --- the checks above can fail -------------------------------------------------------------------

describe('the checks themselves', () => {
  it('refuse an expression that does not parse', () => {
    const { code, output } = checkExpressions(['sum(rate(baton_runs_total[5m])']);
    expect(code).not.toBe(0);
    expect(output).toMatch(/parse error/);
  });

  it('refuse a metric, a label or a status baton does not export', () => {
    expect(
      unknownNames(
        [
          {
            where: 'x',
            expr: 'sum by (exported_job) (increase(baton_run_total{status=~"failed|interupted"}[1h]))',
          },
        ],
        new Set(),
      ),
    ).toEqual(['x: baton_run_total', 'x: label exported_job', 'x: status="interupted"']);
  });

  it('refuse a query that parses but selects nothing', () => {
    const { code, output } = returnData([
      'sum(up{job="baton"})',
      'max by (baton_job) (baton_job_expect_seconds{baton_job=~"baton"})',
    ]);
    expect(code).not.toBe(0);
    expect([...output.matchAll(/alertname: (q\d+)/g)].map((m) => m[1])).toEqual(['q1']);
  });

  it('refuse an unknown dashboard variable', () => {
    expect(() => substitute('up{job=~"$scrape_job"}', new Set(['job']))).toThrow(
      /\$scrape_job is neither/,
    );
  });
});
