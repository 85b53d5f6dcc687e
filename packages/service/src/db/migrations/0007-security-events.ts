import type { Kysely } from "kysely";
import { type MigrationContext, tableOptions, type VersionedMigration, withId } from "./types.ts";

/**
 * The security event log (accounts/security-events.ts): one row per sign-in verdict and per change
 * of credentials or sessions. Its reads: newest first overall and by type (admins), by domain
 * (domain admins), by account (its owner, by id; admins and the guessing warning, by address); and
 * the daily prune by time.
 */
export const securityEvents: VersionedMigration = {
  async up(db: Kysely<unknown>, context: MigrationContext) {
    const { types } = context;
    await tableOptions(
      withId(db.schema.createTable("security_events"), context)
        .addColumn("occurred_at", types.time, (c) => c.notNull())
        .addColumn("type", "varchar(40)", (c) => c.notNull())
        .addColumn("user_id", "integer")
        .addColumn("email", types.address)
        .addColumn("domain_id", "integer")
        .addColumn("door", "varchar(16)", (c) => c.notNull())
        .addColumn("client_address", "varchar(64)")
        .addColumn("actor", types.address)
        .addColumn("detail", "varchar(1000)"),
      context,
    ).execute();
    const index = (name: string, columns: string[]) =>
      db.schema.createIndex(`security_events_${name}`).on("security_events").columns(columns).execute();
    await index("at", ["occurred_at"]);
    await index("type_at", ["type", "occurred_at"]);
    await index("user_at", ["user_id", "occurred_at"]);
    await index("email_at", ["email", "occurred_at"]);
    await index("domain_at", ["domain_id", "occurred_at"]);
  },
};
