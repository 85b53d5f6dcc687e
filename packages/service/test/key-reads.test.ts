/**
 * Keyed reads (db/key-reads.ts), the per-message lookups' way to the database, on every dialect:
 * each key asked for in one turn gets exactly its own rows, a transaction's uncommitted writes are
 * never seen, and on a database server the keys of one turn go to it as one statement (PostgreSQL:
 * one named prepared statement unless switched off).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { type DatabaseHandle, openDatabase } from "../src/db/database.ts";
import { keyedRead } from "../src/db/key-reads.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";

let handle: DatabaseHandle;
let dir: string;
let drop: () => Promise<void>;
let url: string;
const onPostgres = /^postgres(ql)?:/.test(process.env.TEST_DATABASE_URL ?? "");
const onMariadb = /^(mysql|mariadb):/.test(process.env.TEST_DATABASE_URL ?? "");

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "mas-keyed-"));
  const fresh = await freshDatabaseUrl(join(dir, "keyed.sqlite"));
  drop = fresh.drop;
  url = fresh.url;
  handle = await openDatabase(fresh.url);
  await migrateToLatest(handle);
  await handle.db
    .insertInto("settings")
    .values([
      { name: "keyed_a", value: "A", updated_at: 0 },
      { name: "keyed_b", value: "B", updated_at: 0 },
    ])
    .execute();
});

after(async () => {
  await handle.close();
  await drop();
  rmSync(dir, { recursive: true, force: true });
});

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

const settingByName = keyedRead((db, keys) =>
  db.selectFrom("settings").select(["name as lookup_key", "value"]).where(keys("name")),
);

/** Two rows per existing key (a union, as the senders and smtp_quota lookups are), none for a missing one. */
const settingTwice = keyedRead((db, keys) =>
  db
    .selectFrom("settings")
    .select(["name as lookup_key", "value"])
    .where(keys("name"))
    .unionAll(db.selectFrom("settings").select(["name as lookup_key", "name as value"]).where(keys("name"))),
);

test("keys asked for in one turn each get exactly their own rows", async () => {
  const read = handle.keyReader(settingTwice);
  const keys = ["keyed_b", "keyed_a", "keyed_missing", "keyed_a", "keyed_nul\u0000"];
  const answers = await Promise.all(keys.map((key) => read(key)));
  const values = (i: number) => (answers[i] ?? []).map((row) => row.value).sort();
  assert.deepEqual(values(0), ["B", "keyed_b"]);
  assert.deepEqual(values(1), ["A", "keyed_a"]);
  assert.deepEqual(values(2), []);
  assert.deepEqual(values(3), ["A", "keyed_a"]);
  // No address or token hash holds a NUL: nothing is found, and the other keys are not disturbed.
  assert.deepEqual(values(4), []);

  // A write committed before the turn is seen, in the same turn as other keys.
  await handle.db.insertInto("settings").values({ name: "keyed_c", value: "C", updated_at: 0 }).execute();
  await nextTurn();
  const [c, a] = await Promise.all([read("keyed_c"), read("keyed_a")]);
  assert.deepEqual(c.map((row) => row.value).sort(), ["C", "keyed_c"]);
  assert.deepEqual(a.map((row) => row.value).sort(), ["A", "keyed_a"]);
});

test("a read during an open transaction does not see its uncommitted write", async () => {
  const read = handle.keyReader(settingByName);
  const held = Promise.withResolvers<void>();
  const inserted = Promise.withResolvers<void>();
  const transaction = handle.db
    .transaction()
    .execute(async (trx) => {
      await trx
        .insertInto("settings")
        .values({ name: "keyed_uncommitted", value: "x", updated_at: 0 })
        .execute();
      inserted.resolve();
      await held.promise;
      throw new Error("roll back");
    })
    .catch((error: Error) => error.message);
  await inserted.promise;
  const during = read("keyed_uncommitted");
  await new Promise((resolve) => setTimeout(resolve, 50));
  held.resolve();
  assert.equal(await transaction, "roll back");
  assert.deepEqual(await during, []);
  await nextTurn();
  assert.deepEqual(await read("keyed_uncommitted"), []);
});

