/**
 * Compiled hot queries (preparedQuery): new values bound on every call, and reads never see a
 * transaction's uncommitted writes (on SQLite they skip Kysely's queue unless a transaction holds
 * the connection). On PostgreSQL they are named prepared statements.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { type DatabaseHandle, openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { preparedQuery } from "../src/db/prepared.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";

let handle: DatabaseHandle;
let dir: string;
let drop: () => Promise<void>;
let url: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "mas-prepared-"));
  const fresh = await freshDatabaseUrl(join(dir, "prepared.sqlite"));
  drop = fresh.drop;
  url = fresh.url;
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

const onPostgres = /^postgres(ql)?:/.test(process.env.TEST_DATABASE_URL ?? "");

test("on PostgreSQL a compiled read is a named prepared statement, unless switched off", {
  skip: onPostgres
    ? false
    : "PostgreSQL only (TEST_DATABASE_URL): SQLite and MariaDB have no named statements here",
}, async () => {
  for (const preparedStatements of [true, false]) {
    // One connection, so the session that ran the reads is the one asked about its statements.
    const single = await openDatabase(url, { poolSize: 1, preparedStatements });
    try {
      const read = preparedQuery(single.db, 1, (name: string) =>
        single.db.selectFrom("settings").select("value").where("name", "=", name),
      );
      assert.deepEqual(await read("prepared_a"), [{ value: "first" }]);
      assert.deepEqual(await read("prepared_b"), [{ value: "second" }]);
      const { rows } = await sql<{ name: string; statement: string }>`
        select name, statement from pg_prepared_statements where name like 'mas\\_%'`.execute(single.db);
      if (!preparedStatements) assert.equal(rows.length, 0, "DATABASE_PREPARED_STATEMENTS=false");
      else {
        assert.equal(rows.length, 1);
        assert.match(rows[0]?.statement ?? "", /from "settings" where "name" = \$1/);
      }
    } finally {
      await single.close();
    }
  }
});
