import type { Kysely, Selectable, Transaction } from "kysely";
import { type AliasTable, type Database, flag } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { newAddressProblem, parseAddress, parseNewAddress } from "./addresses.ts";
import { containsText, type Listing, type Page } from "./paging.ts";
import { managedDomain } from "./queries.ts";
import {
  addressInvalid,
  checkSmtpQuota,
  domainNotManaged,
  nowSeconds,
  parseStringList,
  type SmtpQuota,
  type SmtpQuotaInput,
  type UserService,
} from "./users.ts";

export interface Alias {
  id: number;
  source: string;
  domainId: number;
  destinations: string[];
  ownerId: number | null;
  smtpQuota: SmtpQuota;
  createdAt: number;
  updatedAt: number;
  deleted: boolean;
}

export function toAlias(row: Selectable<AliasTable>): Alias {
  return {
    id: row.id,
    source: row.source,
    domainId: row.domain_id,
    destinations: parseStringList(row.destinations),
    ownerId: row.user_id,
    smtpQuota: { perHour: row.smtp_quota_per_hour, perDay: row.smtp_quota_per_day },
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    deleted: flag(row.deleted),
  };
}

/** An alias as the admin API shows it. */
export interface AliasView {
  source: string;
  domain: string;
  destinations: string[];
  owner: string | null;
  smtpQuota: { per_hour: number | null; per_day: number | null };
  createdAt: number;
  updatedAt: number;
  deleted: boolean;
}

export interface CreateAliasInput {
  source: string;
  destinations?: string[];
  owner?: string | null;
  smtpQuota?: SmtpQuotaInput | null;
}

/** What an admin may change on an alias; `owner: null` removes the owner. */
export interface AliasPatch {
  destinations?: string[];
  owner?: string | null;
  smtpQuota?: SmtpQuotaInput | null;
}

const maxDestinations = 100;

export const aliasNotFound = refusal("alias.not_found", "not_found", () => "alias not found");
export const destinationsNotList = refusal(
  "alias.destinations_not_list",
  "invalid",
  () => "destinations: must be a list of addresses",
);
export const tooManyDestinations = refusal<{ max: number }>(
  "alias.too_many_destinations",
  "invalid",
  ({ max }) => `destinations: at most ${max} addresses`,
);
export const destinationInvalid = refusal<{ destination: string }>(
  "alias.destination_invalid",
  "invalid",
  ({ destination }) => `destinations: ${destination} is not a valid address`,
);
export const ownerNotActive = refusal(
  "alias.owner_not_active",
  "invalid",
  () => "owner: no active user with this address",
);
export const destinationOrOwnerRequired = refusal(
  "alias.destination_or_owner_required",
  "invalid",
  () => "destinations: at least one destination or an owner is required",
);
export const destinationRequired = refusal(
  "alias.destination_required",
  "invalid",
  () => "destinations: at least one destination is required",
);

/** Destination addresses: valid, lower-cased, de-duplicated, order kept. */
export function checkDestinations(value: unknown): string[] {
  if (!Array.isArray(value)) throw destinationsNotList();
  if (value.length > maxDestinations) throw tooManyDestinations({ max: maxDestinations });
  const result: string[] = [];
  for (const raw of value) {
    const address = typeof raw === "string" ? parseAddress(raw.trim()) : null;
    if (!address) throw destinationInvalid({ destination: String(raw).slice(0, 100) });
    if (!result.includes(address.email)) result.push(address.email);
  }
  return result;
}

export class AliasService {
  readonly #db: Kysely<Database>;
  readonly #users: UserService;

  constructor(db: Kysely<Database>, users: UserService) {
    this.#db = db;
    this.#users = users;
  }

  async create(input: CreateAliasInput, trx?: Transaction<Database>): Promise<Alias> {
    if (!trx) return this.#db.transaction().execute((t) => this.create(input, t));
    const source = typeof input.source === "string" ? input.source.trim() : "";
    const address = parseNewAddress(source);
    if (!address) throw addressInvalid({ field: "source", problem: newAddressProblem(source) ?? "" });
    const owner = input.owner ? await this.#users.getActive(input.owner, trx).catch(() => null) : null;
    if (input.owner && !owner) throw ownerNotActive();
    let destinations = input.destinations === undefined ? [] : checkDestinations(input.destinations);
    if (destinations.length === 0 && owner) destinations = [owner.email];
    if (destinations.length === 0) throw destinationOrOwnerRequired();
    const smtpQuota = checkSmtpQuota(input.smtpQuota);
    const domain = await managedDomain(trx, address.domain);
    if (!domain) throw domainNotManaged({ field: "source", domain: address.domain });
    const now = nowSeconds();
    await this.#users.assertAddressAvailable(address.email, trx);
    await trx
      .insertInto("aliases")
      .values({
        source: address.email,
        domain_id: domain.id,
        destinations: JSON.stringify(destinations),
        user_id: owner?.id ?? null,
        smtp_quota_per_hour: smtpQuota.perHour,
        smtp_quota_per_day: smtpQuota.perDay,
        created_at: now,
        updated_at: now,
        deleted: 0,
      })
      .execute();
    const row = await trx
      .selectFrom("aliases")
      .selectAll()
      .where("source", "=", address.email)
      .executeTakeFirstOrThrow();
    return toAlias(row);
  }

