import type { Kysely } from "kysely";
import { type MigrationContext, tableOptions, type VersionedMigration, withId } from "./types.ts";

/**
 * The WebAuthn challenges handed out and not yet answered (accounts/passkeys.ts). A challenge is
 * used up by deleting its row: of two answers racing with one challenge only one deletes it, on
 * any instance. A sign-in with a passkey alone starts before any web session exists, so the
 * challenges live here rather than in a session's data. `user_id` binds a challenge to the user it
 * was made for (registration, second factor); null for a sign-in that does not know its user yet.
 */
export const passkeyChallenges: VersionedMigration = {
  async up(db: Kysely<unknown>, context: MigrationContext) {
    const { types } = context;
    await tableOptions(
      withId(db.schema.createTable("passkey_challenges"), context)
        .addColumn("challenge", "varchar(64)", (c) => c.notNull())
        .addColumn("purpose", "varchar(16)", (c) => c.notNull())
        .addColumn("user_id", "integer")
        .addColumn("expires_at", types.time, (c) => c.notNull()),
      context,
    ).execute();
    await db.schema
      .createIndex("passkey_challenges_challenge")
      .unique()
      .on("passkey_challenges")
      .columns(["challenge"])
      .execute();
    await db.schema
      .createIndex("passkey_challenges_expiry")
      .on("passkey_challenges")
      .columns(["expires_at"])
      .execute();
    // The open sign-in challenges are counted (a bound on what anyone may be handed).
    await db.schema
      .createIndex("passkey_challenges_purpose")
      .on("passkey_challenges")
      .columns(["purpose", "expires_at"])
      .execute();
  },
};
