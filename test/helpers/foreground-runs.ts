/**
 * What the tests of operators' runs (`baton run`, `--fire`, parameters) share: running the CLI
 * against the file's schedule and database, reading the lines a job appended to a file of the
 * schedule's folder, and a job's rows with their generation and parameters.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { baton } from './cli.js';
import type { TestDatabase } from './db.js';

export interface GenerationRow {
  id: number;
  rerun: number;
  winner: number | null;
  triggered_by: string;
  status: string;
  params: string | null;
  host: string;
}

/** `where()` gives the file's schedule, its folder and database once `beforeAll` has made them. */
export function foregroundRuns(where: () => { config: string; dir: string; db: TestDatabase }) {
  return {
    run: (job: string, extra: string[] = [], host = 'ops-laptop') => {
      const { config, db } = where();
      return baton([
        'run',
        job,
        '--config',
        config,
        '--database-url',
        db.url,
        '--host',
        host,
        ...extra,
      ]);
    },
    lines: (file: string) => {
      const at = path.join(where().dir, file);
      return existsSync(at) ? readFileSync(at, 'utf8').trim().split('\n').filter(Boolean) : [];
    },
    rowsOf: (job: string) =>
      where().db.query<GenerationRow>(
        `SELECT id, rerun, winner, triggered_by, status, params, host FROM baton_runs
          WHERE job = ? ORDER BY id`,
        [job],
      ),
  };
}
