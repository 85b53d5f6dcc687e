/**
 * Compiled hot queries (preparedQuery): new values bound on every call, and reads never see a
 * transaction's uncommitted writes (on SQLite they skip Kysely's queue unless a transaction holds
 * the connection).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type DatabaseHandle, openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { preparedQuery } from "../src/db/prepared.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";

let handle: DatabaseHandle;
let dir: string;
let drop: () => Promise<void>;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "mas-prepared-"));
  const fresh = await freshDatabaseUrl(join(dir, "prepared.sqlite"));
  drop = fresh.drop;
  handle = await openDatabase(fresh.url);
  await migrateToLatest(handle);
});

after(async () => {
  await handle.close();
  await drop();
  rmSync(dir, { recursive: true, force: true });
});

const settingValue = () =>
  preparedQuery(handle.db, 1, (name: string) =>
    handle.db.selectFrom("settings").select("value").where("name", "=", name),
  );

test("each call binds its own values to the one compiled statement", async () => {
  const { db } = handle;
  await db
    .insertInto("settings")
    .values([
      { name: "prepared_a", value: "first", updated_at: 0 },
      { name: "prepared_b", value: "second", updated_at: 0 },
    ])
    .execute();
  const read = settingValue();
  assert.deepEqual(await read("prepared_a"), [{ value: "first" }]);
  assert.deepEqual(await read("prepared_b"), [{ value: "second" }]);
  assert.deepEqual(await read("prepared_missing"), []);
  const [a, b] = await Promise.all([read("prepared_b"), read("prepared_a")]);
  assert.deepEqual([a, b], [[{ value: "second" }], [{ value: "first" }]]);
});

test("a read during an open transaction does not see its uncommitted write", async () => {
  const read = settingValue();
  let release!: () => void;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let inserted!: () => void;
  const insertDone = new Promise<void>((resolve) => {
    inserted = resolve;
  });
  const transaction = handle.db
    .transaction()
    .execute(async (trx) => {
      await trx
        .insertInto("settings")
        .values({ name: "prepared_uncommitted", value: "x", updated_at: 0 })
        .execute();
      inserted();
      await held;
      throw new Error("roll back");
    })
    .catch((error: Error) => error.message);

  await insertDone;
  const during = read("prepared_uncommitted");
  // Let the read run (or queue) while the transaction is still open, then roll it back.
  await new Promise((resolve) => setTimeout(resolve, 50));
  release();
  assert.equal(await transaction, "roll back");
  assert.deepEqual(await during, []);
  assert.deepEqual(await read("prepared_uncommitted"), []);
});
