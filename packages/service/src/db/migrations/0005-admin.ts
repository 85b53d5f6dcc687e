import type { Kysely } from "kysely";
import type { MigrationContext, VersionedMigration } from "./types.ts";

/**
 * The admin area's users page: active (or deleted) users newest first, searched by a part of the
 * address. An index on (deleted, id, email) serves both of the page's statements over 100,000
 * users: the page is read along the index in id order, the search tested on the index's address,
 * and only the matching rows are fetched; the count of matches reads the index alone
 * (bench/README.md, "The admin users page"). Without it SQLite sorted every active user for each
 * page and fetched every row to test the search: 0.2-0.3 s per page.
 */
export const admin: VersionedMigration = {
  async up(db: Kysely<unknown>, _context: MigrationContext) {
    await db.schema
      .createIndex("users_deleted_id_email")
      .on("users")
      .columns(["deleted", "id", "email"])
      .execute();
  },
};
