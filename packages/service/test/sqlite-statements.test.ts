/**
 * Statements prepared once on SQLite (db/sqlite-statements.ts): each distinct SQL text is prepared
 * once and kept, up to a limit, and a kept statement answers exactly as a fresh one would: with
 * other parameters, inside and outside transactions, after a rollback, after the schema changed.
 * SQLite only: the database runs leave this file out.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import BetterSqlite3 from "better-sqlite3";
import { Kysely, SqliteDialect, sql } from "kysely";
import { openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { withKeptStatements } from "../src/db/sqlite-statements.ts";

interface Test {
  items: { id: number; name: string; size: number };
}

let dir: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), "mas-statements-"));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** A database whose prepare() calls are counted, behind the kept statements. */
function countedDatabase(limit?: number) {
  const sqlite = new BetterSqlite3(join(dir, `${Math.random().toString(36).slice(2)}.sqlite`));
  const prepared: string[] = [];
  const prepare = sqlite.prepare.bind(sqlite);
  sqlite.prepare = ((text: string) => {
    prepared.push(text);
    return prepare(text);
  }) as typeof sqlite.prepare;
  const kept = withKeptStatements(sqlite, limit);
  const db = new Kysely<Test>({ dialect: new SqliteDialect({ database: kept }) });
  return { db, kept, prepared };
}

test("a query run again is not prepared again, and answers for its own parameters", async () => {
  const { db, prepared } = countedDatabase();
  await sql`create table items (id integer primary key, name text not null, size integer not null)`.execute(
    db,
  );
  for (let i = 1; i <= 20; i++)
    await db
      .insertInto("items")
      .values({ id: i, name: `item ${i}`, size: i * 10 })
      .execute();
  const byId = (id: number) => db.selectFrom("items").selectAll().where("id", "=", id).executeTakeFirst();
  for (let i = 1; i <= 20; i++) assert.deepEqual(await byId(i), { id: i, name: `item ${i}`, size: i * 10 });
  assert.equal(await byId(99), undefined);
  const texts = prepared.filter((text) => text.startsWith("select"));
  assert.equal(texts.length, 1, texts.join("\n"));
  assert.equal(prepared.filter((text) => text.startsWith("insert")).length, 1);
  await db.destroy();
});

test("transactions: a rolled-back write is gone, a committed one stays, with the same kept statements", async () => {
  const { db, prepared } = countedDatabase();
  await sql`create table items (id integer primary key, name text not null, size integer not null)`.execute(
    db,
  );
  const insert = (id: number) =>
    db
      .insertInto("items")
      .values({ id, name: `item ${id}`, size: id })
      .execute();
  await assert.rejects(
    db.transaction().execute(async (trx) => {
      await trx.insertInto("items").values({ id: 1, name: "item 1", size: 1 }).execute();
      throw new Error("roll back");
    }),
    /roll back/,
  );
  await db.transaction().execute(async (trx) => {
    await trx.insertInto("items").values({ id: 2, name: "item 2", size: 2 }).execute();
  });
  await insert(3);
  const rows = await db.selectFrom("items").select("id").orderBy("id").execute();
  assert.deepEqual(
    rows.map((row) => row.id),
    [2, 3],
  );
  assert.equal(prepared.filter((text) => text === "begin").length, 1);
  await db.destroy();
});

test("past the limit the least recently used statement goes; the kept ones still answer", async () => {
  const { db, kept, prepared } = countedDatabase(3);
  await sql`create table items (id integer primary key, name text not null, size integer not null)`.execute(
    db,
  );
  await db.insertInto("items").values({ id: 1, name: "one", size: 1 }).execute();
  const queries = [
    () => db.selectFrom("items").select("id").execute(),
    () => db.selectFrom("items").select("name").execute(),
    () => db.selectFrom("items").select("size").execute(),
    () => db.selectFrom("items").select(["id", "name"]).execute(),
  ];
  for (const query of queries) await query();
  assert.equal(kept.kept, 3);
  const before = prepared.length;
  await queries[3]?.(); // kept: most recently used
  await queries[2]?.(); // kept
  assert.equal(prepared.length, before);
  assert.deepEqual(await queries[0]?.(), [{ id: 1 }]); // dropped, prepared again
  assert.equal(prepared.length, before + 1);
  assert.equal(kept.kept, 3);
  await db.destroy();
});

test("a kept statement answers after the schema changed under it", async () => {
  const { db } = countedDatabase();
  await sql`create table items (id integer primary key, name text not null, size integer not null)`.execute(
    db,
  );
  await db.insertInto("items").values({ id: 1, name: "one", size: 1 }).execute();
  const all = () => db.selectFrom("items").selectAll().execute();
  assert.deepEqual(await all(), [{ id: 1, name: "one", size: 1 }]);
  await sql`alter table items add column note text`.execute(db);
  assert.deepEqual(await all(), [{ id: 1, name: "one", size: 1, note: null }]);
  await db.destroy();
});

test("the service's SQLite handle keeps its statements: a migrated database answers as before", async () => {
  const handle = await openDatabase(`sqlite:${join(dir, "service.sqlite")}`);
  try {
    await migrateToLatest(handle);
    await handle.db
      .insertInto("domains")
      .values({ name: "example.org", created_at: 1, updated_at: 1 })
      .execute();
    for (let i = 0; i < 3; i++) {
      const row = await handle.db
        .selectFrom("domains")
        .select("name")
        .where("name", "=", "example.org")
        .executeTakeFirst();
      assert.deepEqual(row, { name: "example.org" });
    }
  } finally {
    await handle.close();
  }
});
