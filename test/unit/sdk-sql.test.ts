/**
 * The job helpers' SQL, built for both server flavours without needing both servers: version
 * detection picks the upsert syntax (MySQL 8.0.19+ row alias, MariaDB `VALUES()`) and SKIP LOCKED
 * support; identifiers are always quoted, values always parameters; misuse is refused before a
 * statement is sent. The MariaDB flavour also runs for real in test/e2e/sdk-*.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { buildClaim, buildComplete, buildReclaim } from '../../src/sdk/claim.js';
import { UnsupportedServerFeatureError } from '../../src/sdk/errors.js';
import { buildLedgerInsert } from '../../src/sdk/ledger.js';
import { buildOptimisticUpdate } from '../../src/sdk/row-update.js';
import { assertSkipLocked, parseServerVersion } from '../../src/sdk/server-flavor.js';
import { buildSkipLockedSelect } from '../../src/sdk/skip-locked.js';
import { orderByClause, tableId } from '../../src/sdk/sql.js';
import { buildUpsertRows, buildUpsertSelect, upsertSyntax } from '../../src/sdk/upsert.js';

describe('server detection', () => {
  const cases: [string, string, 'mysql' | 'mariadb', boolean, boolean][] = [
    // version, comment, flavour, SKIP LOCKED, row alias
    ['10.11.19-MariaDB-0+deb12u1', 'Debian 12', 'mariadb', true, false],
    ['10.5.23-MariaDB', 'MariaDB Server', 'mariadb', false, false],
    ['10.6.0-MariaDB', '', 'mariadb', true, false],
    ['5.5.5-10.4.32-MariaDB', '', 'mariadb', false, false],
    ['11.4.2', 'MariaDB Server', 'mariadb', true, false],
    ['8.0.18', 'MySQL Community Server - GPL', 'mysql', true, false],
    ['8.0.19', 'MySQL Community Server - GPL', 'mysql', true, true],
    ['8.0.36-28', 'Percona Server (GPL), Release 28', 'mysql', true, true],
    ['8.4.0', 'MySQL Community Server - GPL', 'mysql', true, true],
    ['5.7.44-log', 'MySQL Community Server (GPL)', 'mysql', false, false],
    ['8.0.11', '', 'mysql', true, false],
    // An unreadable patch level gets the older (still valid) syntax.
    ['8.0.mysql_aurora.3.05.2', 'Source distribution', 'mysql', true, false],
  ];
  it.each(cases)('%s (%s)', (version, comment, flavor, skipLocked, rowAlias) => {
    const info = parseServerVersion(version, comment);
    expect(info).toMatchObject({ flavor, skipLocked, rowAlias });
    expect(upsertSyntax(info)).toBe(rowAlias ? 'row-alias' : 'values-function');
  });

  it('refuses SKIP LOCKED on MariaDB < 10.6 and MySQL < 8.0 with a message that says what to do', () => {
    expect(() => assertSkipLocked(parseServerVersion('10.5.23-MariaDB'))).toThrow(
      UnsupportedServerFeatureError,
    );
    expect(() => assertSkipLocked(parseServerVersion('5.7.44'))).toThrow(
      /needs MariaDB 10\.6\+ or MySQL 8\.0\+; this server is MySQL 5\.7\.44\. Claim rows with claimRows/,
    );
    expect(() => assertSkipLocked(parseServerVersion('10.6.16-MariaDB'))).not.toThrow();
  });

  it('picks a binary, no-pad collation for ledger keys where the server has one', () => {
    expect(parseServerVersion('10.11.6-MariaDB').exactCollation).toBe('utf8mb4_nopad_bin');
    expect(parseServerVersion('8.0.36').exactCollation).toBe('utf8mb4_0900_bin');
    expect(parseServerVersion('5.7.44').exactCollation).toBe('utf8mb4_bin');
  });
});

describe('upsert SQL', () => {
  const spec = { table: 'settle_daily', key: ['settle_date', 'provider_no'] };
  const rows = [
    { settle_date: '2015-02-24', provider_no: 1, amount: 100, hits: 1 },
    { settle_date: '2015-02-24', provider_no: 2, amount: 200, hits: 2 },
  ];

  it('MariaDB: VALUES(c) for set columns and c = c + VALUES(c) for increments', () => {
    const { sql, values } = buildUpsertRows(
      'values-function',
      { ...spec, increment: ['hits'] },
      rows,
    );
    expect(sql).toBe(
      'INSERT INTO `settle_daily` (`settle_date`, `provider_no`, `amount`, `hits`) VALUES ' +
        '(?, ?, ?, ?), (?, ?, ?, ?) ON DUPLICATE KEY UPDATE `amount` = VALUES(`amount`), ' +
        '`hits` = `hits` + VALUES(`hits`)',
    );
    expect(values).toEqual(['2015-02-24', 1, 100, 1, '2015-02-24', 2, 200, 2]);
  });

  it('MySQL 8.0.19+: the row alias, no deprecated VALUES()', () => {
    const { sql } = buildUpsertRows('row-alias', { ...spec, increment: ['hits'] }, rows);
    expect(sql).toBe(
      'INSERT INTO `settle_daily` (`settle_date`, `provider_no`, `amount`, `hits`) VALUES ' +
        '(?, ?, ?, ?), (?, ?, ?, ?) AS `new` ON DUPLICATE KEY UPDATE `amount` = `new`.`amount`, ' +
        '`hits` = `hits` + `new`.`hits`',
    );
    expect(sql).not.toContain('VALUES(');
  });

  it('a table named "new" gets another alias', () => {
    const { sql } = buildUpsertRows('row-alias', { table: 'app.new', key: ['id'] }, [
      { id: 1, v: 2 },
    ]);
    expect(sql).toContain('INSERT INTO `app`.`new`');
    expect(sql).toContain('AS `new_row` ON DUPLICATE KEY UPDATE `v` = `new_row`.`v`');
  });

  it('only key columns: the existing row is kept as it is', () => {
    const { sql } = buildUpsertRows('values-function', { table: 't', key: ['a'] }, [{ a: 1 }]);
    expect(sql).toBe('INSERT INTO `t` (`a`) VALUES (?) ON DUPLICATE KEY UPDATE `a` = `a`');
  });

  it('set semantics by default; explicit set leaves other columns as they were', () => {
    const { sql } = buildUpsertRows('values-function', { ...spec, set: ['amount'] }, rows);
    expect(sql).toMatch(/ON DUPLICATE KEY UPDATE `amount` = VALUES\(`amount`\)$/);
  });

  it('INSERT … SELECT: MariaDB VALUES(), MySQL a derived table named like the alias', () => {
    const select = `SELECT DATE(paid_at) AS settle_date, provider_no, SUM(amount) AS amount
      FROM payment WHERE paid_at >= ? AND paid_at < ? GROUP BY 1, 2;`;
    const o = {
      ...spec,
      columns: ['settle_date', 'provider_no', 'amount'],
      select,
      params: [1, 2],
    };
    const maria = buildUpsertSelect('values-function', o);
    expect(maria.sql).toBe(
      'INSERT INTO `settle_daily` (`settle_date`, `provider_no`, `amount`) ' +
        select.trim().replace(/;$/, '') +
        ' ON DUPLICATE KEY UPDATE `settle_daily`.`amount` = VALUES(`amount`)',
    );
    expect(maria.values).toEqual([1, 2]);
    const mysql = buildUpsertSelect('row-alias', { ...o, set: [], increment: ['amount'] });
    expect(mysql.sql).toBe(
      'INSERT INTO `settle_daily` (`settle_date`, `provider_no`, `amount`) SELECT * FROM (' +
        select.trim().replace(/;$/, '') +
        ') AS `new` ON DUPLICATE KEY UPDATE `settle_daily`.`amount` = `settle_daily`.`amount` + ' +
        '`new`.`amount`',
    );
  });

  it('refuses rows of different shapes, unknown or key columns in set/increment, both at once', () => {
    expect(() => buildUpsertRows('row-alias', spec, [rows[0]!, { settle_date: 'x' }])).toThrow(
      /row 1 has columns/,
    );
    expect(() => buildUpsertRows('row-alias', { ...spec, set: ['nope'] }, rows)).toThrow(
      /nope is not among/,
    );
    expect(() =>
      buildUpsertRows('row-alias', { ...spec, increment: ['provider_no'] }, rows),
    ).toThrow(/part of the key/);
    expect(() =>
      buildUpsertRows('row-alias', { ...spec, set: ['hits'], increment: ['hits'] }, rows),
    ).toThrow(/both set and increment/);
    expect(() => buildUpsertRows('row-alias', { ...spec, key: ['missing'] }, rows)).toThrow(
      /key column missing/,
    );
  });
});

describe('identifiers are quoted, never interpolated', () => {
  it('quotes hostile names and keeps values out of the SQL', () => {
    const { sql, values } = buildUpsertRows(
      'values-function',
      { table: 'we`ird', key: ['k`; DROP'] },
      [{ 'k`; DROP': "x'); DROP TABLE t; --", v: 1 }],
    );
    expect(sql).toBe(
      'INSERT INTO `we``ird` (`k``; DROP`, `v`) VALUES (?, ?) ON DUPLICATE KEY UPDATE `v` = VALUES(`v`)',
    );
    expect(values).toEqual(["x'); DROP TABLE t; --", 1]);
    expect(tableId('db.t')).toBe('`db`.`t`');
    expect(() => tableId('')).toThrow(TypeError);
    expect(() => tableId('db.')).toThrow(TypeError);
    expect(orderByClause(['priority desc', 'a.b'])).toBe('`priority` DESC, `a.b` ASC');
  });
});

describe('claim SQL', () => {
  const queue = { table: 'reward_job', orderBy: 'job_no' };

  it('one UPDATE … ORDER BY … LIMIT with the worker and a per-call token, read back by both', () => {
    const { claim, readBack } = buildClaim({ ...queue, worker: 'w1', limit: 10 }, 'tok');
    expect(claim.sql).toBe(
      'UPDATE `reward_job` SET `status` = ?, `worker_id` = ?, `claim_token` = ?, `claimed_at` = ' +
        'UTC_TIMESTAMP(3) WHERE `status` = ? ORDER BY `job_no` ASC LIMIT ?',
    );
    expect(claim.values).toEqual(['working', 'w1', 'tok', 'ready', 10]);
    expect(readBack.sql).toBe(
      'SELECT * FROM `reward_job` WHERE `worker_id` = ? AND `claim_token` = ? AND `status` = ? ' +
        'ORDER BY `job_no` ASC',
    );
    expect(readBack.values).toEqual(['w1', 'tok', 'working']);
  });

  it('custom columns and statuses, and an extra condition with its own parameters', () => {
    const { claim } = buildClaim(
      {
        ...queue,
        worker: 'w',
        limit: 1,
        where: 'kind = ?',
        params: ['coupon'],
        statusColumn: 'state',
        claimedAtColumn: 'start_date',
        ready: 'R',
        claimed: 'W',
      },
      't',
    );
    expect(claim.sql).toContain('`start_date` = UTC_TIMESTAMP(3) WHERE `state` = ? AND (kind = ?)');
    expect(claim.values).toEqual(['W', 'w', 't', 'R', 'coupon', 1]);
  });

  it('reclaims by the database clock, in microseconds; refuses a limit or bound < 1', () => {
    const r = buildReclaim(queue, { olderThanMs: 600_000 });
    expect(r.sql).toBe(
      'UPDATE `reward_job` SET `status` = ?, `worker_id` = NULL, `claim_token` = NULL, ' +
        '`claimed_at` = NULL WHERE `status` = ? AND `claimed_at` < UTC_TIMESTAMP(3) - INTERVAL ? ' +
        'MICROSECOND',
    );
    expect(r.values).toEqual(['ready', 'working', 600_000_000]);
    expect(() => buildReclaim(queue, { olderThanMs: 0 })).toThrow(RangeError);
    expect(() => buildClaim({ ...queue, worker: 'w', limit: 0 }, 't')).toThrow(RangeError);
    expect(() => buildClaim({ ...queue, worker: '', limit: 1 }, 't')).toThrow(TypeError);
  });

  it('completes only rows still held by this claim', () => {
    const c = buildComplete(queue, 'tok', { ids: [1, 2], set: { paid: 1 } });
    expect(c.sql).toBe(
      'UPDATE `reward_job` SET `status` = ?, `paid` = ? WHERE `claim_token` = ? AND `status` = ? ' +
        'AND `id` IN (?)',
    );
    expect(c.values).toEqual(['done', 1, 'tok', 'working', [1, 2]]);
  });
});

describe('skip-locked SQL', () => {
  it('appends LIMIT 1 FOR UPDATE SKIP LOCKED; refuses a LIMIT or a locking clause of its own', () => {
    expect(
      buildSkipLockedSelect('SELECT * FROM place WHERE processed_at IS NULL ORDER BY id;'),
    ).toBe(
      'SELECT * FROM place WHERE processed_at IS NULL ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED',
    );
    expect(() => buildSkipLockedSelect('SELECT * FROM place LIMIT 10')).toThrow(/leave LIMIT out/);
    expect(() => buildSkipLockedSelect('SELECT * FROM place LIMIT ?')).toThrow(/leave LIMIT out/);
    expect(() => buildSkipLockedSelect('SELECT * FROM place FOR UPDATE')).toThrow(/locking clause/);
    expect(() => buildSkipLockedSelect('UPDATE place SET x = 1')).toThrow(/SELECT/);
  });
});

describe('optimistic update SQL', () => {
  it('sets the changes, bumps the version, and matches the version read', () => {
    const u = buildOptimisticUpdate({ table: 'food', key: { pet_id: 7 } }, { count: 99 }, 12);
    expect(u.sql).toBe(
      'UPDATE `food` SET `count` = ?, `version` = `version` + 1 WHERE `pet_id` = ? AND `version` = ?',
    );
    expect(u.values).toEqual([99, 7, 12]);
    expect(() =>
      buildOptimisticUpdate({ table: 'food', key: { pet_id: 7 } }, { version: 1 }, 12),
    ).toThrow(/version column/);
    expect(() => buildOptimisticUpdate({ table: 'food', key: { pet_id: null } }, {}, 1)).toThrow(
      /key value must be set/,
    );
    expect(() => buildOptimisticUpdate({ table: 'food', key: {} }, {}, 1)).toThrow(/key needs/);
  });
});

describe('ledger SQL', () => {
  it('a plain INSERT (never IGNORE) of the key, extra values, and the database time', () => {
    const i = buildLedgerInsert({ ledger: 'reward_given', key: 42, values: { uid: 'u1' } });
    expect(i.sql).toBe(
      'INSERT INTO `reward_given` (`ledger_key`, `uid`, `done_at`) VALUES (?, ?, UTC_TIMESTAMP(3))',
    );
    expect(i.values).toEqual(['42', 'u1']);
    const bare = buildLedgerInsert({
      ledger: 'l',
      key: 'k',
      keyColumn: 'job_no',
      doneAtColumn: null,
    });
    expect(bare.sql).toBe('INSERT INTO `l` (`job_no`) VALUES (?)');
    expect(() => buildLedgerInsert({ ledger: 'l', key: '' })).toThrow(TypeError);
    expect(() => buildLedgerInsert({ ledger: 'l', key: '가'.repeat(192) })).toThrow(RangeError);
    expect(() => buildLedgerInsert({ ledger: 'l', key: '가'.repeat(191) })).not.toThrow();
  });
});
