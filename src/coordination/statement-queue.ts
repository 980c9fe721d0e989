/**
 * The lock session's statement queue: every statement on the session waits here for its turn.
 *
 * The driver sends a connection's statements one after another, so a statement handed to it
 * waits behind every one handed over before. The queue hands over at most MAX_IN_FLIGHT at a
 * time and keeps the rest itself, where a statement that must not wait — the heartbeat, whose
 * deadline decides whether the session counts as alive — can still go before all of them. However
 * many statements are waiting, the heartbeat waits for at most the MAX_IN_FLIGHT already with
 * the driver.
 *
 * Once the connection is gone (`close`), every statement not answered yet fails at once, and so
 * does every later one: those waiting would never get a turn, and the driver does not answer
 * those in flight on a destroyed connection (they would wait out their deadline).
 */

/**
 * Statements handed to the driver at once: one being answered and one ready to go, so the
 * connection never waits for this process between two statements.
 */
export const MAX_IN_FLIGHT = 2;

export class StatementQueue {
  /** Statements waiting for their turn; `first` ones go to the front. */
  private readonly waiting: (() => void)[] = [];
  private inFlight = 0;
  /** Rejections of the statements not answered yet (waiting for a turn, or with the driver). */
  private readonly unsettled = new Set<(err: Error) => void>();
  private closed = false;

  /** `gone` makes the error that statements fail with once the queue is closed. */
  constructor(
    private readonly gone: () => Error,
    private readonly maxInFlight = MAX_IN_FLIGHT,
  ) {}

  /**
   * Runs `statement` when it is its turn: at once while fewer than MAX_IN_FLIGHT are with the
   * driver, else after those; `first` goes before every waiting one.
   */
  run<T>(statement: () => Promise<T>, place: 'first' | 'last' = 'last'): Promise<T> {
    // A closed queue fails at once: nothing new should wait on a socket that will never answer.
    if (this.closed) return Promise.reject(this.gone());
    return new Promise<T>((resolve, reject) => {
      this.unsettled.add(reject);
      const settle = (done: () => void) => {
        this.unsettled.delete(reject);
        done();
      };
      const start = () => {
        this.inFlight++;
        statement()
          .then(
            (value) => settle(() => resolve(value)),
            (err: unknown) => settle(() => reject(err)),
          )
          .finally(() => {
            this.inFlight--;
            this.waiting.shift()?.();
          });
      };
      if (this.inFlight < this.maxInFlight) start();
      else if (place === 'first') this.waiting.unshift(start);
      else this.waiting.push(start);
    });
  }

  /** Fails every statement not answered yet, and every later one, with `gone()`. */
  close(): void {
    this.closed = true;
    this.waiting.length = 0;
    const error = this.gone();
    for (const reject of [...this.unsettled]) reject(error);
    this.unsettled.clear();
  }
}
