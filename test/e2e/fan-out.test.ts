/**
 * Fan-out (`workers: N`): up to N runners win the same fire, each with its own worker slot in the
 * fire key (`baton_runs.winner` = the slot), and the rest skip. Proven with three real runners
 * and a two-slot job: every fire has exactly two winners, slots 1 and 2, on different hosts, and
 * the third runner's skip says that all slots were taken. The job sees its slot (ctx.fire.worker
 * for a module, BATON_WORKER for a command) and works on its database through ctx.db.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { baton, writeSchedule } from '../helpers/cli.js';
import { byFire, createTestDatabase, runs } from '../helpers/db.js';
import { expectOneWinnerPerFire } from '../helpers/fires.js';
import { expectQuiet, useFleet } from '../helpers/fleet.js';
import { waitFor } from '../helpers/wait.js';

const fleet = useFleet('fan_out');
const HOSTS = ['w-1', 'w-2', 'w-3'];

describe('a job with workers: 2 on three runners', () => {
  it('gives every fire two winners with slots 1 and 2, and the third runner a skip', async () => {
    const config = writeSchedule(
      `
namespace: fan
jobs:
  share:
    schedule: "*/2 * * * * *"
    workers: 2
    module: share.mjs
`,
      {
        'share.mjs': `import { appendFileSync } from 'node:fs';
export default async (ctx) => {
  // ctx.db is baton's own database here (no connection: given): prove it works.
  const [[row]] = await ctx.db.query('SELECT COUNT(*) AS n FROM baton_runs WHERE id = ?', [ctx.runId]);
  appendFileSync('slots.log', JSON.stringify({ at: ctx.scheduledAt.toISOString(), host: ctx.host, slot: ctx.fire.worker.slot, of: ctx.fire.worker.count, seen: row.n }) + '\\n');
  await new Promise((r) => setTimeout(r, 300));
};
`,
      },
    );
    const db = fleet.db;
    const runners = await fleet.start(HOSTS, { config });

    await waitFor(
      'four complete fires',
      async () => {
        const fires = [...byFire(await runs(db, 'share')).values()].filter(
          (rows) => rows.length === 3 && rows.every((r) => r.status !== 'running'),
        );
        return fires.length >= 4;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await Promise.all(runners.map((r) => r.stop('SIGTERM')));
    expectQuiet(runners);

    const rows = await runs(db, 'share');
    // At most one winner per worker slot of a fire, one row per runner, no fire without a winner.
    expectOneWinnerPerFire(rows, 'share', { slots: 2 });
    const fires = [...byFire(rows).values()].filter((f) => f.length === 3);
    expect(fires.length).toBeGreaterThanOrEqual(4);
    for (const fire of fires) {
      const winners = fire.filter((r) => r.winner != null && r.winner >= 1);
      expect(winners.map((r) => r.winner).sort()).toEqual([1, 2]);
      expect(new Set(winners.map((r) => r.host)).size).toBe(2);
      for (const w of winners) expect(w.status).toBe('done');
      const [skip] = fire.filter((r) => r.winner == null);
      expect(skip!.status).toBe('skipped');
      expect(skip!.reason).toMatch(/^all 2 worker slots are taken: 1: .*; 2: .*/);
    }

    // Each winner ran with its own slot and saw its own row through ctx.db.
    const lines = readFileSync(path.join(path.dirname(config), 'slots.log'), 'utf8')
      .trim()
      .split('\n')
      .map(
        (l) =>
          JSON.parse(l) as { at: string; host: string; slot: number; of: number; seen: number },
      );
    for (const fire of fires) {
      const at = fire[0]!.scheduled_at.toISOString();
      const ran = lines.filter((l) => l.at === at);
      expect(ran.map((l) => l.slot).sort()).toEqual([1, 2]);
      for (const l of ran) expect(l).toMatchObject({ of: 2, seen: 1 });
    }
  });
});

describe('ctx.db on a named connection', () => {
  it('works on the database the connection names, and its URL never reaches the environment', async () => {
    const shop = await createTestDatabase('fan_shop');
    try {
      await shop.query('CREATE TABLE orders (id INT PRIMARY KEY, total INT NOT NULL)');
      await shop.query('INSERT INTO orders VALUES (1, 40), (2, 2)');
      const config = writeSchedule(
        `
connections:
  shop: { urlFromEnv: SHOP_DATABASE_URL }
jobs:
  totals:
    schedule: "0 3 * * *"
    module: totals.mjs
    connection: shop
`,
        {
          'totals.mjs': `import { writeFileSync } from 'node:fs';
export default async (ctx) => {
  const [[row]] = await ctx.db.query('SELECT SUM(total) AS sum, DATABASE() AS db FROM orders');
  writeFileSync('totals.json', JSON.stringify({ sum: Number(row.sum), db: row.db, env: process.env }));
};
`,
        },
      );
      const result = await baton(
        ['run', 'totals', '--config', config, '--database-url', fleet.db.url],
        { env: { SHOP_DATABASE_URL: shop.url } },
      );
      expect(result.stderr).toContain('totals done');
      expect(result.code).toBe(0);
      const out = JSON.parse(
        readFileSync(path.join(path.dirname(config), 'totals.json'), 'utf8'),
      ) as { sum: number; db: string; env: Record<string, string> };
      expect(out).toMatchObject({ sum: 42, db: shop.name });
      // The connection's URL (and password) travels over IPC: the variable that holds it is
      // withheld from the job, like the runner's own settings (BATON_*).
      expect(out.env.SHOP_DATABASE_URL).toBeUndefined();
      expect(JSON.stringify(out.env)).not.toContain(shop.url);
      expect(
        Object.keys(out.env).filter(
          (k) =>
            k.startsWith('BATON_') &&
            !/^BATON_(JOB|RUN_ID|SCHEDULED_AT|TRIGGER|HOST|ATTEMPT|WORKERS?|MODULE|FENCE(_DATABASE)?)$/.test(
              k,
            ),
        ),
      ).toEqual([]);
    } finally {
      await shop.drop();
    }
  });
});

describe('ctx.db in a job that goes wrong', () => {
  it('neither keeps a job that never settles alive nor shows up when ctx is logged', async () => {
    const config = writeSchedule(
      `
jobs:
  stuck:
    schedule: "0 3 * * *"
    module: stuck.mjs
`,
      {
        'stuck.mjs': `export default async (ctx) => {
  await ctx.db.query('SELECT 1');
  // What a job author might log: ctx must not drag the pool (and its password) along.
  console.log(JSON.stringify({ keys: Object.keys(ctx) }));
  await new Promise(() => {}); // never settles, and nothing else is pending
};
`,
      },
    );
    const result = await baton([
      'run',
      'stuck',
      '--config',
      config,
      '--database-url',
      fleet.db.url,
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('the job never settled');
    expect(result.stdout).not.toContain('"db"');
    expect(result.stdout).toContain('"keys":');
  });
});
