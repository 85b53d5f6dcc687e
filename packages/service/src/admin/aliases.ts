import { type Kysely, sql } from "kysely";
import { parseAddress } from "../accounts/addresses.ts";
import { type Actor, type AddressHolder, assertMay, domainScope } from "../accounts/admin-scope.ts";
import {
  type AliasPatch,
  type AliasService,
  type AliasView,
  aliasNotFound,
  type CreateAliasInput,
  ownerNotActive,
} from "../accounts/aliases.ts";
import type { AuditLog } from "../accounts/audit-log.ts";
import type { LifecycleService } from "../accounts/lifecycle.ts";
import { managedDomain } from "../accounts/queries.ts";
import { parseStoredRoles, type Role } from "../accounts/roles.ts";
import { parseStringList } from "../accounts/users.ts";
import { type Database, flag, toFlag } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { inCursorOrder, type KeysetPage, keysetPage, type ListCursor } from "./keyset.ts";
import { activeOwner } from "./users.ts";

export interface AliasListFilter {
  /** Part of the source, a destination or the owner's address. */
  search: string;
  status: "active" | "deleted" | "all";
  domainId?: number;
}

export interface AliasListItem {
  id: number;
  source: string;
  domain: string;
  destinations: string[];
  owner: string | null;
  smtpQuota: { perHour: number | null; perDay: number | null };
  deleted: boolean;
  createdAt: number;
}

/** An alias with what the scope rule needs: its domain and its owner's domain and roles. */
export interface AliasDetail extends AliasView {
  id: number;
  domainId: number;
  ownerDomainId: number | null;
  ownerRoles: Role[] | null;
}

/** The alias's owner as the scope rule sees it, null when it has none. */
const ownerOf = (alias: AliasDetail): AddressHolder | null =>
  alias.ownerDomainId === null || alias.ownerRoles === null
    ? null
    : { domainId: alias.ownerDomainId, roles: alias.ownerRoles };

const escapeLike = (text: string) => `%${text.toLowerCase().replace(/[!%_]/g, (c) => `!${c}`)}%`;

/**
 * Aliases in the admin area (reference 5.8): the actor's reach decides what is seen and changed,
 * AliasService and LifecycleService do the work, the audit log records it. A domain admin's alias
 * always forwards to its owner, and only admins set SMTP limits.
 */
export const aliasOwnerRequired = refusal(
  "admin.alias_owner_required",
  "invalid",
  () => "owner: an alias of a domain admin needs an owner",
);
export const smtpQuotaAdminsOnly = refusal(
  "admin.smtp_quota_admins_only",
  "forbidden",
  () => "smtpQuota: only admins set SMTP limits",
);

export class AdminAliases {
  readonly #db: Kysely<Database>;
  readonly #aliases: AliasService;
  readonly #lifecycle: LifecycleService;
  readonly #audit: AuditLog;

  constructor(db: Kysely<Database>, aliases: AliasService, lifecycle: LifecycleService, audit: AuditLog) {
    this.#db = db;
    this.#aliases = aliases;
    this.#lifecycle = lifecycle;
    this.#audit = audit;
  }

  /** One page, newest first, by keyset on the id. */
  async list(
    actor: Actor,
    filter: AliasListFilter,
    cursor: ListCursor,
    limit = 20,
  ): Promise<KeysetPage<AliasListItem>> {
    let query = this.#db
      .selectFrom("aliases")
      .innerJoin("domains", "domains.id", "aliases.domain_id")
      .leftJoin("users as owners", "owners.id", "aliases.user_id");
    const scope = domainScope(actor);
    if (scope !== null) query = query.where("aliases.domain_id", "=", scope);
    if (filter.domainId !== undefined) query = query.where("aliases.domain_id", "=", filter.domainId);
    if (filter.status !== "all")
      query = query.where("aliases.deleted", "=", toFlag(filter.status === "deleted"));
    if (filter.search !== "") {
      if (filter.search.includes("\0")) query = query.where(sql<boolean>`1 = 0`);
      else {
        const pattern = escapeLike(filter.search);
        query = query.where(
          sql<boolean>`(aliases.source LIKE ${pattern} ESCAPE '!' OR aliases.destinations LIKE ${pattern} ESCAPE '!' OR owners.email LIKE ${pattern} ESCAPE '!')`,
        );
      }
    }
    const rowsQuery = inCursorOrder(
      query.select([
        "aliases.id",
        "aliases.source",
        "aliases.destinations",
        "aliases.smtp_quota_per_hour",
        "aliases.smtp_quota_per_day",
        "aliases.deleted",
        "aliases.created_at",
        "domains.name as domain",
        "owners.email as owner",
      ]),
      "aliases.id",
      cursor,
      limit,
    );
    const [rows, count] = await Promise.all([
      rowsQuery.execute(),
      query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    ]);
    const items = rows.map((row) => ({
      id: Number(row.id),
      source: row.source,
      domain: row.domain,
      destinations: parseStringList(row.destinations),
      owner: row.owner,
      smtpQuota: { perHour: row.smtp_quota_per_hour, perDay: row.smtp_quota_per_day },
      deleted: flag(row.deleted),
      createdAt: Number(row.created_at),
    }));
    return keysetPage(items, limit, cursor, Number(count.n));
  }