  /** Sources of the active aliases a user owns, in every domain (the webmail's list). */
  async ownedBy(user: { id: number }): Promise<string[]> {
    const rows = await this.#db
      .selectFrom("aliases")
      .select("source")
      .where("user_id", "=", user.id)
      .where("deleted", "=", 0)
      .orderBy("id")
      .execute();
    return rows.map((row) => row.source);
  }

  async get(rawSource: string, db: Kysely<Database> = this.#db): Promise<AliasView> {
    const address = parseAddress(String(rawSource));
    const [view] = address
      ? (await this.#views((q) => q.where("aliases.source", "=", address.email), 1, 0, db)).rows
      : [];
    if (!view) throw aliasNotFound();
    return view;
  }

  async list(page: Page, filter: { domain?: string; owner?: string }): Promise<Listing<AliasView>> {
    const filtered = (query: AliasQuery) => {
      let q = query;
      if (filter.domain) q = q.where("domains.name", "=", filter.domain.toLowerCase());
      if (filter.owner) q = q.where("owners.email", "=", filter.owner.toLowerCase());
      if (page.search !== "") q = q.where(containsText("aliases.source", page.search));
      return q;
    };
    const { rows, total } = await this.#views(filtered, page.limit, page.offset);
    return { items: rows, total };
  }

  /** Changes destinations, owner or SMTP quota of an active alias. */
  async update(rawSource: string, patch: AliasPatch, trx?: Transaction<Database>): Promise<AliasView> {
    if (!trx) return this.#db.transaction().execute((t) => this.update(rawSource, patch, t));
    const current = await this.get(rawSource, trx);
    if (current.deleted) throw aliasNotFound();
    const changes: Partial<{
      destinations: string;
      user_id: number | null;
      smtp_quota_per_hour: number | null;
      smtp_quota_per_day: number | null;
    }> = {};
    let ownerEmail: string | null | undefined;
    if (patch.owner !== undefined) {
      if (patch.owner === null) {
        changes.user_id = null;
        ownerEmail = null;
      } else {
        const owner =
          typeof patch.owner === "string"
            ? await this.#users.getActive(patch.owner, trx).catch(() => null)
            : null;
        if (!owner) throw ownerNotActive();
        changes.user_id = owner.id;
        ownerEmail = owner.email;
      }
    }
    if (patch.destinations !== undefined) {
      let destinations = checkDestinations(patch.destinations);
      if (destinations.length === 0 && ownerEmail) destinations = [ownerEmail];
      if (destinations.length === 0) throw destinationRequired();
      changes.destinations = JSON.stringify(destinations);
    }
    if (patch.smtpQuota !== undefined) {
      const quota = checkSmtpQuota(patch.smtpQuota);
      changes.smtp_quota_per_hour = quota.perHour;
      changes.smtp_quota_per_day = quota.perDay;
    }
    if (Object.keys(changes).length > 0) {
      await trx
        .updateTable("aliases")
        .set({ ...changes, updated_at: nowSeconds() })
        .where("source", "=", current.source)
        .where("deleted", "=", 0)
        .execute();
    }
    return this.get(current.source, trx);
  }

  async #views(
    filter: (query: AliasQuery) => AliasQuery,
    limit: number,
    offset: number,
    db: Kysely<Database> = this.#db,
  ) {
    const query = filter(aliasBaseQuery(db));
    const [rows, count] = await Promise.all([
      query
        .select([
          "aliases.source",
          "aliases.destinations",
          "aliases.smtp_quota_per_hour",
          "aliases.smtp_quota_per_day",
          "aliases.created_at",
          "aliases.updated_at",
          "aliases.deleted",
          "domains.name as domain",
          "owners.email as owner",
        ])
        .orderBy("aliases.source")
        .limit(limit)
        .offset(offset)
        .execute(),
      query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    ]);
    const views: AliasView[] = rows.map((row) => ({
      source: row.source,
      domain: row.domain,
      destinations: parseStringList(row.destinations),
      owner: row.owner,
      smtpQuota: { per_hour: row.smtp_quota_per_hour, per_day: row.smtp_quota_per_day },
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      deleted: flag(row.deleted),
    }));
    return { rows: views, total: Number(count.n) };
  }
}

const aliasBaseQuery = (db: Kysely<Database>) =>
  db
    .selectFrom("aliases")
    .innerJoin("domains", "domains.id", "aliases.domain_id")
    .leftJoin("users as owners", "owners.id", "aliases.user_id");
type AliasQuery = ReturnType<typeof aliasBaseQuery>;
