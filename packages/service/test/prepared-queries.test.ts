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
const onPostgres = /^postgres(ql)?:/.test(process.env.TEST_DATABASE_URL ?? "");

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
  const held = Promise.withResolvers<void>();
  const insertDone = Promise.withResolvers<void>();
  const transaction = handle.db
    .transaction()
    .execute(async (trx) => {
      await trx
        .insertInto("settings")
        .values({ name: "prepared_uncommitted", value: "x", updated_at: 0 })
        .execute();
      insertDone.resolve();
      await held.promise;
      throw new Error("roll back");
    })
    .catch((error: Error) => error.message);

  await insertDone.promise;
  const during = read("prepared_uncommitted");
  // Let the read run (or queue) while the transaction is still open, then roll it back.
  await new Promise((resolve) => setTimeout(resolve, 50));
  held.resolve();
  assert.equal(await transaction, "roll back");
  assert.deepEqual(await during, []);
  assert.deepEqual(await read("prepared_uncommitted"), []);
});

test("on SQLite a compiled read answers at once; through Kysely's queue while a transaction holds the connection", async () => {
  const read = settingValue();
  await handle.db
    .insertInto("settings")
    .values({ name: "prepared_now", value: "now", updated_at: 0 })
    .execute();
  const outside = read("prepared_now");
  const onSqlite = handle.dialect === "sqlite";
  // The per-message lookups rely on this: no promise jobs per request on SQLite (eventually.ts).
  assert.equal(outside instanceof Promise, !onSqlite);
  assert.deepEqual(await outside, [{ value: "now" }]);

  const held = Promise.withResolvers<void>();
  const transactionStarted = Promise.withResolvers<void>();
  const transaction = handle.db.transaction().execute(async (trx) => {
    await trx.selectFrom("settings").select("name").execute();
    transactionStarted.resolve();
    await held.promise;
  });
  await transactionStarted.promise;
  const during = read("prepared_now");
  assert.ok(during instanceof Promise, "a read during a transaction waits for the connection");
  held.resolve();
  await transaction;
  assert.deepEqual(await during, [{ value: "now" }]);
});

test("reads by key asked in one turn each get exactly their own rows", async () => {
  const { db } = handle;
  await db
    .insertInto("settings")
    .values([
      { name: "keyed_a", value: "A", updated_at: 0 },
      { name: "keyed_b", value: "B", updated_at: 0 },
    ])
    .execute();
  // Two rows per existing key (a union), none for a missing one.
  const read = preparedQuery(
    db,
    1,
    (name: string) =>
      db
        .selectFrom("settings")
        .select("value")
        .where("name", "=", name)
        .unionAll(db.selectFrom("settings").select("name as value").where("name", "=", name)),
    { byKey: true },
  );
  const keys = ["keyed_b", "keyed_a", "keyed_missing", "keyed_a", "keyed_nul\u0000"];
  const answers = await Promise.allSettled(keys.map((key) => read(key)));
  const rows = (i: number) => {
    const answer = answers[i];
    assert.equal(answer?.status, "fulfilled", keys[i]);
    return (answer as PromiseFulfilledResult<{ value: string }[]>).value;
  };
  const sorted = (list: { value: string }[]) => list.map((row) => row.value).sort();
  assert.deepEqual(sorted(rows(0)), ["B", "keyed_b"]);
  assert.deepEqual(sorted(rows(1)), ["A", "keyed_a"]);
  assert.deepEqual(rows(2), []);
  assert.deepEqual(sorted(rows(3)), ["A", "keyed_a"]);
  // The same key twice: equal answers, but rows of its own each (a caller may change them).
  assert.notEqual(rows(1)[0], rows(3)[0]);
  // A key PostgreSQL refuses as text fails alone (it is never put in a batch); the others stand.
  if (onPostgres) assert.equal(answers[4]?.status, "rejected");

  // A write committed before the call is seen, in the same turn as other keys.
  await db.insertInto("settings").values({ name: "keyed_c", value: "C", updated_at: 0 }).execute();
  const [c, a] = await Promise.all([read("keyed_c"), read("keyed_a")]);
  assert.deepEqual(sorted(c), ["C", "keyed_c"]);
  assert.deepEqual(sorted(a), ["A", "keyed_a"]);
});

const onMariadb = /^(mysql|mariadb):/.test(process.env.TEST_DATABASE_URL ?? "");

test("on a database server the reads by key of one turn run as one statement; a lone key as compiled", {
  skip:
    onPostgres || onMariadb
      ? false
      : "PostgreSQL and MariaDB only (TEST_DATABASE_URL): SQLite reads in-process, key by key",
}, async () => {
  // One connection, so the session that ran the reads is the one asked about them.
  const single = await openDatabase(url, { poolSize: 1 });
  try {
    const read = preparedQuery(
      single.db,
      1,
      (name: string) => single.db.selectFrom("settings").select("value").where("name", "=", name),
      { byKey: true },
    );
    const selects = async () => {
      const { rows } = await sql<{ Value: string }>`show session status like 'Com_select'`.execute(single.db);
      return Number(rows[0]?.Value);
    };
    const before = onMariadb ? await selects() : 0;
    const turn = await Promise.all(["prepared_a", "prepared_b", "prepared_missing", "prepared_a"].map(read));
    assert.deepEqual(turn, [[{ value: "first" }], [{ value: "second" }], [], [{ value: "first" }]]);
    const afterTurn = onMariadb ? await selects() : 0;
    assert.deepEqual(await read("prepared_b"), [{ value: "second" }]);
    if (onMariadb) {
      assert.equal(afterTurn - before, 1, "four reads of one turn: one statement");
      assert.equal((await selects()) - afterTurn, 1, "a read alone in its turn: one statement");
      return;
    }
    const { rows } = await sql<{ statement: string; runs: number }>`
      select statement, generic_plans + custom_plans as runs from pg_prepared_statements
      where name like 'mas\\_%' order by statement`.execute(single.db);
    assert.equal(rows.length, 2, JSON.stringify(rows));
    const plain = rows.find((row) => !/unnest/.test(row.statement));
    const batched = rows.find((row) => /unnest/.test(row.statement));
    assert.match(batched?.statement ?? "", /unnest\(\$1::text\[\]\).*"name" = mas_batch\.key/);
    assert.equal(Number(batched?.runs), 1, "four reads of one turn: one statement");
    assert.equal(Number(plain?.runs), 1, "a read alone in its turn: the compiled statement");
  } finally {
    await single.close();
  }
});

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