test("more keys in one turn than one statement takes are split, and each still gets its rows", async () => {
  const names = Array.from({ length: 620 }, (_, i) => `keyed_many_${i}`);
  await handle.db
    .insertInto("settings")
    .values(
      names.filter((_, i) => i % 3 === 0).map((name) => ({ name, value: name.toUpperCase(), updated_at: 0 })),
    )
    .execute();
  await nextTurn();
  const read = handle.keyReader(settingByName);
  const answers = await Promise.all(names.map((name) => read(name)));
  for (const [i, rows] of answers.entries())
    assert.deepEqual(
      rows.map((row) => row.value),
      i % 3 === 0 ? [(names[i] as string).toUpperCase()] : [],
    );
});

test("on a database server the keys of one turn go to it as one statement", {
  skip:
    onPostgres || onMariadb
      ? false
      : "PostgreSQL and MariaDB only (TEST_DATABASE_URL): SQLite reads in-process, key by key",
}, async () => {
  // One connection, so the session that ran the reads is the one asked about them.
  const single = await openDatabase(url, { poolSize: 1 });
  try {
    const read = single.keyReader(settingByName);
    const values = async (keys: string[]) =>
      (await Promise.all(keys.map(read))).map((rows) => rows.map((row) => row.value));
    if (onMariadb) {
      const selects = async () => {
        const { rows } = await sql<{ Value: string }>`show session status like 'Com_select'`.execute(
          single.db,
        );
        return Number(rows[0]?.Value);
      };
      const before = await selects();
      assert.deepEqual(await values(["keyed_a", "keyed_b", "keyed_missing", "keyed_a"]), [
        ["A"],
        ["B"],
        [],
        ["A"],
      ]);
      const afterTurn = await selects();
      assert.deepEqual(await values(["keyed_b"]), [["B"]]);
      assert.equal(afterTurn - before, 1, "four reads of one turn: one statement");
      assert.equal((await selects()) - afterTurn, 1, "a read alone in its turn: one statement");
      return;
    }
    assert.deepEqual(await values(["keyed_a", "keyed_b", "keyed_missing", "keyed_a"]), [
      ["A"],
      ["B"],
      [],
      ["A"],
    ]);
    assert.deepEqual(await values(["keyed_b"]), [["B"]]);
    const { rows } = await sql<{ statement: string; runs: number }>`
      select statement, generic_plans + custom_plans as runs from pg_prepared_statements
      where name like 'mas\\_%'`.execute(single.db);
    assert.equal(rows.length, 1, JSON.stringify(rows));
    assert.match(rows[0]?.statement ?? "", /"name" = any\(\$1\)/);
    assert.equal(Number(rows[0]?.runs), 2, "two turns, two runs of the one statement");
  } finally {
    await single.close();
  }
});

test("on PostgreSQL a keyed read is a named prepared statement, unless switched off", {
  skip: onPostgres
    ? false
    : "PostgreSQL only (TEST_DATABASE_URL): SQLite and MariaDB have no named statements here",
}, async () => {
  for (const preparedStatements of [true, false]) {
    const single = await openDatabase(url, { poolSize: 1, preparedStatements });
    try {
      const read = single.keyReader(settingByName);
      assert.deepEqual(await read("keyed_a"), [{ lookup_key: "keyed_a", value: "A" }]);
      const { rows } = await sql<{ name: string }>`
        select name from pg_prepared_statements where name like 'mas\\_%'`.execute(single.db);
      assert.equal(
        rows.length,
        preparedStatements ? 1 : 0,
        `DATABASE_PREPARED_STATEMENTS=${preparedStatements}`,
      );
    } finally {
      await single.close();
    }
  }
});
