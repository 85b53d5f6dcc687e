import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { openDatabase } from "../src/db/database.ts";

const server = process.env.TEST_DATABASE_URL;
const script = fileURLToPath(new URL("../../../scripts/databases.ts", import.meta.url));
const run = (...args: string[]) => spawnSync(process.execPath, [script, ...args], { encoding: "utf8" });

async function reachable(url: string): Promise<boolean> {
  const database = await openDatabase(url, { poolSize: 1 });
  try {
    await database.db
      .selectFrom("information_schema.tables" as never)
      .select("table_name" as never)
      .execute();
    return true;
  } catch {
    return false;
  } finally {
    await database.close().catch(() => {});
  }
}

test("scripts/databases.ts (CI's way, the tests' and the bench's code) creates a database and drops it", {
  skip: server ? false : "needs TEST_DATABASE_URL (PostgreSQL or MariaDB)",
}, async () => {
  const created = run("create", server ?? "", "mas_script");
  assert.equal(created.status, 0, created.stderr);
  const url = created.stdout.trim();
  assert.match(url, /\/mas_script_[0-9a-f]{12}$/);
  assert.ok(await reachable(url), "the new database answers");
  const dropped = run("drop", server ?? "", url);
  assert.equal(dropped.status, 0, dropped.stderr);
  assert.equal(await reachable(url), false, "the dropped database is gone");
});

test("scripts/databases.ts refuses a name that is not a plain identifier, and a SQLite URL", () => {
  const odd = run("drop", "postgres://nobody@127.0.0.1:1/x", "x; drop database test");
  assert.equal(odd.status, 1);
  assert.match(odd.stderr, /not a plain database name/);
  const sqlite = run("create", "sqlite:/tmp/x.sqlite");
  assert.equal(sqlite.status, 1);
  assert.match(sqlite.stderr, /not a PostgreSQL or MariaDB server URL/);
  assert.equal(run("create").status, 2);
});
