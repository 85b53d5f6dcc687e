import type { Kysely, Transaction } from "kysely";
import { type Database, flag, toFlag } from "../db/schema.ts";
import { inTransaction } from "../db/transaction.ts";
import { refusal } from "../errors.ts";
import { parseNewDomain } from "./addresses.ts";
import type { LifecycleService } from "./lifecycle.ts";
import { containsText, type Listing, type Page } from "./paging.ts";
import { isActiveUser, managedDomain } from "./queries.ts";
import type { SecurityEventOrigin } from "./security-events.ts";
import { flagInvalid, nowSeconds, toUser } from "./users.ts";

export const domainNotFound = refusal("domain.not_found", "not_found", () => "domain not found");
export const domainExists = refusal<{ name: string }>(
  "domain.exists",
  "conflict",
  ({ name }) => `domain ${name} already exists`,
);
export const domainNameInvalid = refusal(
  "domain.name_invalid",
  "invalid",
  () => "name: not a valid domain name (ASCII letters, digits and -; an international name in its xn-- form)",
);
export const domainNotEmpty = refusal<{ name: string; users: number; aliases: number }>(
  "domain.not_empty",
  "conflict",
  ({ name, users, aliases }) =>
    `domain ${name} still has ${users} active users and ${aliases} active aliases; delete them first or use force`,
);
export const numberOutOfRange = refusal<{ field: string; min: number; max: number }>(
  "number.out_of_range",
  "invalid",
  ({ field, min, max }) => `${field}: must be a whole number from ${min} to ${max}`,
);

export interface Domain {
  id: number;
  name: string;
  createdAt: number;
  updatedAt: number;
}

/** A domain's invitation settings (reference section 1.3): who may invite, how many, after how long. */
export interface DomainInvitations {
  enabled: boolean;
  /** Invite codes each user of the domain is handed out (multipliers may create more). */
  limit: number;
  /** Days an account must exist before its codes are handed out. */
  waitingPeriodDays: number;
}

export const maxInvitationLimit = 10_000;
export const maxWaitingPeriodDays = 3650;

/** A whole number in range, given as a number or as the digits a form or the console sends. */
function wholeNumber(name: string, value: unknown, min: number, max: number): number {
  const n = typeof value === "string" && /^\s*\d+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < min || n > max)
    throw numberOutOfRange({ field: name, min, max });
  return n;
}

/** Checks a change of invitation settings; what is not given stays. */
export function checkInvitations(patch: {
  enabled?: unknown;
  limit?: unknown;
  waitingPeriodDays?: unknown;
}): Partial<DomainInvitations> {
  const checked: Partial<DomainInvitations> = {};
  if (patch.enabled !== undefined) {
    if (typeof patch.enabled !== "boolean") throw flagInvalid({ field: "enabled" });
    checked.enabled = patch.enabled;
  }
  if (patch.limit !== undefined) checked.limit = wholeNumber("limit", patch.limit, 0, maxInvitationLimit);
  if (patch.waitingPeriodDays !== undefined)
    checked.waitingPeriodDays = wholeNumber(
      "waitingPeriodDays",
      patch.waitingPeriodDays,
      1,
      maxWaitingPeriodDays,
    );
  return checked;
}

