/**
 * What a runner must undo when it stops, registered as it starts up and run in reverse order
 * (last opened, first closed: the lock session closes before the pool it came with). Every
 * releaser runs, even after one fails; the first error is kept and thrown at the end.
 * (graphile-worker's `withReleasers` is the model.)
 */
export class Releasers {
  private readonly releasers: { name: string; release: () => Promise<void> | void }[] = [];

  add(name: string, release: () => Promise<void> | void): void {
    this.releasers.push({ name, release });
  }

  async releaseAll(): Promise<void> {
    let first: unknown = null;
    for (const { name, release } of this.releasers.splice(0).reverse()) {
      try {
        await release();
      } catch (err) {
        first ??= new Error(`${name}: ${err instanceof Error ? err.message : String(err)}`, {
          cause: err,
        });
      }
    }
    if (first) throw first;
  }
}
