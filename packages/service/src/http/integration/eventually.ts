/**
 * A value now, or a promise of it. The per-message lookups use it end to end (token check, query,
 * route handler): on SQLite the indexed read answers synchronously, and awaiting it anyway would
 * put every request through a chain of promise jobs and microtask turns that cost more than the
 * read itself. Whoever needs a promise can still `await` an Eventually.
 */
export type Eventually<T> = T | Promise<T>;

export const isPromise = <T>(value: Eventually<T>): value is Promise<T> => value instanceof Promise;

/** `next` applied to the value: at once when it is there, else when the promise resolves. */
export function andThen<T, U>(value: Eventually<T>, next: (value: T) => Eventually<U>): Eventually<U> {
  return isPromise(value) ? value.then(next) : next(value);
}
