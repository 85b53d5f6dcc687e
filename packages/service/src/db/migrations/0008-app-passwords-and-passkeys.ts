import { type Kysely, sql } from "kysely";
import { type MigrationContext, tableOptions, type VersionedMigration, withId } from "./types.ts";

/**
 * App passwords (accounts/app-passwords.ts) and passkeys (accounts/passkeys.ts).
 *
 * An app password is found by its keyed hash (unique); each holds its own secret box of the user's
 * MailCrypt private key (null when the user has no keys). A user's list is read by `user_id`.
 * "Mail apps must use app passwords" is a per-user choice (null: the domain's default) over a
 * per-domain default (off, so no client breaks on upgrade).
 *
 * A passkey is a WebAuthn credential: its id (base64url, unique: a sign-in with a discoverable
 * credential finds the user by it), COSE public key, signature counter and transports. Users who
 * turned it on may sign in with a passkey alone.
 */
export const appPasswordsAndPasskeys: VersionedMigration = {
  async up(db: Kysely<unknown>, context: MigrationContext) {
    const { types } = context;
    await tableOptions(
      withId(db.schema.createTable("app_passwords"), context)
        .addColumn("user_id", "integer", (c) => c.notNull())
        .addColumn("name", "varchar(64)", (c) => c.notNull())
        .addColumn("scope", "varchar(16)", (c) => c.notNull())
        .addColumn("lookup_hash", "varchar(64)", (c) => c.notNull())
        .addColumn("secret_box", "text")
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("last_used_at", types.time)
        .addColumn("last_used_address", "varchar(64)"),
      context,
    ).execute();
    await db.schema
      .createIndex("app_passwords_lookup")
      .unique()
      .on("app_passwords")
      .columns(["lookup_hash"])
      .execute();
    await db.schema
      .createIndex("app_passwords_user")
      .on("app_passwords")
      .columns(["user_id", "id"])
      .execute();

    await tableOptions(
      withId(db.schema.createTable("passkeys"), context)
        .addColumn("user_id", "integer", (c) => c.notNull())
        .addColumn("credential_id", "varchar(255)", (c) => c.notNull())
        .addColumn("public_key", "text", (c) => c.notNull())
        .addColumn("counter", types.time, (c) => c.notNull().defaultTo(0))
        .addColumn("transports", "varchar(255)", (c) => c.notNull().defaultTo("[]"))
        .addColumn("name", "varchar(64)", (c) => c.notNull())
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("last_used_at", types.time),
      context,
    ).execute();
    await db.schema
      .createIndex("passkeys_credential")
      .unique()
      .on("passkeys")
      .columns(["credential_id"])
      .execute();
    await db.schema.createIndex("passkeys_user").on("passkeys").columns(["user_id", "id"]).execute();

    await db.schema.alterTable("users").addColumn("app_passwords_required", types.flag).execute();
    await db.schema
      .alterTable("users")
      .addColumn("passkey_sign_in", types.flag, (c) => c.notNull().defaultTo(sql.lit(false)))
      .execute();
    // Whether the account password may have the app-password form: unknown (so yes) for every
    // password set before, and for imported hashes; no for each one the policy checked since.
    await db.schema
      .alterTable("users")
      .addColumn("password_app_form", types.flag, (c) => c.notNull().defaultTo(sql.lit(true)))
      .execute();
    await db.schema
      .alterTable("domains")
      .addColumn("app_passwords_required", types.flag, (c) => c.notNull().defaultTo(sql.lit(false)))
      .execute();
  },
};
