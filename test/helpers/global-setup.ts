import { existsSync } from 'node:fs';
import { BATON_BIN } from './cli.js';
import { prepareSchemaTemplate } from './db.js';

/**
 * The end-to-end tests run the built CLI; `npm test` builds first. The schema template that
 * migrated test databases copy is migrated here, once for the run (db.ts).
 */
export default async function setup(): Promise<void> {
  if (!existsSync(BATON_BIN)) {
    throw new Error(`${BATON_BIN} is missing: run "npm run build" (npm test does it for you)`);
  }
  await prepareSchemaTemplate();
}
