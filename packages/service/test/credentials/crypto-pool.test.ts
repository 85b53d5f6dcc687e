import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CryptoPool, ensureThreadPoolSize } from "../../src/credentials/crypto-pool.ts";

/** A job that records how many jobs run at the same moment and finishes when released. */
function instrument(pool: CryptoPool) {
  let current = 0;
  let max = 0;
  const started: number[] = [];
  const releases: Array<() => void> = [];
  const job = (id: number) => () =>
    new Promise<number>((resolve) => {
      current++;
      max = Math.max(max, current);
      started.push(id);
      assert.ok(pool.running <= pool.size);
      releases.push(() => {
        current--;
        resolve(id);
      });
    });
  return {
    job,
    started,
    releases,
    get max() {
      return max;
    },
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("CryptoPool", () => {
  it("runs at most `size` jobs at once, the rest FIFO, and runs them all", async () => {
    const pool = new CryptoPool(3);
    const probe = instrument(pool);
    const results = Array.from({ length: 10 }, (_, i) => pool.run(probe.job(i)));
    await tick();
    assert.equal(pool.running, 3);
    assert.equal(pool.queued, 7);
    assert.deepEqual(probe.started, [0, 1, 2]);
    // Release one at a time; each release admits exactly the next queued job.
    for (let released = 0; released < 10; released++) {
      probe.releases[released]!();
      await tick();
    }
    assert.deepEqual(await Promise.all(results), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.deepEqual(probe.started, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.equal(probe.max, 3);
    assert.equal(pool.running, 0);
    assert.equal(pool.queued, 0);
  });

  it("bounds concurrency of real asynchronous jobs finishing in random order", async () => {
    const pool = new CryptoPool(4);
    let current = 0;
    let max = 0;
    let done = 0;
    const jobs = Array.from({ length: 50 }, () =>
      pool.run(async () => {
        current++;
        max = Math.max(max, current);
        await new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 5)));
        current--;
        done++;
      }),
    );
    await Promise.all(jobs);
    assert.equal(done, 50);
    assert.equal(max, 4);
  });

  it("frees the slot when a job fails, and passes the failure to the caller", async () => {
    const pool = new CryptoPool(1);
    await assert.rejects(
      pool.run(async () => {
        throw new Error("boom");
      }),
      /boom/,
    );
    await assert.rejects(
      pool.run(() => {
        throw new Error("sync boom");
      }),
      /sync boom/,
    );
    assert.equal(await pool.run(async () => 42), 42);
    assert.equal(pool.running, 0);
  });

  it("defaults to a positive size and rejects nonsense sizes", () => {
    assert.ok(new CryptoPool().size >= 1);
    assert.equal(new CryptoPool(undefined).size, new CryptoPool().size);
    assert.throws(() => new CryptoPool(0), RangeError);
    assert.throws(() => new CryptoPool(1.5), RangeError);
  });

  it("ensureThreadPoolSize sets UV_THREADPOOL_SIZE only when unset", () => {
    const saved = process.env.UV_THREADPOOL_SIZE;
    try {
      delete process.env.UV_THREADPOOL_SIZE;
      assert.equal(ensureThreadPoolSize(1), 4);
      assert.equal(process.env.UV_THREADPOOL_SIZE, "4");
      delete process.env.UV_THREADPOOL_SIZE;
      assert.equal(ensureThreadPoolSize(8), 10);
      assert.equal(process.env.UV_THREADPOOL_SIZE, "10");
      process.env.UV_THREADPOOL_SIZE = "7";
      assert.equal(ensureThreadPoolSize(16), 7);
      assert.equal(process.env.UV_THREADPOOL_SIZE, "7");
    } finally {
      if (saved === undefined) delete process.env.UV_THREADPOOL_SIZE;
      else process.env.UV_THREADPOOL_SIZE = saved;
    }
  });
});
