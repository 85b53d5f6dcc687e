/**
 * SQLite read batches (db/database.ts): the compiled reads of one event-loop turn share one read
 * transaction. What that must never change: this process's own writes are seen at once, another
 * process's writes are seen from the next turn, Kysely's transactions still work, and checkpoints
 * are never held back beyond a turn. SQLite only (the other dialects have no such batches), so
 * this file always uses a SQLite file of its own and the database runs leave it out.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import BetterSqlite3 from "better-sqlite3";
import { type DatabaseHandle, openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { preparedQuery } from "../src/db/prepared.ts";

let dir: string;
let file: string;
let handle: DatabaseHandle;
/** Another connection to the same file, as the console or a second instance has. */
let other: BetterSqlite3.Database;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "mas-read-batches-"));
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

const settingValue = () =>
  preparedQuery(handle.db, 1, (name: string) =>
    handle.db.selectFrom("settings").select("value").where("name", "=", name),
  );

const insertByOther = (name: string, value: string) =>
  other.prepare("INSERT INTO settings (name, value, updated_at) VALUES (?, ?, 0)").run(name, value);

test("another process's write is seen from the next turn, and one turn reads one snapshot", async () => {
  const read = settingValue();
  assert.deepEqual(await read("batch_other"), []);
  insertByOther("batch_other", "written elsewhere");
  // Same turn: the batch's snapshot predates the write, so every read of the turn agrees.
  assert.deepEqual(await read("batch_other"), []);
  await nextTurn();
  assert.deepEqual(await read("batch_other"), [{ value: "written elsewhere" }]);
});

const readByOther = (name: string) => other.prepare("SELECT value FROM settings WHERE name = ?").all(name);

test("this process's own write is committed at once and seen by the next read, in the same turn", async () => {
  const read = settingValue();
  assert.deepEqual(await read("batch_own"), []);
  await handle.db
    .insertInto("settings")
    .values({ name: "batch_own", value: "mine", updated_at: 0 })
    .execute();
  // Committed, not merely visible to this connection: a write never waits for the batch to end.
  assert.deepEqual(readByOther("batch_own"), [{ value: "mine" }]);
  assert.deepEqual(await read("batch_own"), [{ value: "mine" }]);
  await handle.db.updateTable("settings").set({ value: "changed" }).where("name", "=", "batch_own").execute();
  assert.deepEqual(await read("batch_own"), [{ value: "changed" }]);
});

test("a transaction started while a batch is open commits, and rolls back, as usual", async () => {
  const read = settingValue();
  assert.deepEqual(await read("batch_trx"), []);
  await handle.db.transaction().execute(async (trx) => {
    await trx
      .insertInto("settings")
      .values({ name: "batch_trx", value: "committed", updated_at: 0 })
      .execute();
  });
  assert.deepEqual(await read("batch_trx"), [{ value: "committed" }]);
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
  assert.deepEqual(await read("batch_trx"), [{ value: "committed" }]);
  assert.deepEqual(readByOther("batch_trx"), [{ value: "committed" }]);
});

test("another connection writes while reads go on, and checkpoints are not held back after the turn", async () => {
  const read = settingValue();
  for (let i = 0; i < 20; i++) {
    assert.deepEqual(await read(`batch_many_${i}`), []);
    insertByOther(`batch_many_${i}`, String(i));
    await nextTurn();
    assert.deepEqual(await read(`batch_many_${i}`), [{ value: String(i) }]);
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
  const read = preparedQuery(second.db, 1, (name: string) =>
    second.db.selectFrom("settings").select("value").where("name", "=", name),
  );
  assert.deepEqual(await read("batch_many_0"), [{ value: "0" }]);
  await second.close();
  const [result] = other.pragma("wal_checkpoint(TRUNCATE)") as { busy: number }[];
  assert.equal(result?.busy, 0);
});

test("sameInBatch: one answer per batch for the same values, never carried past a write or the turn", async () => {
  const read = preparedQuery(
    handle.db,
    1,
    (name: string) => handle.db.selectFrom("settings").select("value").where("name", "=", name),
    { sameInBatch: true },
  );
  await handle.db
    .insertInto("settings")
    .values({ name: "batch_same", value: "one", updated_at: 0 })
    .execute();
  const first = await read("batch_same");
  assert.deepEqual(first, [{ value: "one" }]);
  assert.equal(await read("batch_same"), first, "asked again in the same batch: the same rows");
  assert.deepEqual(await read("batch_missing"), []);
  // A write ends the batch: the next read asks the database again and sees it.
  await handle.db.updateTable("settings").set({ value: "two" }).where("name", "=", "batch_same").execute();
  const afterWrite = await read("batch_same");
  assert.deepEqual(afterWrite, [{ value: "two" }]);
  // Another process's write, seen from the next turn like any read.
  other.prepare("UPDATE settings SET value = 'three' WHERE name = ?").run("batch_same");
  assert.equal(await read("batch_same"), afterWrite);
  await nextTurn();
  assert.deepEqual(await read("batch_same"), [{ value: "three" }]);
});
