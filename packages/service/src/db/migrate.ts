import type { Kysely } from "kysely";
import { type Migration, type MigrationResultSet, Migrator } from "kysely/migration";
import type { DatabaseHandle } from "./database.ts";
import { migrations } from "./migrations/index.ts";
import { columnTypes } from "./migrations/types.ts";

/**
 * Brings the schema up to date. Kysely's migrator takes a lock first (an advisory lock on
 * PostgreSQL, GET_LOCK on MariaDB, the single writer on SQLite), so instances starting together
 * apply each migration once.
 */
export async function migrateToLatest(handle: DatabaseHandle): Promise<string[]> {
  const context = { dialect: handle.dialect, types: columnTypes(handle.dialect) };
  const provider = {
    async getMigrations(): Promise<Record<string, Migration>> {
      return Object.fromEntries(
        Object.entries(migrations).map(([name, migration]) => [
          name,
          { up: (db: Kysely<unknown>) => migration.up(db, context) },
        ]),
      );
    },
  };
  const migrator = new Migrator({
    db: handle.db,
    provider,
    migrationTableName: "schema_migrations",
    migrationLockTableName: "schema_migrations_lock",
  });
  const result: MigrationResultSet = await migrator.migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === "Error")?.migrationName ?? "unknown";
    throw new Error(`migration ${failed} failed: ${String((result.error as Error).message ?? result.error)}`);
  }
  return (result.results ?? []).filter((r) => r.status === "Success").map((r) => r.migrationName);
}
