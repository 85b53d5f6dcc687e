import { type Kysely, sql } from "kysely";
import { type MigrationContext, tableOptions, type VersionedMigration, withId } from "./types.ts";

/** Accounts, credentials, tokens, OpenPGP keys and settings. */
export const initial: VersionedMigration = {
  async up(db: Kysely<unknown>, context: MigrationContext) {
    const { types } = context;

    await tableOptions(
      withId(db.schema.createTable("domains"), context)
        .addColumn("name", types.address, (c) => c.notNull().unique())
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("updated_at", types.time, (c) => c.notNull()),
      context,
    ).execute();

    await tableOptions(
      withId(db.schema.createTable("users"), context)
        .addColumn("email", types.address, (c) => c.notNull().unique())
        .addColumn("domain_id", "integer", (c) => c.notNull().references("domains.id").onDelete("cascade"))
        .addColumn("password", "varchar(255)", (c) => c.notNull())
        .addColumn("roles", "text", (c) => c.notNull())
        .addColumn("password_change_required", types.flag, (c) => c.notNull().defaultTo(sql.lit(false)))
        .addColumn("quota", "integer")
        .addColumn("smtp_quota_per_hour", "integer")
        .addColumn("smtp_quota_per_day", "integer")
        .addColumn("mail_crypt", types.flag, (c) => c.notNull().defaultTo(sql.lit(false)))
        .addColumn("mail_crypt_public_key", "text")
        .addColumn("mail_crypt_secret_box", "text")
        .addColumn("recovery_secret_box", "text")
        .addColumn("recovery_start_time", types.time)
        .addColumn("totp_secret", "varchar(255)")
        .addColumn("totp_confirmed", types.flag, (c) => c.notNull().defaultTo(sql.lit(false)))
        .addColumn("totp_backup_codes", "text", (c) => c.notNull())
        .addColumn("totp_last_step", types.time)
        .addColumn("last_login_time", types.time)
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("updated_at", types.time, (c) => c.notNull())
        .addColumn("deleted", types.flag, (c) => c.notNull().defaultTo(sql.lit(false))),
      context,
    ).execute();
    await db.schema
      .createIndex("users_domain_deleted")
      .on("users")
      .columns(["domain_id", "deleted"])
      .execute();
    await db.schema
      .createIndex("users_deleted_last_login")
      .on("users")
      .columns(["deleted", "last_login_time"])
      .execute();

    await tableOptions(
      withId(db.schema.createTable("aliases"), context)
        .addColumn("source", types.address, (c) => c.notNull().unique())
        .addColumn("domain_id", "integer", (c) => c.notNull().references("domains.id").onDelete("cascade"))
        .addColumn("destinations", "text", (c) => c.notNull())
        .addColumn("user_id", "integer", (c) => c.references("users.id").onDelete("set null"))
        .addColumn("smtp_quota_per_hour", "integer")
        .addColumn("smtp_quota_per_day", "integer")
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("updated_at", types.time, (c) => c.notNull())
        .addColumn("deleted", types.flag, (c) => c.notNull().defaultTo(sql.lit(false))),
      context,
    ).execute();
    await db.schema
      .createIndex("aliases_user_deleted")
      .on("aliases")
      .columns(["user_id", "deleted"])
      .execute();
    await db.schema
      .createIndex("aliases_domain_deleted")
      .on("aliases")
      .columns(["domain_id", "deleted"])
      .execute();

    await tableOptions(
      withId(db.schema.createTable("api_tokens"), context)
        .addColumn("name", "varchar(255)", (c) => c.notNull())
        .addColumn("scopes", "text", (c) => c.notNull())
        .addColumn("token_hash", "char(64)", (c) => c.notNull().unique())
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("last_used_at", types.time),
      context,
    ).execute();

    await tableOptions(
      withId(db.schema.createTable("openpgp_keys"), context)
        .addColumn("email", types.address, (c) => c.notNull().unique())
        .addColumn("domain_id", "integer", (c) => c.notNull().references("domains.id").onDelete("cascade"))
        .addColumn("key_id", "varchar(16)", (c) => c.notNull())
        .addColumn("fingerprint", "varchar(64)", (c) => c.notNull())
        .addColumn("expires_at", types.time)
        .addColumn("key_data", "text", (c) => c.notNull())
        .addColumn("wkd_hash", "varchar(32)", (c) => c.notNull())
        .addColumn("uploader_id", "integer", (c) => c.references("users.id").onDelete("set null"))
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("updated_at", types.time, (c) => c.notNull()),
      context,
    ).execute();
    await db.schema
      .createIndex("openpgp_keys_domain_wkd")
      .on("openpgp_keys")
      .columns(["domain_id", "wkd_hash"])
      .execute();

    await tableOptions(
      db.schema
        .createTable("settings")
        .addColumn("name", "varchar(100)", (c) => c.primaryKey())
        .addColumn("value", "text", (c) => c.notNull())
        .addColumn("updated_at", types.time, (c) => c.notNull()),
      context,
    ).execute();
  },
};
