/**
 * Helpers for batch code (`import { claimRows, once, … } from 'baton-cron'`): the patterns of the
 * seed stories as small functions over a mysql2/promise pool or connection. docs/job-sdk.md says
 * when to use which, and what each one cannot do for you.
 */
export { claimRows, completeClaim, reclaimStale, releaseClaim } from './claim.js';
export type { Claim, ClaimOptions, ClaimTable, CompleteOptions, ReclaimOptions } from './claim.js';
export { isTransactionConflict, transaction } from './connection.js';
export type { Db, TransactionOptions } from './connection.js';
export {
  DuplicateRowsError,
  MissingUniqueKeyError,
  OptimisticConflictError,
  RowNotFoundError,
  SdkError,
  UnsupportedServerFeatureError,
} from './errors.js';
export type { Duplicate } from './errors.js';
export {
  checkFence,
  fenced,
  fencedPool,
  runFenceFromEnvironment,
  StaleFenceError,
} from './fence.js';
export type { FencedPool, RunFence, StaleReason } from './fence.js';
export { ensureLedger, isDone, LEDGER_KEY_MAX, markDone, once } from './ledger.js';
export type { LedgerOptions, OnceResult } from './ledger.js';
export { updateLocked, updateOptimistic } from './row-update.js';
export type {
  Changes,
  LockedOptions,
  OptimisticOptions,
  OptimisticTarget,
  RowTarget,
  UpdateResult,
} from './row-update.js';
export { parseServerVersion, serverInfo } from './server-flavor.js';
export type { ServerInfo } from './server-flavor.js';
export { forEachSkipLocked } from './skip-locked.js';
export type { SkipLockedOptions } from './skip-locked.js';
export { addUniqueKey, findDuplicates } from './unique-key.js';
export type { AddUniqueKeyOptions, DuplicatesOptions } from './unique-key.js';
export { upsertRows, upsertSelect } from './upsert.js';
export type { UpsertResult, UpsertRowsOptions, UpsertSelectOptions, UpsertSpec } from './upsert.js';
