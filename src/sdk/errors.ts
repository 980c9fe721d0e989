/**
 * The errors the job helpers throw when the database said no in a way a batch author must handle
 * (or must fix in the schema). Each has a stable `code`; thrown from job code they fail the run
 * like any other error (exit 1). Bad options (an empty column list, a LIMIT of 0) are a
 * `TypeError`/`RangeError` instead: those are bugs in the job, not states of the data.
 */
import { BatonError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';

/** Base class of every helper error, so a job can `catch (e) { if (e instanceof SdkError) … }`. */
export class SdkError extends BatonError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, ExitCode.Failure, options);
  }
}

/** `updateOptimistic` lost the race more times than it may retry. */
export class OptimisticConflictError extends SdkError {
  readonly table: string;
  readonly key: Readonly<Record<string, unknown>>;
  readonly attempts: number;

  constructor(table: string, key: Readonly<Record<string, unknown>>, attempts: number) {
    super(
      'OPTIMISTIC_CONFLICT',
      `optimistic update of ${table} ${describeKey(key)} gave up after ${attempts} attempts: ` +
        'another writer changed the row (its version moved) every time. Raise maxRetries, or ' +
        'use updateLocked for a row this hot.',
    );
    this.table = table;
    this.key = key;
    this.attempts = attempts;
  }
}

/** The row to update does not exist. */
export class RowNotFoundError extends SdkError {
  readonly table: string;
  readonly key: Readonly<Record<string, unknown>>;

  constructor(table: string, key: Readonly<Record<string, unknown>>) {
    super('ROW_NOT_FOUND', `no row in ${table} with ${describeKey(key)}`);
    this.table = table;
    this.key = key;
  }
}

/**
 * An upsert on a table without a UNIQUE (or PRIMARY) key on exactly its key columns: ON DUPLICATE
 * KEY UPDATE would never see a duplicate and every run would add rows (seed 001's doubled
 * settlement).
 */
export class MissingUniqueKeyError extends SdkError {
  readonly table: string;
  readonly columns: readonly string[];

  constructor(table: string, columns: readonly string[]) {
    super(
      'MISSING_UNIQUE_KEY',
      `${table} has no UNIQUE or PRIMARY KEY on exactly (${columns.join(', ')}): an upsert ` +
        'would insert a second row instead of updating the first. Remove existing duplicates ' +
        'first (findDuplicates), then add the key (addUniqueKey) — in that order, or ALTER TABLE ' +
        'fails with ER_DUP_ENTRY.',
    );
    this.table = table;
    this.columns = columns;
  }
}

/** `addUniqueKey` found rows that already break the key; nothing was changed. */
export class DuplicateRowsError extends SdkError {
  readonly table: string;
  readonly columns: readonly string[];
  /** Up to `limit` duplicated key values with their counts, the most repeated first. */
  readonly duplicates: readonly Duplicate[];

  constructor(table: string, columns: readonly string[], duplicates: readonly Duplicate[]) {
    const sample = duplicates
      .slice(0, 3)
      .map((d) => `${describeKey(d.values)} ×${d.count}`)
      .join('; ');
    super(
      'DUPLICATE_ROWS',
      `cannot add a unique key on ${table} (${columns.join(', ')}): ${duplicates.length}` +
        `${duplicates.length >= 20 ? '+' : ''} key values already occur more than once ` +
        `(${sample}). Copy the table, keep one row per key, then add the key.`,
    );
    this.table = table;
    this.columns = columns;
    this.duplicates = duplicates;
  }
}

/** The server lacks a feature a helper needs (SKIP LOCKED before MariaDB 10.6 / MySQL 8.0). */
export class UnsupportedServerFeatureError extends SdkError {
  constructor(message: string) {
    super('UNSUPPORTED_SERVER_FEATURE', message);
  }
}

export interface Duplicate {
  values: Record<string, unknown>;
  count: number;
}

function describeKey(key: Readonly<Record<string, unknown>>): string {
  return Object.entries(key)
    .map(([k, v]) => `${k}=${showValue(v)}`)
    .join(', ');
}

function showValue(v: unknown): string {
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'string') return JSON.stringify(v);
  return String(v);
}
