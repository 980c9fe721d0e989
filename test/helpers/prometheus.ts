/**
 * Reading a runner's `/metrics` the way Prometheus would: the text format parsed into samples,
 * and the exposition checked by `promtool check metrics` (Debian's `prometheus`, from .ci/run);
 * and a real Prometheus server scraping runners, asked through its HTTP API.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './private-server.js';
import { FatalWait, waitFor } from './wait.js';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** The sum of every series of `name` whose labels include `labels`. */
export function total(samples: Sample[], name: string, labels: Record<string, string> = {}) {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** `promtool check metrics`: its exit code and what it printed (problems, lint findings). */
export function promtoolCheck(text: string): { code: number | null; output: string } {
  const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (result.error) throw result.error;
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}

/** One series of an instant query's answer. */
export interface PromSeries {
  metric: Record<string, string>;
  value: number;
}

export interface PrometheusServer {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  /** An instant query (`/api/v1/query`) at now. */
  query(expr: string): Promise<PromSeries[]>;
  /** The label sets of the series matching `match` (`/api/v1/series`). */
  series(match: string): Promise<Record<string, string>[]>;
  /** SIGTERM (SIGKILL after 5 s), then removes its data dir. */
  stop(): Promise<void>;
}

const PROMETHEUS = process.env.BATON_TEST_PROMETHEUS ?? '/usr/bin/prometheus';

/**
 * A real Prometheus (Debian's package) on a free loopback port with a private data dir,
 * scraping `targets` (`127.0.0.1:PORT`) as scrape job `job` every second, with the default
 * `honor_labels: false` — as an operator's would. Resolves once it is ready.
 */
export async function startPrometheus(
  targets: string[],
  { job = 'baton' }: { job?: string } = {},
): Promise<PrometheusServer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-prometheus-'));
  const config = path.join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    [
      'global:',
      '  scrape_interval: 1s',
      '  scrape_timeout: 1s',
      '  evaluation_interval: 1s',
      'scrape_configs:',
      `  - job_name: ${JSON.stringify(job)}`,
      '    static_configs:',
      `      - targets: ${JSON.stringify(targets)}`,
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    PROMETHEUS,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode == null && child.signalCode == null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
    rmSync(dir, { recursive: true, force: true });
  };
  const api = async <T>(route: string): Promise<T> => {
    const res = await fetch(`${url}${route}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`prometheus ${route}: ${body.error}`);
    return body.data;
  };
  try {
    await waitFor('prometheus ready', async () => {
      if (child.exitCode != null) throw new FatalWait(`prometheus exited: ${stderr}`);
      return (await fetch(`${url}/-/ready`).catch(() => null))?.ok;
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    async query(expr) {
      const data = await api<{
        result: { metric: Record<string, string>; value: [number, string] }[];
      }>(`/api/v1/query?query=${encodeURIComponent(expr)}`);
      return data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
    },
    series: (match) =>
      api<Record<string, string>[]>(`/api/v1/series?match[]=${encodeURIComponent(match)}`),
    stop,
  };
}
