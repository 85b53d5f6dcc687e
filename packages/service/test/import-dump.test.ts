import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { dumpTables, excludedTables } from "../src/import/dump.ts";
import { createDatabase, scratchDatabase } from "./helpers/databases.ts";
import { runConsole } from "./helpers/process.ts";
import { createUserliDatabase } from "./helpers/userli-database.ts";
import { fillUserli } from "./helpers/userli-fixture.ts";

/**
 * app:export and app:import: the dump's table list covers the whole database, and a dump moved to
 * another database and exported again is the same dump, on all three databases.
 */

const password = "correct horse battery staple";

/** The export of a database: its lines, the header without its time. */
function exportOf(url: string): string[] {
  const result = runConsole(url, ["app:export"]);
  assert.equal(result.status, 0, result.stderr);
  const [header, ...rows] = result.stdout.trimEnd().split("\n");
  const { exportedAt, ...rest } = JSON.parse(header ?? "{}");
  assert.match(exportedAt, /^\d{4}-\d\d-\d\dT/);
  return [JSON.stringify(rest), ...rows];
}

function importInto(url: string, lines: string[], dir: string): ReturnType<typeof runConsole> {
  const file = join(dir, `dump-${Math.random().toString(36).slice(2)}.jsonl`);
  writeFileSync(file, `${lines.join("\n")}\n`);
  return runConsole(url, ["app:import", file]);
}

const server = (variable: "TEST_POSTGRES_URL" | "TEST_MARIADB_URL", scheme: RegExp): string | null =>
  process.env[variable] ??
  (scheme.test(process.env.TEST_DATABASE_URL ?? "") ? (process.env.TEST_DATABASE_URL ?? null) : null);
const postgresServer = server("TEST_POSTGRES_URL", /^postgres/);
const mariadbServer = server("TEST_MARIADB_URL", /^(mysql|mariadb):/);

test("every table of the database is dumped or excluded, by name, and every flag column is known", async () => {
  const { url, remove } = await scratchDatabase("mas-dump-");
  const handle = await openDatabase(url, { poolSize: 1 });
  try {
    await migrateToLatest(handle);
    const tables = await handle.db.introspection.getTables();
    const dumped = new Set(dumpTables.map((t) => t.name as string));
    const excluded = new Set(Object.keys(excludedTables));
    const names = tables.map((t) => t.name).sort();
    const forgotten = names.filter((name) => !dumped.has(name) && !excluded.has(name));
    assert.deepEqual(
      forgotten,
      [],
      "a table is neither in dumpTables nor in excludedTables (import/dump.ts): add it to one of them",
    );
    assert.deepEqual(
      [...dumped].filter((name) => excluded.has(name)),
      [],
      "a table is both dumped and excluded",
    );
    assert.deepEqual(
      [...dumped, ...excluded].filter((name) => !names.includes(name)).sort(),
      [],
      "a listed table does not exist",
    );
    for (const table of dumpTables) {
      const columns = tables.find((t) => t.name === table.name)?.columns ?? [];
      for (const flag of table.flags)
        assert.ok(
          columns.some((c) => c.name === flag),
          `${table.name}.${flag} does not exist`,
        );
      // PostgreSQL says which columns are flags; MariaDB's BOOLEAN is TINYINT(1) (no other TINYINTs here).
      if (handle.dialect !== "sqlite") {
        const booleans = columns.filter((c) =>
          ["bool", "boolean", "tinyint"].includes(c.dataType.toLowerCase()),
        );
        assert.deepEqual(
          booleans.map((c) => c.name).sort(),
          [...table.flags].sort(),
          `${table.name}: the flags list of dumpTables must name every flag column`,
        );
      }
    }
  } finally {
    await handle.close();
    await remove();
  }
});

