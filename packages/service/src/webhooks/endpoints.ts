import { randomBytes } from "node:crypto";
import type { Kysely, Transaction } from "kysely";
import { managedDomain } from "../accounts/queries.ts";
import { flagInvalid, nowSeconds, parseStringList } from "../accounts/users.ts";
import { insertReturningId } from "../db/insert.ts";
import { type Database, type DeliveryStatus, flag } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { isWebhookEvent, type WebhookEvent, webhookEvents } from "./payload.ts";

export interface WebhookEndpoint {
  id: number;
  url: string;
  events: WebhookEvent[];
  domains: string[];
  enabled: boolean;
  createdAt: number;
  updatedAt: number;
}

export interface WebhookDelivery {
  id: string;
  endpointId: number;
  type: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: number | null;
  responseCode: number | null;
  responseBody: string | null;
  error: string | null;
  createdAt: number;
  deliveredAt: number | null;
  body: string;
}

/** An endpoint as the admin API and the console describe it; each value is still checked here. */
export interface WebhookInput {
  url?: string;
  events?: string[];
  secret?: string | null;
  domains?: string[] | null;
  enabled?: boolean;
}

export const checkUrl = (value: unknown): string => {
  if (typeof value !== "string" || value.length > 2048) throw webhookUrlInvalid();
  try {
    const url = new URL(value);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error();
    return url.toString();
  } catch {
    throw webhookUrlInvalid();
  }
};

export const webhookNotFound = refusal("webhook.not_found", "not_found", () => "webhook not found");
export const deliveryNotFound = refusal(
  "webhook.delivery_not_found",
  "not_found",
  () => "delivery not found",
);
export const webhookUrlInvalid = refusal(
  "webhook.url_invalid",
  "invalid",
  () => "url: must be an http(s) URL",
);
export const webhookEventsEmpty = refusal<{ known: string }>(
  "webhook.events_empty",
  "invalid",
  ({ known }) => `events: must list at least one of ${known}`,
);
export const webhookEventUnknown = refusal<{ event: string; known: string }>(
  "webhook.event_unknown",
  "invalid",
  ({ event, known }) => `events: unknown event ${event} (known: ${known})`,
);
export const webhookSecretLength = refusal(
  "webhook.secret_length",
  "invalid",
  () => "secret: must be 16 to 255 characters",
);
export const deliveryNotFailed = refusal<{ status: string }>(
  "webhook.delivery_not_failed",
  "conflict",
  ({ status }) => `delivery is ${status}; only failed deliveries can be retried`,
);
export const webhookDisabled = refusal<{ id: number }>(
  "webhook.disabled",
  "conflict",
  ({ id }) => `webhook endpoint ${id} is disabled; enable it before retrying its deliveries`,
);
export const webhookDomainsNotList = refusal(
  "webhook.domains_not_list",
  "invalid",
  () => "domains: must be a list of domain names",
);
export const webhookDomainNotManaged = refusal<{ domain: string }>(
  "webhook.domain_not_managed",
  "invalid",
  ({ domain }) => `domains: ${domain} is not a managed domain`,
);

export const checkEvents = (value: unknown): WebhookEvent[] => {
  if (!Array.isArray(value) || value.length === 0) {
    throw webhookEventsEmpty({ known: webhookEvents.join(", ") });
  }
  const events: WebhookEvent[] = [];
  for (const event of value) {
    if (typeof event !== "string" || !isWebhookEvent(event)) {
      throw webhookEventUnknown({ event: String(event).slice(0, 50), known: webhookEvents.join(", ") });
    }
    if (!events.includes(event)) events.push(event);
  }
  return events;
};

export const checkSecret = (value: unknown): string => {
  if (typeof value !== "string" || value.length < 16 || value.length > 255) {
    throw webhookSecretLength();
  }
  return value;
};

const checkEnabled = (value: unknown): boolean => {
  if (typeof value !== "boolean") throw flagInvalid({ field: "enabled" });
  return value;
};

