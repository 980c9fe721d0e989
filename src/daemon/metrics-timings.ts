/**
 * The pace of `/metrics`' reads at scrape time (http/job-gauges.ts ScrapeCache): here, below the
 * endpoint, and without prom-client, so that the runner's timings (timings.ts) can name it — an
 * import may not point up the layers — while a runner without `--http` still loads none of the
 * endpoint's modules.
 */

/** Scrapes within this long of a read share it. */
export const OUTCOMES_REUSE_MS = 5_000;
/** A scrape waits this long for a read in progress, then serves the last values. */
export const SCRAPE_WAIT_MS = 2_000;

/** The scrape-time reads' pace; the runner sets it (daemon/timings.ts). */
export interface MetricsTimings {
  /** OUTCOMES_REUSE_MS: scrapes within this long of a read's end share it. */
  readReuseMs: number;
  /** SCRAPE_WAIT_MS: a scrape's wait for a read in progress. */
  scrapeWaitMs: number;
}

export const METRICS_TIMINGS: Readonly<MetricsTimings> = {
  readReuseMs: OUTCOMES_REUSE_MS,
  scrapeWaitMs: SCRAPE_WAIT_MS,
};
