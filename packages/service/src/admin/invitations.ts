import type { Kysely } from "kysely";
import { type Actor, assertMay, domainScope } from "../accounts/admin-scope.ts";
import type { AuditLog } from "../accounts/audit-log.ts";
import type { DomainService } from "../accounts/domains.ts";
import {
  type InviteCode,
  type InviteCodeFilter,
  type InviteCodeService,
  inviteDomainNotManaged,
  inviteOwnerNotActive,
} from "../accounts/invite-codes.ts";
import type { Listing, Page } from "../accounts/paging.ts";
import type { ReservedName, ReservedNameImport, ReservedNameService } from "../accounts/reserved-names.ts";
import type { Database } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { activeOwner } from "./users.ts";

/**
 * Invite codes in the admin area (reference 5.8): an admin for any domain, a domain admin for its
 * own, and only while its domain takes invitations; the owner must be a user the actor manages.
 * The codes are InviteCodeService's; the audit log names a code by its id, never the code itself
 * (it registers an account).
 */
/** A domain admin may invite only while invitations are on for the domain. */
export const invitationsOffForDomain = refusal(
  "admin.invitations_off",
  "forbidden",
  () => "domain: invitations are off for this domain",
);

export class AdminInviteCodes {
  readonly #db: Kysely<Database>;
  readonly #codes: InviteCodeService;
  readonly #domains: DomainService;
  readonly #audit: AuditLog;

  constructor(db: Kysely<Database>, codes: InviteCodeService, domains: DomainService, audit: AuditLog) {
    this.#db = db;
    this.#codes = codes;
    this.#domains = domains;
    this.#audit = audit;
  }

  async list(actor: Actor, page: Page, filter: InviteCodeFilter = {}): Promise<Listing<InviteCode>> {
    const scope = domainScope(actor);
    return this.#codes.list(page, scope === null ? filter : { ...filter, domainId: scope });
  }

  async create(
    actor: Actor,
    input: { domain: string; owner: string; code?: string | null },
  ): Promise<InviteCode> {
    return this.#db.transaction().execute(async (trx) => {
      const domain = await this.#domains.find(String(input.domain ?? ""), trx);
      if (!domain) throw inviteDomainNotManaged();
      assertMay(actor, { kind: "invite-code", domainId: domain.id });
      if (actor.reach !== "all" && !(await this.#domains.invitations(domain.id, trx)).enabled)
        throw invitationsOffForDomain();
      const owner = await activeOwner(trx, input.owner);
      if (!owner) throw inviteOwnerNotActive();
      assertMay(actor, { kind: "user", domainId: owner.domainId, roles: owner.roles });
      const scope = domainScope(actor);
      const code = await this.#codes.create(
        { domain: domain.name, owner: owner.email, code: input.code ?? null },
        scope === null ? {} : { domainId: scope },
        trx,
      );
      await this.#audit.record(
        actor,
        {
          action: "invite-code.create",
          target: `invite-code:${code.id}`,
          targetDomainId: code.domainId,
          detail: {
            owner: code.owner,
            domain: code.domain,
            given: input.code !== undefined && input.code !== null,
          },
        },
        trx,
      );
      return code;
    });
  }

  async delete(actor: Actor, id: number): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      const scope = domainScope(actor);
      const code = await this.#codes.get(id, scope === null ? {} : { domainId: scope }, trx);
      assertMay(actor, { kind: "invite-code", domainId: code.domainId });
      await this.#codes.delete(id, scope === null ? {} : { domainId: scope }, trx);
      await this.#audit.record(
        actor,
        {
          action: "invite-code.delete",
          target: `invite-code:${code.id}`,
          targetDomainId: code.domainId,
          detail: { owner: code.owner, redeemed: code.redeemedAt !== null },
        },
        trx,
      );
    });
  }
}

/** Reserved names (admins only): list, create, delete, import from and export to a text file. */
export class AdminReservedNames {
  readonly #db: Kysely<Database>;
  readonly #names: ReservedNameService;
  readonly #audit: AuditLog;

  constructor(db: Kysely<Database>, names: ReservedNameService, audit: AuditLog) {
    this.#db = db;
    this.#names = names;
    this.#audit = audit;
  }

  #check(actor: Actor) {
    assertMay(actor, { kind: "area", area: "reserved-names" });
  }

  async list(actor: Actor, page: Page): Promise<Listing<ReservedName>> {
    this.#check(actor);
    return this.#names.list(page);
  }

  async create(actor: Actor, name: string): Promise<ReservedName> {
    return this.#db.transaction().execute(async (trx) => {
      this.#check(actor);
      const created = await this.#names.create(name, trx);
      await this.#audit.record(actor, { action: "reserved-name.create", target: created.name }, trx);
      return created;
    });
  }

  async delete(actor: Actor, name: string): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      this.#check(actor);
      await this.#names.delete(name, trx);
      await this.#audit.record(
        actor,
        { action: "reserved-name.delete", target: name.trim().toLowerCase() },
        trx,
      );
    });
  }

  async import(actor: Actor, text: string): Promise<ReservedNameImport> {
    return this.#db.transaction().execute(async (trx) => {
      this.#check(actor);
      const result = await this.#names.import(text, trx);
      await this.#audit.record(
        actor,
        {
          action: "reserved-name.import",
          target: "reserved-names",
          detail: { imported: result.imported, skipped: result.skipped, invalid: result.invalid.length },
        },
        trx,
      );
      return result;
    });
  }

  async export(actor: Actor): Promise<string> {
    this.#check(actor);
    return this.#names.export();
  }
}
