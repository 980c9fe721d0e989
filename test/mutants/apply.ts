/** Applying a mutant's edits, and the catalogue as a table: pure, shared by run.ts and its test. */
import { GUARANTEES, type Edit, type Mutant } from './mutant.js';

/**
 * The mutated text of every file the edits touch. Each `find` must occur exactly once in its file
 * (after the edits before it): a mutant that no longer applies is an error, never a no-op.
 */
export function applyEdits(
  edits: readonly Edit[],
  read: (file: string) => string,
): { file: string; text: string }[] {
  const texts = new Map<string, string>();
  for (const edit of edits) {
    const text = texts.get(edit.file) ?? read(edit.file);
    const count = text.split(edit.find).length - 1;
    if (count !== 1) {
      throw new Error(
        `${edit.file}: the text to mutate occurs ${count} times, not once — update the ` +
          `catalogue to the code: ${JSON.stringify(edit.find.slice(0, 120))}`,
      );
    }
    texts.set(
      edit.file,
      text.replace(edit.find, () => edit.replace),
    );
  }
  return [...texts].map(([file, text]) => ({ file, text }));
}

/** The catalogue as the Markdown table in test/README.md, by guarantee. */
export function catalogueTable(mutants: readonly Mutant[]): string {
  const order = Object.keys(GUARANTEES);
  const sorted = [...mutants].sort(
    (a, b) => order.indexOf(a.guarantee) - order.indexOf(b.guarantee),
  );
  const rows = sorted.map((m) => {
    const killer = m.killers[0]!;
    const file = killer.file.replace(/^test\//, '');
    return `| \`${m.id}\` | ${GUARANTEES[m.guarantee]} | ${m.what} | \`${file}\` › ${killer.test} |`;
  });
  return [
    '| mutant | guarantee it breaks | the regression | killed by |',
    '|---|---|---|---|',
    ...rows,
  ].join('\n');
}
