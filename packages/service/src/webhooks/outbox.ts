import type { Transaction } from "kysely";
import type { AccountEvents, AccountEventType } from "../accounts/events.ts";
import { parseStringList } from "../accounts/users.ts";
import type { Database } from "../db/schema.ts";
import { ulid } from "../db/ulid.ts";
import { signWebhookBody, webhookBody } from "./payload.ts";

/**
 * The durable outbox: an account change writes one delivery row per subscribed endpoint inside
 * its own transaction, so an event exists exactly when the change does; the worker sends it later.
 */
export class WebhookOutbox implements AccountEvents {
  readonly #clock: () => number;

  constructor(clock: () => number = Date.now) {
    this.#clock = clock;
  }

  async record(
    trx: Transaction<Database>,
    type: AccountEventType,
    user: { email: string; domainId: number },
  ) {
    const endpoints = await trx
      .selectFrom("webhook_endpoints")
      .select(["id", "secret", "events"])
      .where("enabled", "=", 1)
      .execute();
    if (endpoints.length === 0) return;
    const filters = await trx
      .selectFrom("webhook_endpoint_domains")
      .select(["endpoint_id", "domain_id"])
      .where(
        "endpoint_id",
        "in",
        endpoints.map((e) => e.id),
      )
      .execute();
    const now = this.#clock();
    const body = webhookBody(type, user.email, new Date(now));
    const seconds = Math.floor(now / 1000);
    for (const endpoint of endpoints) {
      const events = parseStringList(endpoint.events);
      if (events.length > 0 && !events.includes(type)) continue;
      const domains = filters.filter((f) => f.endpoint_id === endpoint.id).map((f) => f.domain_id);
      if (domains.length > 0 && !domains.includes(user.domainId)) continue;
      await trx
        .insertInto("webhook_deliveries")
        .values({
          id: ulid(now),
          endpoint_id: endpoint.id,
          type,
          body,
          signature: signWebhookBody(body, endpoint.secret),
          status: "pending",
          attempts: 0,
          next_attempt_at: seconds,
          claimed_until: null,
          claim_token: null,
          response_code: null,
          response_body: null,
          error: null,
          created_at: seconds,
          delivered_at: null,
        })
        .execute();
    }
  }
}
