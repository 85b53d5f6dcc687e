import type { Kysely } from "kysely";
import { parseAddress } from "../accounts/addresses.ts";
import { type Actor, assertMay, domainScope } from "../accounts/admin-scope.ts";
import type { AuditLog } from "../accounts/audit-log.ts";
import { containsText } from "../accounts/paging.ts";
import { managedDomain } from "../accounts/queries.ts";
import { domainNotManaged } from "../accounts/users.ts";
import type { Database } from "../db/schema.ts";
import type { OpenPgpKeyInfo, OpenPgpKeyService } from "../openpgp/keys.ts";
import { keyAddressInvalid, keyNotFound } from "../openpgp/keys.ts";
import { inCursorOrder, type KeysetPage, keysetPage, type ListCursor } from "./keyset.ts";
import { addressHolder } from "./users.ts";

export interface OpenPgpKeyListItem extends OpenPgpKeyInfo {
  id: number;
  domain: string;
  uploadedAt: number;
}

/**
 * OpenPGP keys in the admin area: listed per domain, uploaded for any address of a domain the
 * actor reaches (through the importer the account pages and the admin API use), removed. Upload
 * and removal also need the address's holder in reach: a domain admin never replaces or removes
 * the key of an admin's address (or of an alias an admin owns) in its domain.
 */
export class AdminOpenPgpKeys {
  readonly #db: Kysely<Database>;
  readonly #keys: OpenPgpKeyService;
  readonly #audit: AuditLog;

  constructor(db: Kysely<Database>, keys: OpenPgpKeyService, audit: AuditLog) {
    this.#db = db;
    this.#keys = keys;
    this.#audit = audit;
  }

  async list(
    actor: Actor,
    filter: { search: string; domainId?: number },
    cursor: ListCursor,
    limit = 20,
  ): Promise<KeysetPage<OpenPgpKeyListItem>> {
    let query = this.#db
      .selectFrom("openpgp_keys")
      .innerJoin("domains", "domains.id", "openpgp_keys.domain_id");
    const scope = domainScope(actor);
    if (scope !== null) query = query.where("openpgp_keys.domain_id", "=", scope);
    if (filter.domainId !== undefined) query = query.where("openpgp_keys.domain_id", "=", filter.domainId);
    if (filter.search !== "") query = query.where(containsText("openpgp_keys.email", filter.search));
    const rowsQuery = inCursorOrder(
      query.select([
        "openpgp_keys.id",
        "openpgp_keys.email",
        "openpgp_keys.key_id",
        "openpgp_keys.fingerprint",
        "openpgp_keys.expires_at",
        "openpgp_keys.wkd_hash",
        "openpgp_keys.updated_at",
        "domains.name as domain",
      ]),
      "openpgp_keys.id",
      cursor,
      limit,
    );
    const [rows, count] = await Promise.all([
      rowsQuery.execute(),
      query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    ]);
    const items = rows.map((row) => ({
      id: Number(row.id),
      email: row.email,
      keyId: row.key_id,
      fingerprint: row.fingerprint,
      expiresAt: row.expires_at === null ? null : Number(row.expires_at),
      wkdHash: row.wkd_hash,
      domain: row.domain,
      uploadedAt: Number(row.updated_at),
    }));
    return keysetPage(items, limit, cursor, Number(count.n));
  }

  /** Publishes a key for an address of a domain the actor reaches (an active user's or alias's). */
  async import(actor: Actor, email: string, data: Uint8Array | string): Promise<OpenPgpKeyInfo> {
    return this.#db.transaction().execute(async (trx) => {
      const { domainId, email: address } = await this.#addressOf(email, trx);
      assertMay(actor, { kind: "openpgp-key", domainId, holder: await addressHolder(trx, address) });
      const info = await this.#keys.import(email, data, actor.userId, trx);
      await this.#audit.record(
        actor,
        {
          action: "openpgp-key.import",
          target: info.email,
          targetDomainId: domainId,
          detail: { keyId: info.keyId, fingerprint: info.fingerprint, expiresAt: info.expiresAt },
        },
        trx,
      );
      return info;
    });
  }

  async delete(actor: Actor, email: string): Promise<OpenPgpKeyInfo> {
    return this.#db.transaction().execute(async (trx) => {
      const address = parseAddress(String(email).trim());
      const row = address
        ? await trx
            .selectFrom("openpgp_keys")
            .select("domain_id")
            .where("email", "=", address.email)
            .executeTakeFirst()
        : undefined;
      if (!row || !address) throw keyNotFound();
      const domainId = Number(row.domain_id);
      assertMay(actor, { kind: "openpgp-key", domainId, holder: await addressHolder(trx, address.email) });
      const info = await this.#keys.delete(email, trx);
      await this.#audit.record(
        actor,
        {
          action: "openpgp-key.delete",
          target: info.email,
          targetDomainId: domainId,
          detail: { keyId: info.keyId, fingerprint: info.fingerprint },
        },
        trx,
      );
      return info;
    });
  }

  /** The address and its managed domain; the importer's own message when there is none. */
  async #addressOf(email: string, db: Kysely<Database>): Promise<{ email: string; domainId: number }> {
    const address = parseAddress(String(email).trim());
    if (!address) throw keyAddressInvalid();
    const domain = await managedDomain(db, address.domain);
    if (!domain) throw domainNotManaged({ field: "email", domain: address.domain });
    return { email: address.email, domainId: domain.id };
  }
}
