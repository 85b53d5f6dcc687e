import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  CryptoPool,
  cryptoAbandoned,
  cryptoBusy,
  ensureThreadPoolSize,
  signalOnClose,
  withCryptoContext,
} from "../../src/credentials/crypto-pool.ts";
import { isRefusal } from "../../src/errors.ts";

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
    const pool = new CryptoPool({ size: 3, defaultLane: "mail" });
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
    const pool = new CryptoPool({ size: 4, defaultLane: "mail" });
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

  it("interactive work never takes the mail server's share; a freed slot goes to waiting mail work first", async () => {
    const pool = new CryptoPool(4);
    const probe = instrument(pool);
    const interactive = (id: number) =>
      withCryptoContext({ lane: "interactive" }, () => pool.run(probe.job(id)));
    const mail = (id: number) => withCryptoContext({ lane: "mail" }, () => pool.run(probe.job(id)));
    const runs = [interactive(0), interactive(1), interactive(2), interactive(3)];
    await tick();
    assert.deepEqual(probe.started, [0, 1], "half the pool stays free for the mail server");
    runs.push(mail(10), mail(11), mail(12));
    await tick();
    assert.deepEqual(probe.started, [0, 1, 10, 11]);
    probe.releases[0]!(); // an interactive slot frees: the waiting mail job takes it
    await tick();
    assert.deepEqual(probe.started, [0, 1, 10, 11, 12]);
    for (let i = 1; i < 7; i++) {
      probe.releases[i]!();
      await tick();
    }
    await Promise.all(runs);
    assert.deepEqual(
      [...probe.started].sort((a, b) => a - b),
      [0, 1, 2, 3, 10, 11, 12],
    );
  });

  it("a full queue and a long wait are refused as busy; a job whose client left is dropped before it runs", async () => {
    const pool = new CryptoPool({ size: 1, queueLimit: 2, waitLimitMs: 100 });
    const probe = instrument(pool);
    const first = pool.run(probe.job(0));
    const waiting = [pool.run(probe.job(1)), pool.run(probe.job(2))];
    await assert.rejects(
      pool.run(probe.job(3)),
      (error) => isRefusal(error, cryptoBusy),
      "the queue is full",
    );
    for (const job of waiting)
      await assert.rejects(job, (error) => isRefusal(error, cryptoBusy), "waited past the limit");
    assert.equal(pool.queued, 0);

    const controller = new AbortController();
    const abandoned = withCryptoContext({ lane: "mail", signal: controller.signal }, () =>
      pool.run(probe.job(4)),
    );
    controller.abort();
    await assert.rejects(abandoned, (error) => isRefusal(error, cryptoAbandoned));
    probe.releases[0]!();
    assert.equal(await first, 0);
    assert.deepEqual(probe.started, [0], "neither the refused nor the abandoned jobs ran");
    await assert.rejects(
      withCryptoContext({ lane: "mail", signal: AbortSignal.abort() }, () => pool.run(probe.job(5))),
      (error) => isRefusal(error, cryptoAbandoned),
      "an already abandoned request gets no slot",
    );
  });

  it("signalOnClose fires when the connection closes before the answer, also when that happened already", () => {
    const listeners: Array<() => void> = [];
    const open = {
      destroyed: false,
      writableFinished: false,
      once: (_: "close", fn: () => void) => listeners.push(fn),
    };
    const signal = signalOnClose(open);
    assert.equal(signal.aborted, false);
    listeners[0]!();
    assert.equal(signal.aborted, true);
    const gone = { destroyed: true, writableFinished: false, once: () => undefined };
    assert.equal(signalOnClose(gone).aborted, true);
    const answered = { destroyed: true, writableFinished: true, once: () => undefined };
    assert.equal(signalOnClose(answered).aborted, false);
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