export class DomainService {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  async create(rawName: string, trx?: Transaction<Database>): Promise<Domain> {
    const name = typeof rawName === "string" ? parseNewDomain(rawName.trim()) : null;
    if (!name) throw domainNameInvalid();
    const now = nowSeconds();
    return inTransaction(this.#db, trx, async (trx) => {
      if (await managedDomain(trx, name)) throw domainExists({ name });
      await trx.insertInto("domains").values({ name, created_at: now, updated_at: now }).execute();
      const domain = await managedDomain(trx, name);
      if (!domain) throw new Error("inserted domain not found");
      return domain;
    });
  }

  /** The managed domain of this name (`managedDomain`, the one "is this domain managed here" query). */
  find(rawName: string, db: Kysely<Database> = this.#db): Promise<Domain | null> {
    return managedDomain(db, rawName);
  }

  /** The primary domain: the first one created (sign-in without @, the first admin's address). */
  async primary(): Promise<Domain | null> {
    const row = await this.#db.selectFrom("domains").selectAll().orderBy("id").limit(1).executeTakeFirst();
    return row ? toDomain(row) : null;
  }

  async get(rawName: string, db: Kysely<Database> = this.#db): Promise<Domain> {
    const domain = await this.find(rawName, db);
    if (!domain) throw domainNotFound();
    return domain;
  }

  async list(page: Page): Promise<Listing<Domain>> {
    let query = this.#db.selectFrom("domains");
    if (page.search !== "") query = query.where(containsText("name", page.search));
    const [rows, count] = await Promise.all([
      query.selectAll().orderBy("name").limit(page.limit).offset(page.offset).execute(),
      query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    ]);
    return { items: rows.map(toDomain), total: Number(count.n) };
  }

  /** The invitation settings of a domain (by id: the domain of a user or of an invite code). */
  async invitations(domainId: number, db: Kysely<Database> = this.#db): Promise<DomainInvitations> {
    const row = await db
      .selectFrom("domains")
      .select(["invitation_enabled", "invitation_limit", "invitation_waiting_period_days"])
      .where("id", "=", domainId)
      .executeTakeFirst();
    if (!row) throw domainNotFound();
    return toInvitations(row);
  }

  /** Changes a domain's invitation settings: limit 0 or more, waiting period at least one day. */
  async updateInvitations(
    rawName: string,
    patch: { enabled?: unknown; limit?: unknown; waitingPeriodDays?: unknown },
    db: Kysely<Database> = this.#db,
  ): Promise<DomainInvitations> {
    const checked = checkInvitations(patch);
    const domain = await this.get(rawName, db);
    const changes: Partial<{
      invitation_enabled: 0 | 1;
      invitation_limit: number;
      invitation_waiting_period_days: number;
    }> = {};
    if (checked.enabled !== undefined) changes.invitation_enabled = toFlag(checked.enabled);
    if (checked.limit !== undefined) changes.invitation_limit = checked.limit;
    if (checked.waitingPeriodDays !== undefined)
      changes.invitation_waiting_period_days = checked.waitingPeriodDays;
    if (Object.keys(changes).length > 0)
      await db
        .updateTable("domains")
        .set({ ...changes, updated_at: nowSeconds() })
        .where("id", "=", domain.id)
        .execute();
    return this.invitations(domain.id, db);
  }

  /**
   * The domain's default of "mail apps must use app passwords", for its users without a choice of
   * their own (AppPasswordService.required applies it).
   */
  async appPasswordsRequired(domainId: number, db: Kysely<Database> = this.#db): Promise<boolean> {
    const row = await db
      .selectFrom("domains")
      .select("app_passwords_required")
      .where("id", "=", domainId)
      .executeTakeFirst();
    if (!row) throw domainNotFound();
    return flag(row.app_passwords_required);
  }

  /** Changes the domain's default of "mail apps must use app passwords"; true or false. */
  async setAppPasswordsRequired(
    rawName: string,
    required: unknown,
    db: Kysely<Database> = this.#db,
  ): Promise<boolean> {
    if (typeof required !== "boolean") throw flagInvalid({ field: "appPasswordsRequired" });
    const domain = await this.get(rawName, db);
    await db
      .updateTable("domains")
      .set({ app_passwords_required: toFlag(required), updated_at: nowSeconds() })
      .where("id", "=", domain.id)
      .execute();
    return required;
  }

  /** Whether any domain takes registrations (the start page shows the invite-code form only then). */
  async anyInvitationsEnabled(): Promise<boolean> {
    const row = await this.#db
      .selectFrom("domains")
      .select("id")
      .where("invitation_enabled", "=", toFlag(true))
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Counts of what a domain still holds, for the delete check and the console's dry run. */
  async contents(
    domainId: number,
    db: Kysely<Database> = this.#db,
  ): Promise<{ activeUsers: number; activeAliases: number }> {
    const [users, aliases] = await Promise.all([
      db
        .selectFrom("users")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("domain_id", "=", domainId)
        .where(isActiveUser)
        .executeTakeFirstOrThrow(),
      db
        .selectFrom("aliases")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("domain_id", "=", domainId)
        .where("deleted", "=", 0)
        .executeTakeFirstOrThrow(),
    ]);
    return { activeUsers: Number(users.n), activeAliases: Number(aliases.n) };
  }

  /**
   * Deletes a domain. While it has active users or aliases that is a conflict, unless forced:
   * then each user goes through the normal deletion (webhooks included) and each alias is
   * deleted, in one transaction with the domain itself. Webhook endpoints that listened only to
   * this domain are disabled rather than silently becoming global.
   */
  async delete(
    target: string | Domain,
    lifecycle: LifecycleService,
    force: boolean,
    origin: SecurityEventOrigin,
    trx?: Transaction<Database>,
  ): Promise<void> {
    if (!trx) return this.#db.transaction().execute((t) => this.delete(target, lifecycle, force, origin, t));
    const domain = typeof target === "string" ? await this.get(target, trx) : target;
    const contents = await this.contents(domain.id, trx);
    if (!force && (contents.activeUsers > 0 || contents.activeAliases > 0)) {
      throw domainNotEmpty({
        name: domain.name,
        users: contents.activeUsers,
        aliases: contents.activeAliases,
      });
    }
    const users = await trx
      .selectFrom("users")
      .selectAll()
      .where("domain_id", "=", domain.id)
      .where(isActiveUser)
      .execute();
    // Each user as read here, not looked up again by its address.
    for (const user of users) await lifecycle.delete(toUser(user), origin, trx);
    const aliases = await trx
      .selectFrom("aliases")
      .select("source")
      .where("domain_id", "=", domain.id)
      .where("deleted", "=", 0)
      .execute();
    for (const alias of aliases) await lifecycle.deleteAlias(alias.source, trx);
    const endpoints = await trx
      .selectFrom("webhook_endpoint_domains")
      .select("endpoint_id")
      .where("domain_id", "=", domain.id)
      .execute();
    for (const { endpoint_id } of endpoints) {
      const others = await trx
        .selectFrom("webhook_endpoint_domains")
        .select("domain_id")
        .where("endpoint_id", "=", endpoint_id)
        .where("domain_id", "!=", domain.id)
        .executeTakeFirst();
      if (!others)
        await trx
          .updateTable("webhook_endpoints")
          .set({ enabled: 0 })
          .where("id", "=", endpoint_id)
          .execute();
    }
    await trx.deleteFrom("domains").where("id", "=", domain.id).execute();
  }
}

export const toInvitations = (row: {
  invitation_enabled: boolean | number;
  invitation_limit: number;
  invitation_waiting_period_days: number;
}): DomainInvitations => ({
  enabled: flag(row.invitation_enabled),
  limit: Number(row.invitation_limit),
  waitingPeriodDays: Number(row.invitation_waiting_period_days),
});

const toDomain = (row: { id: number; name: string; created_at: number; updated_at: number }): Domain => ({
  id: row.id,
  name: row.name,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});
