import { type Kysely, sql } from "kysely";
import type { MigrationContext, VersionedMigration } from "./types.ts";

/**
 * The admin users page over 1,000,000 users (bench/README.md, "Issue 30").
 *
 * The filter "two-factor authentication: enabled" matches few users: without an index the page
 * walked every user of the status to find them (0.12-0.2 s on SQLite). Along (deleted,
 * totp_confirmed, id) it seeks to the confirmed ones and reads them in id order.
 *
 * PostgreSQL: a search (`email LIKE '%term%'`) matching few users walked every address, 0.25 s.
 * A trigram index (pg_trgm, shipped with PostgreSQL and trusted since 13: the database's owner may
 * create it) answers it from the index. Where the extension cannot be created (not installed, or a
 * user without CREATE on the database), the search keeps the walk: the page stays correct, only
 * slower at that size.
 */
export const usersPageAtScale: VersionedMigration = {
  async up(db: Kysely<unknown>, context: MigrationContext) {
    await db.schema
      .createIndex("users_deleted_totp_id")
      .on("users")
      .columns(["deleted", "totp_confirmed", "id"])
      .execute();
    if (context.dialect !== "postgres") return;
    const { rows } = await sql<{ usable: boolean }>`
      SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm')
        OR (EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm')
            AND has_database_privilege(current_database(), 'CREATE')) AS usable`.execute(db);
    if (!rows[0]?.usable) return;
    await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm`.execute(db);
    await sql`CREATE INDEX users_email_trigrams ON users USING gin (email gin_trgm_ops)`.execute(db);
  },
};
