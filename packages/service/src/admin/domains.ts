import type { Kysely } from "kysely";
import { type Actor, assertMay } from "../accounts/admin-scope.ts";
import type { AuditLog } from "../accounts/audit-log.ts";
import type { Domain, DomainInvitations, DomainService } from "../accounts/domains.ts";
import type { LifecycleService } from "../accounts/lifecycle.ts";
import type { Listing, Page } from "../accounts/paging.ts";
import { isActiveUser } from "../accounts/queries.ts";
import { actorOrigin } from "../accounts/security-events.ts";
import type { Database } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { holdsRole } from "./users.ts";

/** A domain's page: the domain, its invitation settings and what it holds (reference 5.8). */
export interface DomainFacts {
  domain: Domain;
  invitations: DomainInvitations;
  /** The default of "mail apps must use app passwords" for the domain's users. */
  appPasswordsRequired: boolean;
  activeUsers: number;
  activeAliases: number;
  /** Active users holding ROLE_DOMAIN_ADMIN (or ROLE_ADMIN). */
  admins: number;
  inviteCodes: { unredeemed: number; redeemed: number };
  openPgpKeys: number;
}

/**
 * Domains in the admin area. Listing, creating and deleting domains is for admins (the area
 * `domains`); a domain admin sees and edits the invitation settings of its own domain only.
 */
export const domainHoldsOwnAccount = refusal<{ name: string }>(
  "admin.domain_holds_own_account",
  "conflict",
  ({ name }) => `domain ${name} holds your own account; delete it from another admin account`,
);

export class AdminDomains {
  readonly #db: Kysely<Database>;
  readonly #domains: DomainService;
  readonly #lifecycle: LifecycleService;
  readonly #audit: AuditLog;

  constructor(db: Kysely<Database>, domains: DomainService, lifecycle: LifecycleService, audit: AuditLog) {
    this.#db = db;
    this.#domains = domains;
    this.#lifecycle = lifecycle;
    this.#audit = audit;
  }

  async list(actor: Actor, page: Page): Promise<Listing<Domain>> {
    assertMay(actor, { kind: "area", area: "domains" });
    return this.#domains.list(page);
  }

  /** Every domain the actor reaches, by name (the filters' choices): all for an admin, its own for a domain admin. */
  async choices(actor: Actor): Promise<Domain[]> {
    let query = this.#db.selectFrom("domains").select(["id", "name", "created_at", "updated_at"]);
    if (actor.reach !== "all") query = query.where("id", "=", actor.domainId ?? -1);
    const rows = await query.orderBy("name").limit(1000).execute();
    return rows.map((row) => ({
      id: Number(row.id),
      name: row.name,
      createdAt: Number(row.created_at),
      updatedAt: Number(row.updated_at),
    }));
  }

  /** A domain the actor may see. */
  async get(actor: Actor, name: string, db: Kysely<Database> = this.#db): Promise<Domain> {
    const domain = await this.#domains.get(name, db);
    assertMay(actor, { kind: "domain", domainId: domain.id });
    return domain;
  }

  async facts(actor: Actor, name: string): Promise<DomainFacts> {
    const domain = await this.get(actor, name);
    const db = this.#db;
    const count = (row: { n: number | string | bigint } | undefined) => Number(row?.n ?? 0);
    const [invitations, appPasswordsRequired, contents, admins, unredeemed, redeemed, keys] =
      await Promise.all([
        this.#domains.invitations(domain.id),
        this.#domains.appPasswordsRequired(domain.id),
        this.#domains.contents(domain.id),
        db
          .selectFrom("users")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .where("domain_id", "=", domain.id)
          .where(isActiveUser)
          .where((eb) => eb.or([holdsRole("ROLE_DOMAIN_ADMIN"), holdsRole("ROLE_ADMIN")]))
          .executeTakeFirst(),
        db
          .selectFrom("invite_codes")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .where("domain_id", "=", domain.id)
          .where("redeemed_at", "is", null)
          .executeTakeFirst(),
        db
          .selectFrom("invite_codes")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .where("domain_id", "=", domain.id)
          .where("redeemed_at", "is not", null)
          .executeTakeFirst(),
        db
          .selectFrom("openpgp_keys")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .where("domain_id", "=", domain.id)
          .executeTakeFirst(),
      ]);
    return {
      domain,
      invitations,
      appPasswordsRequired,
      ...contents,
      admins: count(admins),
      inviteCodes: { unredeemed: count(unredeemed), redeemed: count(redeemed) },
      openPgpKeys: count(keys),
    };
  }

  async create(actor: Actor, name: string): Promise<Domain> {
    return this.#db.transaction().execute(async (trx) => {
      assertMay(actor, { kind: "area", area: "domains" });
      const domain = await this.#domains.create(name, trx);
      await this.#audit.record(
        actor,
        { action: "domain.create", target: domain.name, targetDomainId: domain.id },
        trx,
      );
      return domain;
    });
  }

  /** Invitation settings: an admin for any domain, a domain admin for its own. */
  async updateInvitations(
    actor: Actor,
    name: string,
    patch: { enabled?: unknown; limit?: unknown; waitingPeriodDays?: unknown },
  ): Promise<DomainInvitations> {
    return this.#db.transaction().execute(async (trx) => {
      const domain = await this.get(actor, name, trx);
      const before = await this.#domains.invitations(domain.id, trx);
      const after = await this.#domains.updateInvitations(domain.name, patch, trx);
      const changes: Record<string, { from: unknown; to: unknown }> = {};
      for (const field of ["enabled", "limit", "waitingPeriodDays"] as const)
        if (before[field] !== after[field])
          changes[`invitations.${field}`] = { from: before[field], to: after[field] };
      if (Object.keys(changes).length > 0)
        await this.#audit.record(
          actor,
          { action: "domain.update", target: domain.name, targetDomainId: domain.id, detail: changes },
          trx,
        );
      return after;
    });
  }

  /**
   * The domain's default of "mail apps must use app passwords": an admin for any domain, a domain
   * admin for its own. Users with a choice of their own keep it.
   */
  async updateAppPasswordsRequired(actor: Actor, name: string, required: unknown): Promise<boolean> {
    return this.#db.transaction().execute(async (trx) => {
      const domain = await this.get(actor, name, trx);
      const before = await this.#domains.appPasswordsRequired(domain.id, trx);
      const after = await this.#domains.setAppPasswordsRequired(domain.name, required, trx);
      if (before !== after)
        await this.#audit.record(
          actor,
          {
            action: "domain.update",
            target: domain.name,
            targetDomainId: domain.id,
            detail: { appPasswordsRequired: { from: before, to: after } },
          },
          trx,
        );
      return after;
    });
  }

  /**
   * Deletes a domain (the admin API's rule: a conflict while it holds active users or aliases,
   * unless forced). The domain of the actor's own account is never deleted from its own session.
   */
  async delete(actor: Actor, name: string, force: boolean): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      assertMay(actor, { kind: "area", area: "domains" });
      const domain = await this.#domains.get(name, trx);
      if (actor.userId !== null && actor.domainId === domain.id)
        throw domainHoldsOwnAccount({ name: domain.name });
      const contents = await this.#domains.contents(domain.id, trx);
      await this.#domains.delete(domain, this.#lifecycle, force, actorOrigin(actor), trx);
      await this.#audit.record(
        actor,
        {
          action: "domain.delete",
          target: domain.name,
          targetDomainId: domain.id,
          detail: { force, ...contents },
        },
        trx,
      );
    });
  }
}
