import { type Kysely, sql } from "kysely";
import { type MigrationContext, tableOptions, type VersionedMigration, withId } from "./types.ts";

/**
 * What the web interface needs: invitations (per-domain settings and invite codes), reserved names,
 * the random flag and note of aliases, sessions, sign-in throttling shared by every instance, the
 * e-mail outbox and the audit log of admin actions.
 */
export const people: VersionedMigration = {
  async up(db: Kysely<unknown>, context: MigrationContext) {
    const { types } = context;

    await db.schema
      .alterTable("domains")
      .addColumn("invitation_enabled", types.flag, (c) => c.notNull().defaultTo(sql.lit(false)))
      .execute();
    await db.schema
      .alterTable("domains")
      .addColumn("invitation_limit", "integer", (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .alterTable("domains")
      .addColumn("invitation_waiting_period_days", "integer", (c) => c.notNull().defaultTo(7))
      .execute();

    await db.schema
      .alterTable("aliases")
      .addColumn("random", types.flag, (c) => c.notNull().defaultTo(sql.lit(false)))
      .execute();
    await db.schema.alterTable("aliases").addColumn("note", "varchar(255)").execute();

    await tableOptions(
      withId(db.schema.createTable("invite_codes"), context)
        .addColumn("code", "varchar(32)", (c) => c.notNull().unique())
        .addColumn("domain_id", "integer", (c) => c.notNull().references("domains.id").onDelete("cascade"))
        .addColumn("user_id", "integer", (c) => c.references("users.id").onDelete("set null"))
        .addColumn("redeemed_at", types.time)
        .addColumn("redeemed_by_id", "integer", (c) => c.references("users.id").onDelete("set null"))
        .addColumn("created_at", types.time, (c) => c.notNull()),
      context,
    ).execute();
    await db.schema.createIndex("invite_codes_user").on("invite_codes").columns(["user_id"]).execute();
    await db.schema
      .createIndex("invite_codes_domain_redeemed")
      .on("invite_codes")
      .columns(["domain_id", "redeemed_at"])
      .execute();

    await tableOptions(
      withId(db.schema.createTable("reserved_names"), context)
        .addColumn("name", types.address, (c) => c.notNull().unique())
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("updated_at", types.time, (c) => c.notNull()),
      context,
    ).execute();
    const now = Math.floor(Date.now() / 1000);
    await (db as Kysely<{ reserved_names: { name: string; created_at: number; updated_at: number } }>)
      .insertInto("reserved_names")
      .values(["abuse", "postmaster"].map((name) => ({ name, created_at: now, updated_at: now })))
      .execute();

    await tableOptions(
      db.schema
        .createTable("web_sessions")
        .addColumn("id_hash", "char(64)", (c) => c.primaryKey())
        .addColumn("user_id", "integer", (c) => c.notNull().references("users.id").onDelete("cascade"))
        .addColumn("stage", "varchar(16)", (c) => c.notNull())
        .addColumn("data", "text", (c) => c.notNull())
        .addColumn("client_address", "varchar(64)")
        .addColumn("user_agent", "varchar(255)")
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("last_seen_at", types.time, (c) => c.notNull()),
      context,
    ).execute();
    await db.schema.createIndex("web_sessions_user").on("web_sessions").columns(["user_id"]).execute();
    await db.schema
      .createIndex("web_sessions_last_seen")
      .on("web_sessions")
      .columns(["last_seen_at"])
      .execute();

    await tableOptions(
      db.schema
        .createTable("sign_in_failures")
        .addColumn("subject", "varchar(320)", (c) => c.primaryKey())
        .addColumn("failures", "integer", (c) => c.notNull())
        .addColumn("last_failure_at", types.time, (c) => c.notNull())
        .addColumn("blocked_until", types.time, (c) => c.notNull()),
      context,
    ).execute();
    await db.schema
      .createIndex("sign_in_failures_last")
      .on("sign_in_failures")
      .columns(["last_failure_at"])
      .execute();

    await tableOptions(
      db.schema
        .createTable("mail_outbox")
        .addColumn("id", "varchar(26)", (c) => c.primaryKey())
        .addColumn("recipient", types.address, (c) => c.notNull())
        .addColumn("subject", "varchar(998)", (c) => c.notNull())
        .addColumn("body", "text", (c) => c.notNull())
        .addColumn("status", "varchar(16)", (c) => c.notNull())
        .addColumn("attempts", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("next_attempt_at", types.time)
        .addColumn("claimed_until", types.time)
        .addColumn("claim_token", "varchar(36)")
        .addColumn("error", "text")
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("sent_at", types.time),
      context,
    ).execute();
    await db.schema
      .createIndex("mail_outbox_due")
      .on("mail_outbox")
      .columns(["status", "next_attempt_at"])
      .execute();

    await tableOptions(
      withId(db.schema.createTable("audit_log"), context)
        .addColumn("at", types.time, (c) => c.notNull())
        .addColumn("actor", types.address, (c) => c.notNull())
        .addColumn("actor_domain_id", "integer")
        .addColumn("action", "varchar(64)", (c) => c.notNull())
        .addColumn("target", types.address)
        .addColumn("target_domain_id", "integer")
        .addColumn("detail", "text")
        .addColumn("client_address", "varchar(64)"),
      context,
    ).execute();
    await db.schema.createIndex("audit_log_at").on("audit_log").columns(["at"]).execute();
    await db.schema
      .createIndex("audit_log_domain_at")
      .on("audit_log")
      .columns(["target_domain_id", "at"])
      .execute();
  },
};
