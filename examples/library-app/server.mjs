/**
 * An HTTP service that schedules its own jobs with baton's library mode, meant to run as N
 * replicas (docs/library-mode.md). Each replica defines the same jobs in code; every fire runs on
 * one replica only, and `baton status/history/run/kill` see the replicas as a fleet.
 *
 *   DATABASE_URL=mysql://root@127.0.0.1:3306/shop BATON_HOST=web-1 PORT=8081 node server.mjs
 *
 * Jobs:
 *   tick     every TICK_SCHEDULE (default every 2 s): records its fire in `app_ticks`
 *   report   not scheduled (enabled: false), for `baton run report [--env PERIOD=…]`: records a
 *            row in `app_reports`, with its PERIOD parameter
 *   slow     not scheduled: works SLOW_MS (default 60 s) unless its ctx.signal aborts, and records
 *            the abort (with its reason) in `app_aborts`
 *
 * GET /metrics serves the scheduler's registry (prom-client) on the app's own server, and
 * GET /healthz says ok. On SIGTERM the server closes and the scheduler drains; nothing calls
 * process.exit: the process ends when nothing is left to do.
 */
import http from 'node:http';
// In an application: import { createScheduler } from 'baton-cron';
import { createScheduler } from '../../dist/index.js';

const env = process.env;
const scheduler = createScheduler({
  databaseUrl: env.DATABASE_URL,
  host: env.BATON_HOST,
  namespace: env.BATON_NAMESPACE ?? 'shop',
  ...(env.HEARTBEAT ? { heartbeat: env.HEARTBEAT } : {}),
  ...(env.HEARTBEAT_DEADLINE ? { heartbeatDeadline: env.HEARTBEAT_DEADLINE } : {}),
  ...(env.REAPER_INTERVAL ? { reaperInterval: env.REAPER_INTERVAL } : {}),
  ...(env.REGISTRY_INTERVAL ? { registryInterval: env.REGISTRY_INTERVAL } : {}),
});

async function ensureTables(db) {
  await db.query(`CREATE TABLE IF NOT EXISTS app_ticks (
    fire DATETIME(3) NOT NULL, host VARCHAR(64) NOT NULL, run_id BIGINT NOT NULL)`);
  await db.query(`CREATE TABLE IF NOT EXISTS app_reports (
    run_id BIGINT NOT NULL, host VARCHAR(64) NOT NULL, at DATETIME(3) NOT NULL,
    period VARCHAR(32) NULL)`);
  await db.query(`CREATE TABLE IF NOT EXISTS app_aborts (
    run_id BIGINT NOT NULL, host VARCHAR(64) NOT NULL, reason TEXT, at DATETIME(3) NOT NULL)`);
}

scheduler.job('tick', { schedule: env.TICK_SCHEDULE ?? '*/2 * * * * *' }, async (ctx) => {
  await ensureTables(ctx.db);
  // A plain INSERT (no unique key): a fire that ran twice would show as two rows.
  await ctx.db.query('INSERT INTO app_ticks (fire, host, run_id) VALUES (?, ?, ?)', [
    ctx.scheduledAt,
    ctx.host,
    ctx.runId,
  ]);
  ctx.log.info({ fire: ctx.scheduledAt }, 'ticked');
});

scheduler.job('report', { schedule: '0 0 1 1 *', enabled: false }, async (ctx) => {
  await ensureTables(ctx.db);
  // `baton run report --env PERIOD=2026-11` reaches the handler as ctx.params.
  await ctx.db.query(
    'INSERT INTO app_reports (run_id, host, at, period) VALUES (?, ?, NOW(3), ?)',
    [ctx.runId, ctx.host, ctx.params.PERIOD ?? null],
  );
});

scheduler.job('slow', { schedule: '0 0 1 1 *', enabled: false }, async (ctx) => {
  await ensureTables(ctx.db);
  ctx.log.info('slow: started');
  await new Promise((resolve, reject) => {
    // Aborted already (say the lock session was lost while the tables were made): the signal's
    // 'abort' event has been and will not come again.
    if (ctx.signal.aborted) return reject(ctx.signal.reason);
    const timer = setTimeout(resolve, Number(env.SLOW_MS ?? 60_000));
    ctx.signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(ctx.signal.reason);
      },
      { once: true },
    );
  }).catch(async (reason) => {
    // A fresh connection: the pool's may be what was killed.
    await ctx.db.query(
      'INSERT INTO app_aborts (run_id, host, reason, at) VALUES (?, ?, ?, NOW(3))',
      [ctx.runId, ctx.host, String(reason?.message ?? reason)],
    );
    throw reason;
  });
});

const server = http.createServer(async (req, res) => {
  if (req.url === '/metrics') {
    res.setHeader('content-type', scheduler.metrics.contentType);
    res.end(await scheduler.metrics.metrics());
    return;
  }
  if (req.url === '/healthz') {
    res.end('ok\n');
    return;
  }
  res.statusCode = 404;
  res.end('not found\n');
});

server.listen(Number(env.PORT ?? 0), '127.0.0.1', () => {
  process.stderr.write(`listening on ${server.address().port}\n`);
});
await scheduler.start();

process.once('SIGTERM', async () => {
  server.close();
  await scheduler.stop({ grace: '10s' });
});
