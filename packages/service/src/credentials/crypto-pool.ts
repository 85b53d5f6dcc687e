import { availableParallelism } from "node:os";

/**
 * A counting semaphore for memory-hungry crypto (each Argon2 job holds 64 MiB): at most `size` jobs
 * run at once, the rest wait in FIFO order. The jobs themselves run on libuv's thread pool or in
 * worker threads, so the pool bounds memory and CPU, not the event loop.
 */
export class CryptoPool {
  readonly #size: number;
  #running = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(size: number = availableParallelism()) {
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError(`CryptoPool size must be a positive integer`);
    this.#size = size;
  }

  get size(): number {
    return this.#size;
  }

  get running(): number {
    return this.#running;
  }

  get queued(): number {
    return this.#waiting.length;
  }

  async run<T>(job: () => Promise<T>): Promise<T> {
    await this.#acquire();
    try {
      return await job();
    } finally {
      this.#release();
    }
  }

  #acquire(): Promise<void> {
    if (this.#running < this.#size) {
      this.#running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #release(): void {
    const next = this.#waiting.shift();
    // The slot passes straight to the next waiter, so `running` stays the same.
    if (next) next();
    else this.#running--;
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
