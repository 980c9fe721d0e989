import { createRequire } from 'node:module';

/** baton's version, from package.json (two levels up from src/ and dist/ alike). */
export const version: string = (
  createRequire(import.meta.url)('../package.json') as { version: string }
).version;
