import type { Kysely } from "kysely";
import type { MigrationContext, VersionedMigration } from "./types.ts";

/**
 * The admin users page's filter "two-factor authentication: enabled": few users have it, so
 * without an index the page walked every user of the status to find them (0.12-0.2 s over
 * 1,000,000 users on SQLite, bench/README.md "Issue 30"). Along (deleted, totp_confirmed, id) the
 * page seeks to the confirmed ones and reads them in id order.
 */
export const usersTwoFactorFilter: VersionedMigration = {
  async up(db: Kysely<unknown>, _context: MigrationContext) {
    await db.schema
      .createIndex("users_deleted_totp_id")
      .on("users")
      .columns(["deleted", "totp_confirmed", "id"])
      .execute();
  },
};
