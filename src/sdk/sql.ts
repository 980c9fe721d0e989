/**
 * The few SQL-building pieces every helper shares. Identifiers (tables, columns) come from the
 * job's code as options and are always quoted with mysql2's `escapeId`; values always travel as
 * `?` parameters. Nothing here is ever concatenated from data.
 */
import { escapeId } from 'mysql2/promise';

/** A table name, optionally `schema.table`; quoted as `` `schema`.`table` ``. */
export function tableId(name: string): string {
  if (typeof name !== 'string' || name === '' || name.split('.').some((part) => part === '')) {
    throw new TypeError(`invalid table name ${JSON.stringify(name)}`);
  }
  return escapeId(name);
}

/** A column name; a dot is part of the name (`` `a.b` ``), never a qualifier. */
export function columnId(name: string): string {
  if (typeof name !== 'string' || name === '') {
    throw new TypeError(`invalid column name ${JSON.stringify(name)}`);
  }
  return escapeId(name, true);
}

/** `ORDER BY` items: `'job_no'`, `'priority DESC'`; direction ASC unless DESC is given. */
export function orderByClause(orderBy: string | readonly string[]): string {
  const items = typeof orderBy === 'string' ? [orderBy] : orderBy;
  if (items.length === 0) throw new TypeError('orderBy needs at least one column');
  return items
    .map((item) => {
      const m = /^\s*(.+?)(?:\s+(asc|desc))?\s*$/i.exec(item);
      if (!m?.[1]) throw new TypeError(`invalid orderBy item ${JSON.stringify(item)}`);
      return `${columnId(m[1])} ${m[2]?.toUpperCase() === 'DESC' ? 'DESC' : 'ASC'}`;
    })
    .join(', ');
}

/** `a = ? AND b = ?` for a key object; a key needs at least one column and no NULL values. */
export function keyCondition(key: Readonly<Record<string, unknown>>): {
  sql: string;
  values: unknown[];
} {
  const entries = Object.entries(key);
  if (entries.length === 0) throw new TypeError('key needs at least one column');
  for (const [column, value] of entries) {
    if (value == null) {
      throw new TypeError(`key column ${column} is ${String(value)}: a key value must be set`);
    }
  }
  return {
    sql: entries.map(([column]) => `${columnId(column)} = ?`).join(' AND '),
    values: entries.map(([, value]) => value),
  };
}

/** `a = ?, b = ?` for a changes object. */
export function setClause(changes: Readonly<Record<string, unknown>>): {
  sql: string;
  values: unknown[];
} {
  const entries = Object.entries(changes).filter(([, value]) => value !== undefined);
  return {
    sql: entries.map(([column]) => `${columnId(column)} = ?`).join(', '),
    values: entries.map(([, value]) => value),
  };
}

/** A positive whole number, or a RangeError naming the option. */
export function positiveInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a whole number ≥ 1, got ${String(value)}`);
  }
  return value;
}

export function nonNegativeInt(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a whole number ≥ 0, got ${String(value)}`);
  }
  return value;
}
