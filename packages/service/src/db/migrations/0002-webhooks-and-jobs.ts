import { type Kysely, sql } from "kysely";
import { type MigrationContext, tableOptions, type VersionedMigration, withId } from "./types.ts";

/** Webhook endpoints, the delivery outbox, and the claims that make scheduled jobs run once. */
export const webhooksAndJobs: VersionedMigration = {
  async up(db: Kysely<unknown>, context: MigrationContext) {
    const { types } = context;

    await tableOptions(
      withId(db.schema.createTable("webhook_endpoints"), context)
        .addColumn("url", "varchar(2048)", (c) => c.notNull())
        .addColumn("secret", "varchar(255)", (c) => c.notNull())
        .addColumn("events", "text", (c) => c.notNull())
        .addColumn("enabled", types.flag, (c) => c.notNull().defaultTo(sql.lit(true)))
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("updated_at", types.time, (c) => c.notNull()),
      context,
    ).execute();

    await tableOptions(
      db.schema
        .createTable("webhook_endpoint_domains")
        .addColumn("endpoint_id", "integer", (c) =>
          c.notNull().references("webhook_endpoints.id").onDelete("cascade"),
        )
        .addColumn("domain_id", "integer", (c) => c.notNull().references("domains.id").onDelete("cascade"))
        .addPrimaryKeyConstraint("webhook_endpoint_domains_pk", ["endpoint_id", "domain_id"]),
      context,
    ).execute();

    await tableOptions(
      db.schema
        .createTable("webhook_deliveries")
        .addColumn("id", "varchar(26)", (c) => c.primaryKey())
        .addColumn("endpoint_id", "integer", (c) =>
          c.notNull().references("webhook_endpoints.id").onDelete("cascade"),
        )
        .addColumn("type", "varchar(100)", (c) => c.notNull())
        .addColumn("body", "text", (c) => c.notNull())
        .addColumn("signature", "varchar(64)", (c) => c.notNull())
        .addColumn("status", "varchar(16)", (c) => c.notNull())
        .addColumn("attempts", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("next_attempt_at", types.time)
        .addColumn("claimed_until", types.time)
        .addColumn("claim_token", "varchar(36)")
        .addColumn("response_code", "integer")
        .addColumn("response_body", "text")
        .addColumn("error", "text")
        .addColumn("created_at", types.time, (c) => c.notNull())
        .addColumn("delivered_at", types.time),
      context,
    ).execute();
    await db.schema
      .createIndex("webhook_deliveries_due")
      .on("webhook_deliveries")
      .columns(["status", "next_attempt_at"])
      .execute();
    await db.schema
      .createIndex("webhook_deliveries_endpoint")
      .on("webhook_deliveries")
      .columns(["endpoint_id", "status", "created_at"])
      .execute();

    await tableOptions(
      db.schema
        .createTable("job_runs")
        .addColumn("name", "varchar(100)", (c) => c.primaryKey())
        .addColumn("period_start", types.time, (c) => c.notNull())
        .addColumn("started_at", types.time, (c) => c.notNull())
        .addColumn("finished_at", types.time)
        .addColumn("owner", "varchar(64)", (c) => c.notNull())
        .addColumn("result", "text"),
      context,
    ).execute();
  },
};
