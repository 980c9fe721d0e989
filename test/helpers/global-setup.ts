import { existsSync } from 'node:fs';
import { BATON_BIN } from './cli.js';

/** The end-to-end tests run the built CLI; `npm test` builds first. */
export default function setup(): void {
  if (!existsSync(BATON_BIN)) {
    throw new Error(`${BATON_BIN} is missing: run "npm run build" (npm test does it for you)`);
  }
}
