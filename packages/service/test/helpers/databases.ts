import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * "A fresh database on this server" and "drop it", written once for the tests, the benchmark
 * (bench/run.ts) and CI (.ci/run through scripts/databases.ts). A server URL names any database
 * the user may connect to (PostgreSQL needs one to issue CREATE DATABASE from); the new database
 * gets the same URL with its own name.
 */
export interface CreatedDatabase {
  /** Connection URL of the new database. */
  url: string;
  drop: () => Promise<void>;
}

type ServerKind = "postgres" | "mariadb";

function serverKind(server: string): ServerKind {
  const protocol = new URL(server).protocol;
  if (/^postgres(ql)?:$/.test(protocol)) return "postgres";
  if (protocol === "mysql:" || protocol === "mariadb:") return "mariadb";
  throw new Error(`not a PostgreSQL or MariaDB server URL: ${protocol}`);
}

// The name goes into CREATE/DROP DATABASE as is, so only plain identifiers are accepted.
function checkedName(name: string): string {
  if (!/^[a-z][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a plain database name: ${name}`);
  return name;
}

/** One statement on the server, over a connection of its own. */
async function onServer(server: string, statement: string): Promise<void> {
  if (serverKind(server) === "postgres") {
    const pg = (await import("pg")).default;
    const client = new pg.Client({ connectionString: server });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
    return;
  }
  const mysql = await import("mysql2/promise");
  const client = await mysql.createConnection({ uri: server.replace(/^mariadb:/, "mysql:") });
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** Creates `<prefix>_<random>` on the server (MariaDB: utf8mb4 with binary collation, as the service expects). */
export async function createDatabase(server: string, prefix = "mas_test"): Promise<CreatedDatabase> {
  const name = checkedName(`${prefix}_${randomBytes(6).toString("hex")}`);
  const charset = serverKind(server) === "mariadb" ? " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin" : "";
  await onServer(server, `CREATE DATABASE ${name}${charset}`);
  const url = new URL(server);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => dropDatabase(server, name) };
}

/** Drops a database by name (or by its URL), whoever is still connected to it. */
export async function dropDatabase(server: string, nameOrUrl: string): Promise<void> {
  const name = checkedName(nameOrUrl.includes("://") ? new URL(nameOrUrl).pathname.slice(1) : nameOrUrl);
  const force = serverKind(server) === "postgres" ? " WITH (FORCE)" : "";
  await onServer(server, `DROP DATABASE IF EXISTS ${name}${force}`);
}

/**
 * A fresh, empty database for one test service. SQLite: a file in the test's directory. PostgreSQL
 * and MariaDB (TEST_DATABASE_URL, set by the test runner from TEST_POSTGRES_URL / TEST_MARIADB_URL):
 * a new database created on that server and dropped afterwards, so test files never share state.
 */
export async function freshDatabaseUrl(sqliteFile: string): Promise<CreatedDatabase> {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) return { url: `sqlite:${sqliteFile}`, drop: async () => {} };
  return createDatabase(server);
}

/**
 * A temporary directory and a fresh database (an SQLite file in that directory unless
 * TEST_DATABASE_URL names a server); `remove` drops the database and deletes the directory.
 */
export async function scratchDatabase(
  prefix = "mas-test-",
): Promise<{ dir: string; url: string; remove: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const { url, drop } = await freshDatabaseUrl(join(dir, "data.sqlite"));
  return {
    dir,
    url,
    remove: async () => {
      await drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