  /** An alias the actor may see, deleted ones included. */
  async get(actor: Actor, source: string, db: Kysely<Database> = this.#db): Promise<AliasDetail> {
    const address = parseAddress(String(source));
    const row = address
      ? await db
          .selectFrom("aliases")
          .leftJoin("users as owners", "owners.id", "aliases.user_id")
          .select([
            "aliases.id",
            "aliases.domain_id",
            "owners.domain_id as owner_domain_id",
            "owners.roles as owner_roles",
          ])
          .where("aliases.source", "=", address.email)
          .executeTakeFirst()
      : undefined;
    if (!row) throw aliasNotFound();
    assertMay(actor, { kind: "alias", domainId: Number(row.domain_id) });
    const view = await this.#aliases.get(address?.email ?? "", db);
    return {
      ...view,
      id: Number(row.id),
      domainId: Number(row.domain_id),
      ownerDomainId: row.owner_domain_id === null ? null : Number(row.owner_domain_id),
      ownerRoles: row.owner_roles === null ? null : parseStoredRoles(row.owner_roles),
    };
  }

  /**
   * A new alias. Without owner and destinations a person's alias belongs to that person. A domain
   * admin creates only in its own domain, for owners it may manage, forwarding to the owner.
   */
  async create(actor: Actor, input: CreateAliasInput): Promise<AliasView> {
    return this.#db.transaction().execute(async (trx) => {
      const source = typeof input.source === "string" ? input.source.trim().toLowerCase() : "";
      const domainId = await this.#domainIdOf(source, trx);
      if (domainId !== null) assertMay(actor, { kind: "alias", domainId });
      let owner = input.owner ?? null;
      const destinations = input.destinations ?? [];
      if (owner === null && destinations.length === 0 && actor.userId !== null) owner = actor.name;
      let effective: CreateAliasInput = { ...input, owner };
      if (actor.reach !== "all") {
        if (owner === null) throw aliasOwnerRequired();
        const ownerEmail = await this.#ownerInReach(actor, owner, trx);
        if (input.smtpQuota !== undefined && input.smtpQuota !== null) throw smtpQuotaAdminsOnly();
        effective = { source: input.source, owner: ownerEmail, destinations: [ownerEmail] };
      }
      const alias = await this.#aliases.create(effective, trx);
      const view = await this.#aliases.get(alias.source, trx);
      await this.#audit.record(
        actor,
        {
          action: "alias.create",
          target: view.source,
          targetDomainId: alias.domainId,
          detail: { owner: view.owner, destinations: view.destinations, smtpQuota: view.smtpQuota },
        },
        trx,
      );
      return view;
    });
  }

  /** Changes destinations, owner or SMTP limits; a domain admin's alias keeps forwarding to its owner. */
  async update(actor: Actor, source: string, patch: AliasPatch): Promise<AliasView> {
    return this.#db.transaction().execute(async (trx) => {
      const before = await this.get(actor, source, trx);
      if (before.deleted) throw aliasNotFound();
      assertMay(actor, { kind: "alias", domainId: before.domainId, owner: ownerOf(before) });
      let effective = patch;
      if (actor.reach !== "all") {
        if (before.owner !== null) await this.#ownerInReach(actor, before.owner, trx);
        if (patch.smtpQuota !== undefined) throw smtpQuotaAdminsOnly();
        const owner = patch.owner === undefined ? before.owner : patch.owner;
        if (owner === null) throw aliasOwnerRequired();
        const ownerEmail = await this.#ownerInReach(actor, owner, trx);
        effective = { owner: ownerEmail, destinations: [ownerEmail] };
      }
      const after = await this.#aliases.update(before.source, effective, trx);
      const changes: Record<string, { from: unknown; to: unknown }> = {};
      for (const name of ["owner", "destinations", "smtpQuota"] as const) {
        if (JSON.stringify(before[name]) !== JSON.stringify(after[name]))
          changes[name] = { from: before[name], to: after[name] };
      }
      if (Object.keys(changes).length > 0)
        await this.#audit.record(
          actor,
          { action: "alias.update", target: after.source, targetDomainId: before.domainId, detail: changes },
          trx,
        );
      return after;
    });
  }

  async delete(actor: Actor, source: string): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      const alias = await this.get(actor, source, trx);
      assertMay(actor, { kind: "alias", domainId: alias.domainId, owner: ownerOf(alias) });
      await this.#lifecycle.deleteAlias(alias.source, trx);
      await this.#audit.record(
        actor,
        { action: "alias.delete", target: alias.source, targetDomainId: alias.domainId },
        trx,
      );
    });
  }

  /** The owner's address if the actor may manage that user, else a 403 (an unknown owner is the service's 422). */
  async #ownerInReach(actor: Actor, owner: string, db: Kysely<Database>): Promise<string> {
    const row = await activeOwner(db, owner);
    if (!row) throw ownerNotActive();
    assertMay(actor, { kind: "user", domainId: row.domainId, roles: row.roles });
    return row.email;
  }

  async #domainIdOf(address: string, db: Kysely<Database>): Promise<number | null> {
    const at = address.lastIndexOf("@");
    if (at < 0) return null;
    const domain = await managedDomain(db, address.slice(at + 1));
    return domain ? domain.id : null;
  }
}