/** Webhook endpoints (URL, events, secret, optional domain filter) and their delivery log. */
export class WebhookService {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** Creates an endpoint; a random secret is made when none is given and returned once. */
  async create(
    input: WebhookInput,
    trx?: Transaction<Database>,
  ): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    if (!trx) return this.#db.transaction().execute((t) => this.create(input, t));
    const url = checkUrl(input.url);
    const events = checkEvents(input.events);
    const secret =
      input.secret === undefined || input.secret === null
        ? randomBytes(32).toString("hex")
        : checkSecret(input.secret);
    const enabled = input.enabled === undefined ? true : checkEnabled(input.enabled);
    const domainIds = await this.#domainIds(input.domains, trx);
    const now = nowSeconds();
    const id = await insertReturningId(trx, "webhook_endpoints", {
      url,
      secret,
      events: JSON.stringify(events),
      enabled: enabled ? 1 : 0,
      created_at: now,
      updated_at: now,
    });
    for (const domainId of domainIds) {
      await trx
        .insertInto("webhook_endpoint_domains")
        .values({ endpoint_id: id, domain_id: domainId })
        .execute();
    }
    return { endpoint: await this.get(id, trx), secret };
  }

  async list(): Promise<WebhookEndpoint[]> {
    const rows = await this.#db.selectFrom("webhook_endpoints").selectAll().orderBy("id").execute();
    const domains = await this.#domainsByEndpoint();
    return rows.map((row) => toEndpoint(row, domains.get(row.id) ?? []));
  }

  async get(id: number, db: Kysely<Database> = this.#db): Promise<WebhookEndpoint> {
    const row = await db.selectFrom("webhook_endpoints").selectAll().where("id", "=", id).executeTakeFirst();
    if (!row) throw webhookNotFound();
    return toEndpoint(row, (await this.#domainsByEndpoint(id, db)).get(id) ?? []);
  }

  async update(id: number, input: WebhookInput, trx?: Transaction<Database>): Promise<WebhookEndpoint> {
    if (!trx) return this.#db.transaction().execute((t) => this.update(id, input, t));
    await this.get(id, trx);
    const changes: Partial<{ url: string; events: string; secret: string; enabled: 0 | 1 }> = {};
    if (input.url !== undefined) changes.url = checkUrl(input.url);
    if (input.events !== undefined) changes.events = JSON.stringify(checkEvents(input.events));
    if (input.secret !== undefined) changes.secret = checkSecret(input.secret);
    if (input.enabled !== undefined) changes.enabled = checkEnabled(input.enabled) ? 1 : 0;
    const domainIds = input.domains === undefined ? null : await this.#domainIds(input.domains, trx);
    await trx
      .updateTable("webhook_endpoints")
      .set({ ...changes, updated_at: nowSeconds() })
      .where("id", "=", id)
      .execute();
    if (domainIds !== null) {
      await trx.deleteFrom("webhook_endpoint_domains").where("endpoint_id", "=", id).execute();
      for (const domainId of domainIds) {
        await trx
          .insertInto("webhook_endpoint_domains")
          .values({ endpoint_id: id, domain_id: domainId })
          .execute();
      }
    }
    return this.get(id, trx);
  }

  async delete(id: number, db: Kysely<Database> = this.#db): Promise<void> {
    const result = await db.deleteFrom("webhook_endpoints").where("id", "=", id).executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) throw webhookNotFound();
  }

  async deliveries(
    endpointId: number,
    filter: { status?: DeliveryStatus; type?: string; limit: number; offset: number },
  ): Promise<{ items: WebhookDelivery[]; total: number }> {
    await this.get(endpointId);
    let query = this.#db.selectFrom("webhook_deliveries").where("endpoint_id", "=", endpointId);
    if (filter.status) query = query.where("status", "=", filter.status);
    if (filter.type) query = query.where("type", "=", filter.type);
    const [rows, count] = await Promise.all([
      query
        .selectAll()
        .orderBy("created_at", "desc")
        .orderBy("id", "desc")
        .limit(filter.limit)
        .offset(filter.offset)
        .execute(),
      query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    ]);
    return { items: rows.map(toDelivery), total: Number(count.n) };
  }

  /** One delivery, as the log shows it. */
  async delivery(deliveryId: string): Promise<WebhookDelivery & { signature: string }> {
    const row = await this.#db
      .selectFrom("webhook_deliveries")
      .selectAll()
      .where("id", "=", deliveryId)
      .executeTakeFirst();
    if (!row) throw deliveryNotFound();
    return { ...toDelivery(row), signature: row.signature };
  }

  /** Deliveries waiting to be sent (pending) and given up (failed), over every endpoint. */
  async backlog(): Promise<{ pending: number; failed: number }> {
    const rows = await this.#db
      .selectFrom("webhook_deliveries")
      .select(["status", (eb) => eb.fn.countAll<number>().as("n")])
      .where("status", "in", ["pending", "failed"])
      .groupBy("status")
      .execute();
    const of = (status: DeliveryStatus) => Number(rows.find((row) => row.status === status)?.n ?? 0);
    return { pending: of("pending"), failed: of("failed") };
  }

  /**
   * A failed delivery is queued again now; the same bytes and signature are sent. Not while its
   * endpoint is disabled: the worker would hold it anyway, so the caller is told instead.
   */
  async retry(deliveryId: string, db: Kysely<Database> = this.#db): Promise<WebhookDelivery> {
    const row = await db
      .selectFrom("webhook_deliveries")
      .innerJoin("webhook_endpoints", "webhook_endpoints.id", "webhook_deliveries.endpoint_id")
      .selectAll("webhook_deliveries")
      .select("webhook_endpoints.enabled")
      .where("webhook_deliveries.id", "=", deliveryId)
      .executeTakeFirst();
    if (!row) throw deliveryNotFound();
    if (row.status !== "failed") throw deliveryNotFailed({ status: row.status });
    if (!flag(row.enabled)) throw webhookDisabled({ id: row.endpoint_id });
    await db
      .updateTable("webhook_deliveries")
      .set({ status: "pending", next_attempt_at: nowSeconds(), claimed_until: null, claim_token: null })
      .where("id", "=", deliveryId)
      .where("status", "=", "failed")
      .execute();
    const updated = await db
      .selectFrom("webhook_deliveries")
      .selectAll()
      .where("id", "=", deliveryId)
      .executeTakeFirstOrThrow();
    return toDelivery(updated);
  }

  /** Successful deliveries older than the retention period are removed; failed ones stay for inspection. */
  async pruneDelivered(olderThanDays = 14, now = nowSeconds()): Promise<number> {
    const result = await this.#db
      .deleteFrom("webhook_deliveries")
      .where("status", "=", "success")
      .where("created_at", "<", now - olderThanDays * 86400)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  async #domainIds(value: unknown, db: Kysely<Database>): Promise<number[]> {
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) throw webhookDomainsNotList();
    const ids: number[] = [];
    for (const raw of value) {
      const row = typeof raw === "string" ? await managedDomain(db, raw) : null;
      if (!row) throw webhookDomainNotManaged({ domain: String(raw).slice(0, 100) });
      if (!ids.includes(row.id)) ids.push(row.id);
    }
    return ids;
  }

  async #domainsByEndpoint(
    endpointId?: number,
    db: Kysely<Database> = this.#db,
  ): Promise<Map<number, string[]>> {
    let query = db
      .selectFrom("webhook_endpoint_domains")
      .innerJoin("domains", "domains.id", "webhook_endpoint_domains.domain_id")
      .select(["webhook_endpoint_domains.endpoint_id", "domains.name"]);
    if (endpointId !== undefined)
      query = query.where("webhook_endpoint_domains.endpoint_id", "=", endpointId);
    const map = new Map<number, string[]>();
    for (const row of await query.orderBy("domains.name").execute()) {
      map.set(row.endpoint_id, [...(map.get(row.endpoint_id) ?? []), row.name]);
    }
    return map;
  }
}

function toEndpoint(
  row: {
    id: number;
    url: string;
    events: string;
    enabled: boolean | number;
    created_at: number;
    updated_at: number;
  },
  domains: string[],
): WebhookEndpoint {
  return {
    id: row.id,
    url: row.url,
    events: parseStringList(row.events).filter(isWebhookEvent),
    domains,
    enabled: flag(row.enabled),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toDelivery(row: {
  id: string;
  endpoint_id: number;
  type: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: number | null;
  response_code: number | null;
  response_body: string | null;
  error: string | null;
  created_at: number;
  delivered_at: number | null;
  body: string;
}): WebhookDelivery {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    type: row.type,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.next_attempt_at,
    responseCode: row.response_code,
    responseBody: row.response_body,
    error: row.error,
    createdAt: row.created_at,
    deliveredAt: row.delivered_at,
    body: row.body,
  };
}
