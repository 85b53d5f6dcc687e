import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import { conflict, invalid, notFound } from "../errors.ts";
import { parseNewDomain } from "./addresses.ts";
import type { LifecycleService } from "./lifecycle.ts";
import { containsText, type Listing, type Page } from "./paging.ts";
import { isActiveUser, managedDomain } from "./queries.ts";
import { nowSeconds } from "./users.ts";

export interface Domain {
  id: number;
  name: string;
  createdAt: number;
  updatedAt: number;
}

export class DomainService {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  async create(rawName: string): Promise<Domain> {
    const name = typeof rawName === "string" ? parseNewDomain(rawName.trim()) : null;
    if (!name)
      throw invalid(
        "name: not a valid domain name (ASCII letters, digits and -; an international name in its xn-- form)",
      );
    const now = nowSeconds();
    return this.#db.transaction().execute(async (trx) => {
      if (await managedDomain(trx, name)) throw conflict(`domain ${name} already exists`);
      await trx.insertInto("domains").values({ name, created_at: now, updated_at: now }).execute();
      const domain = await managedDomain(trx, name);
      if (!domain) throw new Error("inserted domain not found");
      return domain;
    });
  }

  /** The managed domain of this name (`managedDomain`, the one "is this domain managed here" query). */
  find(rawName: string): Promise<Domain | null> {
    return managedDomain(this.#db, rawName);
  }

  /** The primary domain: the first one created (sign-in without @, the first admin's address). */
  async primary(): Promise<Domain | null> {
    const row = await this.#db.selectFrom("domains").selectAll().orderBy("id").limit(1).executeTakeFirst();
    return row ? toDomain(row) : null;
  }

  async get(rawName: string): Promise<Domain> {
    const domain = await this.find(rawName);
    if (!domain) throw notFound("domain not found");
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

  /** Counts of what a domain still holds, for the delete check and the console's dry run. */
  async contents(domainId: number): Promise<{ activeUsers: number; activeAliases: number }> {
    const [users, aliases] = await Promise.all([
      this.#db
        .selectFrom("users")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("domain_id", "=", domainId)
        .where(isActiveUser)
        .executeTakeFirstOrThrow(),
      this.#db
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
  async delete(rawName: string, lifecycle: LifecycleService, force: boolean): Promise<void> {
    const domain = await this.get(rawName);
    const contents = await this.contents(domain.id);
    if (!force && (contents.activeUsers > 0 || contents.activeAliases > 0)) {
      throw conflict(
        `domain ${domain.name} still has ${contents.activeUsers} active users and ${contents.activeAliases} active aliases; delete them first or use force`,
      );
    }
    await this.#db.transaction().execute(async (trx) => {
      const users = await trx
        .selectFrom("users")
        .select("email")
        .where("domain_id", "=", domain.id)
        .where(isActiveUser)
        .execute();
      for (const user of users) await lifecycle.delete(user.email, trx);
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
    });
  }
}

const toDomain = (row: { id: number; name: string; created_at: number; updated_at: number }): Domain => ({
  id: row.id,
  name: row.name,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});
