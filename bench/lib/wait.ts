/**
 * Polling and sleeping: the test suite's own helpers (a runner that exits while awaited throws
 * FatalWait, which ends the wait at once).
 */
export { FatalWait, sleep, waitFor } from '../../test/helpers/wait.js';
