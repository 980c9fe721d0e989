/**
 * The order the test files start in: longest first. With a few workers and files that mostly
 * wait on the clock, a long file started last is the suite's tail (a clean clone — CI — has no
 * vitest cache of the last run's durations, and vitest then starts the *largest* files first,
 * which are not the longest). Durations come from the cache where there is one, else from
 * file-durations.json (a CI run's, refreshed with `npm run test:durations`); a file in neither
 * starts first, as vitest does with an unknown file.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const recorded: Record<string, number> = JSON.parse(
  readFileSync(new URL('./file-durations.json', import.meta.url), 'utf8'),
);

export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds = (spec: TestSpecification): number => {
      const path = relative(this.ctx.config.root, spec.moduleId).split('\\').join('/');
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path}`);
      return cached ? cached.duration / 1000 : (recorded[path] ?? Number.POSITIVE_INFINITY);
    };
    return [...files].sort((a, b) => seconds(b) - seconds(a));
  }
}
