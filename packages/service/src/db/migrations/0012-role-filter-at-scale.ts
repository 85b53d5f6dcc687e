import type { Kysely } from "kysely";
import type { MigrationContext, VersionedMigration } from "./types.ts";

/**
 * The admin users page's role filter over 1,000,000 users (bench/README.md, "Issue 30").
 *
 * Roles are stored as JSON text and the filter was `roles LIKE '%"ROLE_X"%'`: every user read to
 * find the 1% who are spam (0.2-0.35 s). Users share a handful of distinct role strings; along
 * (roles, deleted, id) the page finds them by a few seeks, keeps those holding the role, and reads
 * each one's users as an index range in id order (admin/users.ts, `roleValues`).
 *
 * MariaDB indexes a TEXT column only by a prefix, which serves neither the seeks in order nor an
 * index-only read: there the filter keeps its walk, and no index is made.
 */
export const roleFilterAtScale: VersionedMigration = {
  async up(db: Kysely<unknown>, context: MigrationContext) {
    if (context.dialect === "mysql") return;
    await db.schema
      .createIndex("users_roles_deleted_id")
      .on("users")
      .columns(["roles", "deleted", "id"])
      .execute();
  },
};
