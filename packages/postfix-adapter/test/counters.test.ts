/**
 * The in-memory sliding windows with a clock of the test's own (an hour cannot be waited for), and
 * the netstring decoder's edge cases. The Redis windows are tested against a real Redis in
 * policy.test.ts.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MemoryCounters } from "../src/memory.ts";
import { encodeNetstring, NetstringDecoder, NetstringError } from "../src/netstring.ts";

const minute = 60_000;

describe("memory counters", () => {
  test("hour and day windows slide; only END-OF-MESSAGE-style uses record", async () => {
    let now = 1_800_000_000_000;
    const counters = new MemoryCounters(() => now);
    const limits = { perHour: 2, perDay: 3 };
    assert.deepEqual(await counters.use("a", limits, false), { allowed: true, hour: 0, day: 0 });
    assert.deepEqual(await counters.use("a", limits, true), { allowed: true, hour: 1, day: 1 });
    now += 10 * minute;
    assert.deepEqual(await counters.use("a", limits, true), { allowed: true, hour: 2, day: 2 });
    assert.deepEqual(await counters.use("a", limits, true), { allowed: false, hour: 2, day: 2 });
    // 61 minutes after the first message, it has left the hour (but not the day).
    now += 51 * minute;
    assert.deepEqual(await counters.use("a", limits, true), { allowed: true, hour: 2, day: 3 });
    now += 60 * minute;
    assert.deepEqual(await counters.use("a", limits, false), { allowed: false, hour: 0, day: 3 });
    // A day after the first message, the day holds two.
    now += 22 * 60 * minute;
    assert.deepEqual(await counters.use("a", limits, false), { allowed: true, hour: 0, day: 2 });
    // Senders are counted apart; 0 means unlimited.
    for (let i = 0; i < 50; i++) await counters.use("b", { perHour: 0, perDay: 0 }, true);
    assert.deepEqual(await counters.use("b", { perHour: 0, perDay: 60 }, false), {
      allowed: true,
      hour: 50,
      day: 50,
    });
    await counters.close();
  });

  test("exactly at the edge: a message sent exactly an hour ago no longer counts", async () => {
    let now = 1_800_000_000_000;
    const counters = new MemoryCounters(() => now);
    await counters.use("a", { perHour: 1, perDay: 0 }, true);
    now += 60 * minute - 1;
    assert.equal((await counters.use("a", { perHour: 1, perDay: 0 }, false)).allowed, false);
    now += 1;
    assert.equal((await counters.use("a", { perHour: 1, perDay: 0 }, false)).allowed, true);
    await counters.close();
  });
});

describe("netstrings", () => {
  const decodeAll = (decoder: NetstringDecoder) => {
    const out: string[] = [];
    for (let next = decoder.next(); next !== null; next = decoder.next()) out.push(next.toString());
    return out;
  };

  test("encode: the length counts bytes, not characters", () => {
    assert.equal(encodeNetstring("OK ü"), "5:OK ü,");
    assert.equal(encodeNetstring(""), "0:,");
  });

  test("decode: several in one chunk, one split anywhere, the empty string", () => {
    const decoder = new NetstringDecoder(100);
    decoder.feed(Buffer.from("5:hello,0:,3:a"));
    assert.deepEqual(decodeAll(decoder), ["hello", ""]);
    decoder.feed(Buffer.from("bc"));
    assert.deepEqual(decodeAll(decoder), []);
    decoder.feed(Buffer.from(",1"));
    assert.deepEqual(decodeAll(decoder), ["abc"]);
    decoder.feed(Buffer.from(":x,"));
    assert.deepEqual(decodeAll(decoder), ["x"]);
    assert.equal(decoder.pending, 0);
  });

  test("decode: the longest allowed, and one byte more refused from the length alone", () => {
    const decoder = new NetstringDecoder(10);
    decoder.feed(Buffer.from("10:0123456789,"));
    assert.deepEqual(decodeAll(decoder), ["0123456789"]);
    decoder.feed(Buffer.from("11"));
    assert.throws(
      () => decoder.next(),
      (e: unknown) => e instanceof NetstringError && e.kind === "too-large",
    );
  });

  for (const [input, kind] of [
    ["-1:x,", "malformed"],
    ["1 :x,", "malformed"],
    ["00:,", "malformed"],
    ["1:xy", "malformed"],
    [":,", "malformed"],
    ["999:", "too-large"],
  ] as const) {
    test(`decode: ${JSON.stringify(input)} is ${kind}`, () => {
      const decoder = new NetstringDecoder(100);
      decoder.feed(Buffer.from(input));
      assert.throws(
        () => decodeAll(decoder),
        (e: unknown) => e instanceof NetstringError && e.kind === kind,
      );
    });
  }
});
