import type { Kysely } from "kysely";
import type { MigrationContext, VersionedMigration } from "./types.ts";

/**
 * `users.secret_box_binding`: the digest of the password hash and the MailCrypt secret box, written
 * once the box was seen to open with the password the hash verified (credentials/password-check.ts).
 * While it matches both, the box alone checks the password: one Argon2 derivation per sign-in
 * instead of two. Null for every account until its first right sign-in, and whenever the hash or
 * the box changes without a new binding.
 */
export const secretBoxBinding: VersionedMigration = {
  async up(db: Kysely<unknown>, _context: MigrationContext) {
    await db.schema.alterTable("users").addColumn("secret_box_binding", "varchar(64)").execute();
  },
};
