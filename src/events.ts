/**
 * A typed event map with an emit that never throws. baton's fires and its daemon report what
 * happens through one of these (`fire/fire-events.ts`, `daemon/runner-events.ts`); logging and
 * metrics subscribe. Events are for telling, never for control: a listener that fails must not fail
 * the fire that reported, so its error goes to `onListenerError` and the other listeners still run.
 *
 * Not node:events: its `emit` throws whatever a listener throws, and its names are untyped.
 */
/** An event map: event name → payload. */
export type EventMap<M> = { [K in keyof M]: object };

export type Listener<P> = (payload: P) => void;

/** The side that reports: a module that only tells what happens takes just this. */
export interface Emitter<M extends EventMap<M>> {
  emit<K extends keyof M>(event: K, payload: M[K]): void;
}

export class Events<M extends EventMap<M>> implements Emitter<M> {
  private readonly listeners = new Map<PropertyKey, Set<Listener<never>>>();

  constructor(private readonly onListenerError: (event: string, err: unknown) => void = () => {}) {}

  /** Subscribes; returns the unsubscribe. */
  on<K extends keyof M>(event: K, listener: Listener<M[K]>): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener as Listener<never>);
    return () => set.delete(listener as Listener<never>);
  }

  emit<K extends keyof M>(event: K, payload: M[K]): void {
    const set = this.listeners.get(event);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        (listener as Listener<M[K]>)(payload);
      } catch (err) {
        try {
          this.onListenerError(String(event), err);
        } catch {
          // The error reporter itself failed (a closed log stream): nothing is left to tell.
        }
      }
    }
  }
}