describe("app:export and app:import", () => {
  let dir: string;
  let source: { url: string; remove: () => Promise<void> };
  let original: string[];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "mas-dump-"));
    // The source is SQLite, with every kind of row: a userli import, then the service's own state.
    source = { url: `sqlite:${join(dir, "source.sqlite")}`, remove: async () => {} };
    const userli = await createUserliDatabase("sqlite");
    try {
      await fillUserli(userli, 10);
      assert.equal(runConsole(source.url, ["app:import:userli", "--from", userli.url]).status, 2);
    } finally {
      await userli.remove();
    }
    const created = runConsole(source.url, [
      "app:user:create",
      "-u",
      "fresh@example.org",
      "--password",
      password,
    ]);
    assert.equal(created.status, 0, created.stderr);
    const handle = await openDatabase(source.url, { poolSize: 1 });
    try {
      const { db } = handle;
      const user = await db
        .selectFrom("users")
        .select("id")
        .where("email", "=", "fresh@example.org")
        .executeTakeFirstOrThrow();
      const endpoint = await db
        .selectFrom("webhook_endpoints")
        .select("id")
        .orderBy("id")
        .executeTakeFirstOrThrow();
      const delivery = {
        endpoint_id: endpoint.id,
        type: "user.deleted",
        body: '{"type":"user.deleted","timestamp":"2026-11-20T10:00:00+00:00","data":{"email":"x@example.org"}}',
        signature: "0".repeat(64),
        attempts: 1,
        next_attempt_at: 1795000000,
        response_code: null,
        response_body: null,
        error: null,
        created_at: 1795000000,
        delivered_at: null,
      };
      await db
        .insertInto("webhook_deliveries")
        .values([
          // Claimed by a worker of the old installation: the dump carries it unclaimed.
          {
            ...delivery,
            id: "01JCLAIMED0000000000000000",
            status: "pending",
            claimed_until: 1795000060,
            claim_token: "token",
          },
          {
            ...delivery,
            id: "01JFAILED00000000000000000",
            status: "failed",
            claimed_until: null,
            claim_token: null,
            error: "timeout",
          },
          {
            ...delivery,
            id: "01JDONE0000000000000000000",
            status: "success",
            claimed_until: null,
            claim_token: null,
            response_code: 200,
          },
        ])
        .execute();
      const mail = {
        recipient: "fresh@example.org",
        subject: "Welcome",
        body: "Hello",
        attempts: 0,
        next_attempt_at: 1795000000,
        claimed_until: null,
        claim_token: null,
        error: null,
        created_at: 1795000000,
        sent_at: null,
      };
      await db
        .insertInto("mail_outbox")
        .values([
          { ...mail, id: "01JMAILPENDING000000000000", status: "pending" },
          { ...mail, id: "01JMAILSENT000000000000000", status: "success", sent_at: 1795000001 },
        ])
        .execute();
      await db
        .insertInto("audit_log")
        .values({
          at: 1795000000,
          actor: "console",
          actor_domain_id: null,
          action: "user.create",
          target: "fresh@example.org",
          target_domain_id: null,
          detail: '{"quota":null}',
          client_address: null,
        })
        .execute();
      await db
        .insertInto("security_events")
        .values({
          occurred_at: 1795000000,
          type: "password.changed",
          user_id: user.id,
          email: "fresh@example.org",
          domain_id: null,
          door: "web",
          client_address: "192.0.2.1",
          actor: null,
          detail: '{"how":"changed"}',
        })
        .execute();
      // Left out of every dump.
      await db
        .insertInto("web_sessions")
        .values({
          id_hash: "f".repeat(64),
          user_id: user.id,
          stage: "signed_in",
          data: "{}",
          client_address: "192.0.2.1",
          user_agent: "test",
          created_at: 1795000000,
          last_seen_at: 1795000000,
        })
        .execute();
      await db
        .insertInto("sign_in_failures")
        .values({ subject: "client:192.0.2.1", failures: 3, last_failure_at: 1795000000, blocked_until: 0 })
        .execute();
    } finally {
      await handle.close();
    }
    original = exportOf(source.url);
  });
  after(async () => {
    await source?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the dump: a header naming the schema, rows in table order, a closing line with the counts", () => {
    const header = JSON.parse(original[0]!);
    assert.equal(header.format, "mail-account-service-dump");
    assert.equal(header.version, 1);
    assert.match(header.schema, /^\d{4}-/);
    assert.deepEqual(
      header.tables,
      dumpTables.map((t) => t.name),
    );
    const rows = original.slice(1, -1).map((l) => JSON.parse(l));
    const trailer = JSON.parse(original.at(-1)!);
    assert.equal(trailer.end, true);
    for (const table of dumpTables)
      assert.equal(trailer.rows[table.name], rows.filter((r) => r.table === table.name).length, table.name);
    const order = rows.map((r) => dumpTables.findIndex((t) => t.name === r.table));
    assert.deepEqual(
      order,
      [...order].sort((a, b) => a - b),
      "tables in the order of dumpTables",
    );
    // Sessions and throttling state stay behind; delivered webhooks and sent mail are history.
    assert.ok(!rows.some((r) => ["web_sessions", "sign_in_failures", "job_runs"].includes(r.table)));
    const deliveries = rows.filter((r) => r.table === "webhook_deliveries").map((r) => r.row);
    assert.ok(!deliveries.some((d) => d.status === "success"));
    const claimed = deliveries.find((d) => d.id === "01JCLAIMED0000000000000000");
    assert.deepEqual([claimed.claimed_until, claimed.claim_token], [null, null]);
    assert.ok(deliveries.some((d) => d.id === "01JFAILED00000000000000000"));
    assert.deepEqual(
      rows.filter((r) => r.table === "mail_outbox").map((r) => r.row.id),
      ["01JMAILPENDING000000000000"],
    );
    // Flags are true/false on every database; password hashes are there, never a plain secret.
    const alice = rows.find((r) => r.table === "users" && r.row.email === "alice@example.org").row;
    assert.equal(alice.mail_crypt, true);
    assert.match(alice.password, /^\$argon2id\$/);
    assert.ok(!original.join("\n").includes(password));
  });

  test("into this run's database and back: the export of the import equals the original export", async () => {
    const target = await scratchDatabase("mas-dump-");
    try {
      const imported = importInto(target.url, original, dir);
      assert.equal(imported.status, 0, imported.stderr);
      assert.match(imported.stdout, /^Imported \d+ rows\.$/m);
      assert.deepEqual(exportOf(target.url), original);
      // Ids go on after the imported ones (PostgreSQL's sequences are set past them).
      const created = runConsole(target.url, [
        "app:user:create",
        "-u",
        "later@example.org",
        "--password",
        password,
      ]);
      assert.equal(created.status, 0, created.stderr);
      const created2 = runConsole(target.url, [
        "app:alias:create",
        "-a",
        "later-alias@example.org",
        "-u",
        "later@example.org",
      ]);
      assert.equal(created2.status, 0, created2.stderr);
      // A second import is refused: app:import fills a new database.
      const again = importInto(target.url, original, dir);
      assert.equal(again.status, 1);
      assert.match(again.stderr, /the database is not empty \(domains has \d+ rows\)/);
    } finally {
      await target.remove();
    }
  });

  test("SQLite -> PostgreSQL -> MariaDB: each export of an import equals the original export", {
    skip:
      postgresServer && mariadbServer
        ? process.env.TEST_DATABASE_URL
          ? "runs once, in the SQLite run"
          : false
        : "needs TEST_POSTGRES_URL and TEST_MARIADB_URL",
  }, async () => {
    const postgres = await createDatabase(postgresServer as string, "mas_dump");
    const mariadb = await createDatabase(mariadbServer as string, "mas_dump");
    try {
      assert.equal(importInto(postgres.url, original, dir).status, 0);
      const fromPostgres = exportOf(postgres.url);
      assert.deepEqual(fromPostgres, original);
      assert.equal(importInto(mariadb.url, fromPostgres, dir).status, 0);
      assert.deepEqual(exportOf(mariadb.url), original);
    } finally {
      await postgres.drop();
      await mariadb.drop();
    }
  });

  test("a dump cut short, of a newer schema or with a column this release lacks changes nothing", async () => {
    const target = await scratchDatabase("mas-dump-");
    try {
      const cases: [string[], RegExp][] = [
        [original.slice(0, -1), /the dump is cut short/],
        [original.slice(0, -3).concat(original.at(-1)!), /the dump is damaged: \w+ should have \d+ rows/],
        [
          [JSON.stringify({ ...JSON.parse(original[0]!), schema: "9999-future" }), ...original.slice(1)],
          /newer than this release's/,
        ],
        [
          original.map((line, i) =>
            i === 1 ? line.replace('"created_at"', '"colour":"red","created_at"') : line,
          ),
          /domains has no column colour/,
        ],
        [["not json"], /not a dump of this service|Line 1: not JSON/],
      ];
      for (const [lines, message] of cases) {
        const run = importInto(target.url, lines, dir);
        assert.equal(run.status, 1, run.stdout);
        assert.match(run.stderr, message);
        assert.equal(
          runConsole(target.url, ["app:domains:list", "--json"]).stdout.trim(),
          "[]",
          String(message),
        );
      }
    } finally {
      await target.remove();
    }
  });
});
