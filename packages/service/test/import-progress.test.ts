import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { progressDisplay, timeLeft } from "../src/cli/moving.ts";

/**
 * The console import's progress when standard error is not a terminal (a log, a pipe): a line when
 * a table is done (and every few seconds), each followed by the whole import's line with the time
 * left; the bench and operators' scripts read the first form, so it keeps its shape.
 */

test("not on a terminal: a line per finished table, then the whole import's with the time left", async () => {
  const stream = new PassThrough();
  let written = "";
  stream.on("data", (chunk: Buffer) => {
    written += chunk.toString("utf8");
  });
  const progress = progressDisplay(stream);
  progress.update({ table: "domains", done: 10, total: 10, allDone: 10, allTotal: 40 });
  // Within the few seconds between lines, an unfinished table prints nothing.
  progress.update({ table: "users", done: 10, total: 20, allDone: 20, allTotal: 40 });
  progress.update({ table: "users", done: 20, total: 20, allDone: 30, allTotal: 40 });
  progress.stop();
  assert.deepEqual(written.trimEnd().split("\n"), [
    "import: domains 10/10 rows (100%)",
    "import: all tables 10/40 rows (25%)",
    "import: users 20/20 rows (100%)",
    "import: all tables 30/40 rows (75%)",
  ]);
});

test("the time left is the pace so far applied to the rows still to read", () => {
  assert.equal(timeLeft(25, 100, 10_000), "about 30 s left");
  assert.equal(timeLeft(10, 100, 10_000), "about 1 min 30 s left");
  // No pace yet, or nothing left: no estimate.
  assert.equal(timeLeft(0, 100, 10_000), null);
  assert.equal(timeLeft(5, 100, 500), null);
  assert.equal(timeLeft(100, 100, 10_000), null);
});
