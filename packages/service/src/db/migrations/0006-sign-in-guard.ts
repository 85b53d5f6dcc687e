import { type Kysely, sql } from "kysely";
import { type MigrationContext, tableOptions, type VersionedMigration } from "./types.ts";

/**
 * The sign-in guard (accounts/sign-in-guard.ts): a lease on a counter row marks a check in flight
 * (milliseconds, so a lease can end within the second it began), and the clients that signed in to an
 * account before, which an attacker's failures elsewhere never hold back.
 */
export const signInGuard: VersionedMigration = {
  async up(db: Kysely<unknown>, context: MigrationContext) {
    const { types } = context;
    await db.schema
      .alterTable("sign_in_failures")
      .addColumn("busy_until", types.time, (c) => c.notNull().defaultTo(sql.lit(0)))
      .execute();
    await tableOptions(
      db.schema
        .createTable("trusted_clients")
        .addColumn("account", types.address, (c) => c.notNull())
        .addColumn("client", "varchar(100)", (c) => c.notNull())
        .addColumn("last_success_at", types.time, (c) => c.notNull())
        .addPrimaryKeyConstraint("trusted_clients_pk", ["account", "client"]),
      context,
    ).execute();
    await db.schema
      .createIndex("trusted_clients_last")
      .on("trusted_clients")
      .columns(["last_success_at"])
      .execute();
  },
};
