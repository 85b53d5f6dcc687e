/**
 * SQLite's keyed reads (db/key-reads.ts): a connection of their own, answering synchronously, the
 * reads of one event-loop turn in one read transaction. What that must never change: every write,
 * this process's or another's, is seen from the next turn; a transaction in progress is neither
 * waited for nor seen; checkpoints are never held back beyond a turn. SQLite only (the other
 * dialects have no such batches), so this file always uses a SQLite file of its own and the
 * database runs leave it out.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import BetterSqlite3 from "better-sqlite3";
import { type DatabaseHandle, openDatabase } from "../src/db/database.ts";
import { type KeyReader, keyedRead } from "../src/db/key-reads.ts";
import { migrateToLatest } from "../src/db/migrate.ts";

let dir: string;
let file: string;
let handle: DatabaseHandle;
/** Another connection to the same file, as the console or a second instance has. */
let other: BetterSqlite3.Database;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "mas-key-reads-"));
  file = join(dir, "batches.sqlite");
  handle = await openDatabase(`sqlite:${file}`);
  await migrateToLatest(handle);
  other = new BetterSqlite3(file);
  other.pragma("busy_timeout = 5000");
});

after(async () => {
  other.close();
  await handle.close();
  rmSync(dir, { recursive: true, force: true });
});

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

const settingByName = keyedRead((db, keys) =>
  db.selectFrom("settings").select(["name as lookup_key", "value"]).where(keys("name")),
);

/** The value rows, answered synchronously: a promise here fails the test. */
function valuesOf(read: KeyReader<{ lookup_key: string; value: string }>, key: string): string[] {
  const rows = read(key);
  assert.ok(!(rows instanceof Promise), "a keyed read on SQLite answers at once");
  return rows.map((row) => row.value);
}

const insertByOther = (name: string, value: string) =>
  other.prepare("INSERT INTO settings (name, value, updated_at) VALUES (?, ?, 0)").run(name, value);

test("another process's write is seen from the next turn, and one turn reads one snapshot", async () => {
  const read = handle.keyReader(settingByName);
  assert.deepEqual(valuesOf(read, "batch_other"), []);
  insertByOther("batch_other", "written elsewhere");
  // Same turn: the batch's snapshot predates the write, so every read of the turn agrees.
  assert.deepEqual(valuesOf(read, "batch_other"), []);
  await nextTurn();
  assert.deepEqual(valuesOf(read, "batch_other"), ["written elsewhere"]);
});

test("this process's own write is committed at once and seen from the next turn", async () => {
  const read = handle.keyReader(settingByName);
  assert.deepEqual(valuesOf(read, "batch_own"), []);
  await handle.db
    .insertInto("settings")
    .values({ name: "batch_own", value: "mine", updated_at: 0 })
    .execute();
  // Committed, not merely visible to this connection: a write never waits for the batch to end.
  assert.deepEqual(other.prepare("SELECT value FROM settings WHERE name = ?").all("batch_own"), [
    { value: "mine" },
  ]);
  await nextTurn();
  assert.deepEqual(valuesOf(read, "batch_own"), ["mine"]);
});

test("a transaction in progress is not waited for and not seen; once committed it is", async () => {
  const read = handle.keyReader(settingByName);
  const held = Promise.withResolvers<void>();
  const written = Promise.withResolvers<void>();
  const transaction = handle.db.transaction().execute(async (trx) => {
    await trx
      .insertInto("settings")
      .values({ name: "batch_trx", value: "committed", updated_at: 0 })
      .execute();
    written.resolve();
    await held.promise;
  });
  await written.promise;
  assert.deepEqual(valuesOf(read, "batch_trx"), [], "the uncommitted insert is not seen");
  held.resolve();
  await transaction;
  await nextTurn();
  assert.deepEqual(valuesOf(read, "batch_trx"), ["committed"]);
  const failed = await handle.db
    .transaction()
    .execute(async (trx) => {
      await trx
        .updateTable("settings")
        .set({ value: "rolled back" })
        .where("name", "=", "batch_trx")
        .execute();
      throw new Error("roll back");
    })
    .catch((error: Error) => error.message);
  assert.equal(failed, "roll back");
  await nextTurn();
  assert.deepEqual(valuesOf(read, "batch_trx"), ["committed"]);
});

test("another connection writes while reads go on, and checkpoints are not held back after the turn", async () => {
  const read = handle.keyReader(settingByName);
  for (let i = 0; i < 20; i++) {
    assert.deepEqual(valuesOf(read, `batch_many_${i}`), []);
    insertByOther(`batch_many_${i}`, String(i));
    await nextTurn();
    assert.deepEqual(valuesOf(read, `batch_many_${i}`), [String(i)]);
  }
  // The last read opened a batch; within the turn a full checkpoint must wait for it (asked
  // without a busy timeout, so it answers at once)...
  other.pragma("busy_timeout = 0");
  const during = other.pragma("wal_checkpoint(TRUNCATE)") as { busy: number }[];
  other.pragma("busy_timeout = 5000");
  assert.equal(during[0]?.busy, 1, "the open read batch holds its snapshot within the turn");
  await nextTurn();
  // ...and once the turn is over nothing holds the WAL: it is copied back and truncated.
  const [result] = other.pragma("wal_checkpoint(TRUNCATE)") as { busy: number; log: number }[];
  assert.deepEqual(result, { busy: 0, log: 0, checkpointed: 0 });
  assert.equal(statSync(`${file}-wal`).size, 0);
});

test("closing the database ends an open batch", async () => {
  const second = await openDatabase(`sqlite:${file}`);
  assert.deepEqual(valuesOf(second.keyReader(settingByName), "batch_many_0"), ["0"]);
  await second.close();
  const [result] = other.pragma("wal_checkpoint(TRUNCATE)") as { busy: number }[];
  assert.equal(result?.busy, 0);
});

test("sameInTurn: one answer per turn for the same key, never carried past the turn", async () => {
  const read = handle.keyReader(settingByName, { sameInTurn: true });
  await handle.db
    .insertInto("settings")
    .values({ name: "batch_same", value: "one", updated_at: 0 })
    .execute();
  await nextTurn();
  const first = read("batch_same");
  assert.deepEqual(first, [{ lookup_key: "batch_same", value: "one" }]);
  assert.equal(read("batch_same"), first, "asked again in the same turn: the same rows");
  assert.deepEqual(read("batch_missing"), []);
  other.prepare("UPDATE settings SET value = 'two' WHERE name = ?").run("batch_same");
  assert.equal(read("batch_same"), first);
  await nextTurn();
  assert.deepEqual(read("batch_same"), [{ lookup_key: "batch_same", value: "two" }]);
});

test("an in-memory database has no second connection: its keyed reads go through Kysely", async () => {
  const memory = await openDatabase("sqlite::memory:");
  try {
    await migrateToLatest(memory);
    await memory.db
      .insertInto("settings")
      .values({ name: "in_memory", value: "here", updated_at: 0 })
      .execute();
    const rows = memory.keyReader(settingByName)("in_memory");
    assert.ok(rows instanceof Promise);
    assert.deepEqual(await rows, [{ lookup_key: "in_memory", value: "here" }]);
  } finally {
    await memory.close();
  }
});
