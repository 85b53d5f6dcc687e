import { AsyncLocalStorage } from "node:async_hooks";
import { availableParallelism } from "node:os";
import { refusal } from "../errors.ts";

/**
 * Which share of the pool a job may take. The mail server's sign-ins (passdb, SMTP auth) keep a
 * share that interactive work (web sign-ins, re-confirmations, webmail, identity) cannot take, so a
 * flood of anonymous web sign-ins never stalls IMAP and SMTP.
 */
export type CryptoLane = "mail" | "interactive";

/** What the door running a check tells the pool: its lane, and a signal that fires when its client left. */
export interface CryptoContext {
  lane: CryptoLane;
  signal?: AbortSignal | undefined;
}

const contexts = new AsyncLocalStorage<CryptoContext>();

/**
 * Runs `work` with a crypto context: every pool job it starts (however deep in the credential
 * functions) takes that lane and is dropped when the signal fires before the job ran.
 */
export const withCryptoContext = <T>(context: CryptoContext, work: () => Promise<T>): Promise<T> =>
  contexts.run(context, work);

/**
 * A signal that fires when an HTTP response's connection closes before the answer was written: the
 * client gave up, so its queued crypto work is dropped. Takes Node's `ServerResponse` (`reply.raw`).
 */
export function signalOnClose(response: {
  once(event: "close", listener: () => void): unknown;
  readonly writableFinished: boolean;
  readonly destroyed: boolean;
}): AbortSignal {
  const controller = new AbortController();
  // The client may have hung up before the handler ran: then 'close' has already fired.
  if (response.destroyed && !response.writableFinished) controller.abort();
  response.once("close", () => {
    if (!response.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** The pool refused the job (its queue full, its wait too long): a temporary failure, try again. */
export const cryptoBusy = refusal("crypto.busy", "unavailable", () => "busy, try again");
/** The client that asked for the job has gone: nothing to answer, the job was never run. */
export const cryptoAbandoned = refusal("crypto.abandoned", "unavailable", () => "request abandoned");

export interface CryptoPoolOptions {
  /** Jobs running at once (each Argon2 job holds 64 MiB). */
  size?: number;
  /** Jobs waiting per lane; one more is refused at once (`crypto.busy`). */
  queueLimit?: number;
  /** Milliseconds a job may wait for a slot before it is refused (`crypto.busy`). */
  waitLimitMs?: number;
  /**
   * The lane of work that names none. The service's is `interactive` (a registration's or a password
   * change's hashing must not take the mail server's share); the console's is `mail` (all slots).
   */
  defaultLane?: CryptoLane;
}

interface Waiter {
  start: () => void;
  fail: (error: Error) => void;
}

/**
 * A counting semaphore for memory-hungry crypto: at most `size` jobs run at once, the rest wait in
 * FIFO order per lane. Bounded: a lane's queue has a limit, a waiting job has a deadline, and a job
 * whose client has gone is dropped before it runs. Interactive jobs may take all slots but the mail
 * lane's share (half the pool, at least one); a freed slot goes to a waiting mail job first. The jobs
 * themselves run on libuv's thread pool or in worker threads, so the pool bounds memory and CPU,
 * not the event loop.
 */
export class CryptoPool {
  readonly #size: number;
  readonly #interactiveLimit: number;
  readonly #queueLimit: number;
  readonly #waitLimitMs: number;
  readonly #defaultLane: CryptoLane;
  #running = 0;
  #runningInteractive = 0;
  readonly #waiting: Record<CryptoLane, Waiter[]> = { mail: [], interactive: [] };

  constructor(sizeOrOptions: number | CryptoPoolOptions = {}) {
    const options = typeof sizeOrOptions === "number" ? { size: sizeOrOptions } : sizeOrOptions;
    const size = options.size ?? availableParallelism();
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError(`CryptoPool size must be a positive integer`);
    this.#size = size;
    this.#interactiveLimit = size === 1 ? 1 : size - Math.max(1, Math.floor(size / 2));
    this.#queueLimit = options.queueLimit ?? 32 * size;
    this.#waitLimitMs = options.waitLimitMs ?? 10_000;
    this.#defaultLane = options.defaultLane ?? "interactive";
  }

  get size(): number {
    return this.#size;
  }

  get running(): number {
    return this.#running;
  }

  get queued(): number {
    return this.#waiting.mail.length + this.#waiting.interactive.length;
  }

  async run<T>(job: () => Promise<T>): Promise<T> {
    const context = contexts.getStore();
    const lane = context?.lane ?? this.#defaultLane;
    await this.#acquire(lane, context?.signal);
    try {
      return await job();
    } finally {
      this.#release(lane);
    }
  }

  #canStart(lane: CryptoLane): boolean {
    if (this.#running >= this.#size) return false;
    return lane === "mail" || this.#runningInteractive < this.#interactiveLimit;
  }

  #take(lane: CryptoLane): void {
    this.#running++;
    if (lane === "interactive") this.#runningInteractive++;
  }

  #acquire(lane: CryptoLane, signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return Promise.reject(cryptoAbandoned());
    const queue = this.#waiting[lane];
    if (queue.length === 0 && this.#canStart(lane)) {
      this.#take(lane);
      return Promise.resolve();
    }
    if (queue.length >= this.#queueLimit) return Promise.reject(cryptoBusy());
    return new Promise((resolve, reject) => {
      const leave = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", abandoned);
        const index = queue.indexOf(waiter);
        if (index >= 0) queue.splice(index, 1);
      };
      const abandoned = () => waiter.fail(cryptoAbandoned());
      const waiter: Waiter = {
        start: () => {
          leave();
          resolve();
        },
        fail: (error) => {
          leave();
          reject(error);
        },
      };
      const timer = setTimeout(() => waiter.fail(cryptoBusy()), this.#waitLimitMs);
      timer.unref();
      signal?.addEventListener("abort", abandoned, { once: true });
      queue.push(waiter);
    });
  }

  #release(lane: CryptoLane): void {
    this.#running--;
    if (lane === "interactive") this.#runningInteractive--;
    for (const next of ["mail", "interactive"] as const) {
      const waiter = this.#waiting[next][0];
      if (waiter && this.#canStart(next)) {
        this.#take(next);
        waiter.start();
        return;
      }
    }
  }
}

/**
 * Makes libuv's thread pool big enough for `poolSize` concurrent crypto jobs plus a little headroom
 * for file and DNS work. libuv reads UV_THREADPOOL_SIZE once, on the first use of the thread pool, so
 * this must be called before anything touches it (main.ts calls it first). An operator's explicit
 * UV_THREADPOOL_SIZE wins. Returns the effective value.
 */
export function ensureThreadPoolSize(poolSize: number = availableParallelism()): number {
  const current = process.env.UV_THREADPOOL_SIZE;
  if (current !== undefined && current !== "") return Number(current);
  const size = Math.max(4, poolSize + 2);
  process.env.UV_THREADPOOL_SIZE = String(size);
  return size;
}
