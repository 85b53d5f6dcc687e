import type { Kysely } from "kysely";
import { type Actor, assertMay } from "../accounts/admin-scope.ts";
import type { AuditLog } from "../accounts/audit-log.ts";
import type { Settings, SettingsService } from "../accounts/settings.ts";
import type { Database, DeliveryStatus } from "../db/schema.ts";
import type { ApiToken, CreatedToken, TokenService } from "../tokens/tokens.ts";
import type {
  WebhookDelivery,
  WebhookEndpoint,
  WebhookInput,
  WebhookService,
} from "../webhooks/endpoints.ts";

/**
 * What belongs to the whole installation, for admins only: settings, API tokens and webhooks.
 * Each change goes through the service the admin API and the console use and is written to the
 * audit log, with the changed values but never a token or secret.
 */
export class AdminSettings {
  readonly #db: Kysely<Database>;
  readonly #settings: SettingsService;
  readonly #audit: AuditLog;

  constructor(db: Kysely<Database>, settings: SettingsService, audit: AuditLog) {
    this.#db = db;
    this.#settings = settings;
    this.#audit = audit;
  }

  async all(actor: Actor): Promise<Settings> {
    assertMay(actor, { kind: "area", area: "settings" });
    return this.#settings.all();
  }

  /** The admin API's rule: every value checked first, then all written or none. */
  async update(
    actor: Actor,
    values: Readonly<Record<string, string | number | boolean | null | undefined>>,
  ): Promise<Settings> {
    return this.#db.transaction().execute(async (trx) => {
      assertMay(actor, { kind: "area", area: "settings" });
      const before = await this.#settings.all(trx);
      const after = await this.#settings.update(values, trx);
      const changes: Record<string, { from: unknown; to: unknown }> = {};
      for (const name of Object.keys(after) as (keyof Settings)[])
        if (before[name] !== after[name]) changes[name] = { from: before[name], to: after[name] };
      if (Object.keys(changes).length > 0)
        await this.#audit.record(
          actor,
          { action: "settings.update", target: "settings", detail: changes },
          trx,
        );
      return after;
    });
  }
}

export class AdminTokens {
  readonly #db: Kysely<Database>;
  readonly #tokens: TokenService;
  readonly #audit: AuditLog;

  constructor(db: Kysely<Database>, tokens: TokenService, audit: AuditLog) {
    this.#db = db;
    this.#tokens = tokens;
    this.#audit = audit;
  }

  async list(actor: Actor): Promise<ApiToken[]> {
    assertMay(actor, { kind: "area", area: "api-tokens" });
    return this.#tokens.list();
  }

  /** A new token; the plain token is returned once and never logged. */
  async create(actor: Actor, name: unknown, scopes: unknown): Promise<CreatedToken> {
    return this.#db.transaction().execute(async (trx) => {
      assertMay(actor, { kind: "area", area: "api-tokens" });
      const created = await this.#tokens.create(name, scopes, trx);
      await this.#audit.record(
        actor,
        {
          action: "api-token.create",
          target: `api-token:${created.token.name}`,
          detail: { id: created.token.id, scopes: created.token.scopes },
        },
        trx,
      );
      return created;
    });
  }

  async delete(actor: Actor, id: number): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      assertMay(actor, { kind: "area", area: "api-tokens" });
      const token = (await this.#tokens.list(trx)).find((t) => t.id === id);
      await this.#tokens.delete(id, trx);
      await this.#audit.record(
        actor,
        {
          action: "api-token.delete",
          target: `api-token:${token?.name ?? id}`,
          detail: { id, scopes: token?.scopes ?? [] },
        },
        trx,
      );
    });
  }
}

export class AdminWebhooks {
  readonly #db: Kysely<Database>;
  readonly #webhooks: WebhookService;
  readonly #audit: AuditLog;

  constructor(db: Kysely<Database>, webhooks: WebhookService, audit: AuditLog) {
    this.#db = db;
    this.#webhooks = webhooks;
    this.#audit = audit;
  }

  #check(actor: Actor) {
    assertMay(actor, { kind: "area", area: "webhooks" });
  }

  async list(actor: Actor): Promise<WebhookEndpoint[]> {
    this.#check(actor);
    return this.#webhooks.list();
  }

  async get(actor: Actor, id: number): Promise<WebhookEndpoint> {
    this.#check(actor);
    return this.#webhooks.get(id);
  }

  /** A new endpoint; its secret (given or made) is returned once to the caller, never to the log. */
  async create(actor: Actor, input: WebhookInput): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    return this.#db.transaction().execute(async (trx) => {
      this.#check(actor);
      const result = await this.#webhooks.create(input, trx);
      const { endpoint } = result;
      await this.#audit.record(
        actor,
        {
          action: "webhook.create",
          target: `webhook:${endpoint.id}`,
          detail: {
            url: endpoint.url,
            events: endpoint.events,
            domains: endpoint.domains,
            enabled: endpoint.enabled,
          },
        },
        trx,
      );
      return result;
    });
  }

  async update(actor: Actor, id: number, input: WebhookInput): Promise<WebhookEndpoint> {
    return this.#db.transaction().execute(async (trx) => {
      this.#check(actor);
      const before = await this.#webhooks.get(id, trx);
      const after = await this.#webhooks.update(id, input, trx);
      const changes: Record<string, unknown> = {};
      for (const name of ["url", "events", "domains", "enabled"] as const)
        if (JSON.stringify(before[name]) !== JSON.stringify(after[name]))
          changes[name] = { from: before[name], to: after[name] };
      // That the secret changed is worth knowing; the secret itself is not.
      if (input.secret !== undefined && input.secret !== null) changes.secretChanged = true;
      if (Object.keys(changes).length > 0)
        await this.#audit.record(
          actor,
          { action: "webhook.update", target: `webhook:${id}`, detail: changes },
          trx,
        );
      return after;
    });
  }

  async delete(actor: Actor, id: number): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      this.#check(actor);
      const endpoint = await this.#webhooks.get(id, trx);
      await this.#webhooks.delete(id, trx);
      await this.#audit.record(
        actor,
        { action: "webhook.delete", target: `webhook:${id}`, detail: { url: endpoint.url } },
        trx,
      );
    });
  }

  async deliveries(
    actor: Actor,
    endpointId: number,
    filter: { status?: DeliveryStatus; type?: string; limit: number; offset: number },
  ): Promise<{ items: WebhookDelivery[]; total: number }> {
    this.#check(actor);
    return this.#webhooks.deliveries(endpointId, filter);
  }

  async delivery(actor: Actor, id: string): Promise<WebhookDelivery & { signature: string }> {
    this.#check(actor);
    return this.#webhooks.delivery(id);
  }

  async backlog(actor: Actor): Promise<{ pending: number; failed: number }> {
    this.#check(actor);
    return this.#webhooks.backlog();
  }

  /** Queues a failed delivery again (the same bytes and signature). */
  async retry(actor: Actor, deliveryId: string): Promise<WebhookDelivery> {
    return this.#db.transaction().execute(async (trx) => {
      this.#check(actor);
      const delivery = await this.#webhooks.retry(deliveryId, trx);
      await this.#audit.record(
        actor,
        {
          action: "webhook-delivery.retry",
          target: `webhook:${delivery.endpointId}`,
          detail: { delivery: delivery.id, type: delivery.type },
        },
        trx,
      );
      return delivery;
    });
  }
}
