import { randomBytes } from "node:crypto";

/**
 * A fresh, empty database for one test service. SQLite: a file in the test's directory. PostgreSQL
 * and MariaDB (TEST_DATABASE_URL, set by the test runner from TEST_POSTGRES_URL / TEST_MARIADB_URL):
 * a new database created on that server and dropped afterwards, so test files never share state.
 */
export async function freshDatabaseUrl(
  sqliteFile: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) return { url: `sqlite:${sqliteFile}`, drop: async () => {} };
  const name = `mas_test_${randomBytes(6).toString("hex")}`;
  const url = new URL(server);
  if (/^postgres(ql)?:$/.test(url.protocol)) {
    const pg = (await import("pg")).default;
    const admin = new pg.Client({ connectionString: server });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    url.pathname = `/${name}`;
    return {
      url: url.toString(),
      drop: async () => {
        const client = new pg.Client({ connectionString: server });
        await client.connect();
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await client.end();
      },
    };
  }
  const mysql = await import("mysql2/promise");
  const admin = await mysql.createConnection({ uri: server.replace(/^mariadb:/, "mysql:") });
  await admin.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
  await admin.end();
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = await mysql.createConnection({ uri: server.replace(/^mariadb:/, "mysql:") });
      await client.query(`DROP DATABASE IF EXISTS ${name}`);
      await client.end();
    },
  };
}
