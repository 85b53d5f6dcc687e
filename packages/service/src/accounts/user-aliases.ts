import { randomInt } from "node:crypto";
import type { Kysely, Transaction } from "kysely";
import { type Database, flag } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import type { Locale } from "../i18n/catalogue.ts";
import { parseNewAddress } from "./addresses.ts";
import type { LifecycleService } from "./lifecycle.ts";
import { isActiveUser } from "./queries.ts";
import type { ReservedNameService } from "./reserved-names.ts";
import { effectiveRoles } from "./roles.ts";
import { nowSeconds, type User, userNotFound } from "./users.ts";

/** Limits of the reference (5.6): fewer than 100 active random and fewer than 3 active custom aliases. */
export const maxRandomAliases = 100;
export const maxCustomAliases = 3;
export const maxAliasNoteLength = 40;
const randomLocalPartLength = 24;
const randomAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz";
/** The reference's character rule for a custom local part; our address syntax applies on top. */
const customLocalPart = /^[a-z0-9._-]+$/;

export const ownAliasNoteTooLong = refusal<{ max: number }>(
  "own_alias.note_too_long",
  "invalid",
  ({ max }) => `note: at most ${max} characters`,
);
export const ownAliasRandomLimit = refusal<{ max: number }>(
  "own_alias.random_limit",
  "conflict",
  ({ max }) => `at most ${max} random aliases`,
);
export const ownAliasCustomLimit = refusal<{ max: number }>(
  "own_alias.custom_limit",
  "conflict",
  ({ max }) => `at most ${max} custom aliases`,
);
export const ownAliasCharacters = refusal(
  "own_alias.characters",
  "invalid",
  () => "local part: only letters, digits, '-', '_' and '.' are allowed",
);
export const ownAliasSyntax = refusal("own_alias.syntax", "invalid", () => "local part: not a valid address");
export const ownAliasTaken = refusal("own_alias.taken", "conflict", () => "the address is already taken");
export const ownAliasNotFound = refusal("own_alias.not_found", "not_found", () => "alias not found");
export const ownAliasNotDeletable = refusal(
  "own_alias.not_deletable",
  "forbidden",
  () => "custom aliases are deleted by the administrators",
);
export const ownAliasesNotManaged = refusal(
  "own_alias.not_permitted",
  "forbidden",
  () => "this account may not manage aliases",
);

/** An alias as its owner sees it. */
export interface OwnAlias {
  id: number;
  source: string;
  random: boolean;
  note: string | null;
  createdAt: number;
  /** Whether the owner may delete it: random ones always, custom ones only domain admins and admins. */
  deletable: boolean;
}

export interface OwnAliases {
  /** The domain new aliases are created in: the user's own. */
  domain: string;
  random: OwnAlias[];
  custom: OwnAlias[];
  randomLeft: number;
  customLeft: number;
}

/** Runs in the creating transaction (the "alias created" e-mail goes into the outbox here). */
export type AliasCreatedHook = (
  trx: Transaction<Database>,
  alias: OwnAlias,
  owner: User,
  options: CreateOptions,
) => Promise<unknown>;

export interface CreateOptions {
  /** The language of the person creating it (their e-mail is written in it). */
  locale?: Locale;
}

const mayDeleteCustom = (user: User) => effectiveRoles(user.roles).has("ROLE_DOMAIN_ADMIN");

/** A duplicate key on `aliases.source` (two creations racing for one address), in each dialect's words. */
function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: unknown; errno?: unknown };
  return e?.code === "SQLITE_CONSTRAINT_UNIQUE" || e?.code === "23505" || e?.errno === 1062;
}

/**
 * The aliases a user manages for themselves (reference 5.6), better than the reference where it
 * errs (13.16): random addresses are retried on a collision, custom local parts follow our address
 * syntax as well (no leading, trailing or double dots), the custom limit counts across domains as
 * the page does, and a user's creations are serialized (the user's row is locked), so two
 * requests at once cannot pass a limit.
 */
export class UserAliasService {
  readonly #db: Kysely<Database>;
  readonly #lifecycle: LifecycleService;
  readonly #reservedNames: ReservedNameService;
  readonly #onCreated: AliasCreatedHook;

  constructor(
    db: Kysely<Database>,
    lifecycle: LifecycleService,
    reservedNames: ReservedNameService,
    onCreated: AliasCreatedHook = async () => {},
  ) {
    this.#db = db;
    this.#lifecycle = lifecycle;
    this.#reservedNames = reservedNames;
    this.#onCreated = onCreated;
  }

  /** The user's active aliases in every domain (cross-domain ones an admin gave them included). */
  async list(user: User): Promise<OwnAliases> {
    const [rows, domain] = await Promise.all([
      this.#db
        .selectFrom("aliases")
        .select(["id", "source", "random", "note", "created_at"])
        .where("user_id", "=", user.id)
        .where("deleted", "=", 0)
        .orderBy("created_at")
        .orderBy("id")
        .execute(),
      this.#domainOf(user),
    ]);
    const aliases = rows.map((row) => this.#own(user, row));
    const random = aliases.filter((a) => a.random);
    const custom = aliases.filter((a) => !a.random);
    return {
      domain,
      random,
      custom,
      randomLeft: Math.max(0, maxRandomAliases - random.length),
      customLeft: Math.max(0, maxCustomAliases - custom.length),
    };
  }

  /** Sources of the user's active custom aliases: with the own address, the OpenPGP identities. */
  async customSources(user: User): Promise<string[]> {
    const rows = await this.#db
      .selectFrom("aliases")
      .select("source")
      .where("user_id", "=", user.id)
      .where("deleted", "=", 0)
      .where("random", "=", 0)
      .orderBy("source")
      .execute();
    return rows.map((row) => row.source);
  }

  /** A random address (24 of [0-9a-z]) in the user's domain. */
  async createRandom(user: User, rawNote?: string | null, options: CreateOptions = {}): Promise<OwnAlias> {
    this.#assertMayManage(user);
    const note = checkNote(rawNote);
    const domain = await this.#domainOf(user);
    return this.#create(user, true, note, options, async (trx) => {
      // 36^24 addresses: a collision is all but impossible, yet it is checked and retried, not assumed.
      for (let attempt = 0; attempt < 5; attempt++) {
        const email = `${randomLocalPart()}@${domain}`;
        if (await isAvailable(trx, email)) return email;
      }
      throw new Error("no free random alias address after 5 attempts");
    });
  }

  /** `localPart@<user's domain>`, lower-cased; the address must never have been used by anyone. */
  async createCustom(
    user: User,
    rawLocalPart: string,
    rawNote?: string | null,
    options: CreateOptions = {},
  ): Promise<OwnAlias> {
    this.#assertMayManage(user);
    const note = checkNote(rawNote);
    const localPart = String(rawLocalPart ?? "")
      .trim()
      .toLowerCase();
    if (!customLocalPart.test(localPart)) throw ownAliasCharacters();
    const domain = await this.#domainOf(user);
    const address = parseNewAddress(`${localPart}@${domain}`);
    if (!address) throw ownAliasSyntax();
    return this.#create(user, false, note, options, async (trx) => {
      // A reserved local part (postmaster, abuse, the operator's list) is taken in every domain.
      if (
        !(await isAvailable(trx, address.email)) ||
        (await this.#reservedNames.isReserved(address.localPart, trx))
      )
        throw ownAliasTaken();
      return address.email;
    });
  }

  /**
   * Soft delete (the address stays taken for ever; a key published for it goes unless another
   * holder remains). Only the owner may delete, and a custom alias only a domain admin or admin.
   */
  async delete(user: User, id: number): Promise<string> {
    this.#assertMayManage(user);
    return this.#db.transaction().execute(async (trx) => {
      const row = Number.isSafeInteger(id)
        ? await trx
            .selectFrom("aliases")
            .select(["source", "random", "user_id", "deleted"])
            .where("id", "=", id)
            .executeTakeFirst()
        : undefined;
      if (!row || flag(row.deleted) || row.user_id !== user.id) throw ownAliasNotFound();
      if (!flag(row.random) && !mayDeleteCustom(user)) throw ownAliasNotDeletable();
      await this.#lifecycle.deleteAlias(row.source, trx);
      return row.source;
    });
  }

  async #create(
    user: User,
    random: boolean,
    note: string | null,
    options: CreateOptions,
    chooseAddress: (trx: Transaction<Database>) => Promise<string>,
  ): Promise<OwnAlias> {
    try {
      return await this.#db.transaction().execute(async (trx) => {
        // A no-op write on the owner's row: it locks the row (PostgreSQL, MariaDB; SQLite locks the
        // database), so the count below cannot be outrun by a second request of the same user.
        const locked = await trx
          .updateTable("users")
          .set((eb) => ({ updated_at: eb.ref("updated_at") }))
          .where("id", "=", user.id)
          .where(isActiveUser)
          .executeTakeFirst();
        if (Number(locked.numUpdatedRows) !== 1) throw userNotFound();
        const count = await trx
          .selectFrom("aliases")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .where("user_id", "=", user.id)
          .where("deleted", "=", 0)
          .where("random", "=", random ? 1 : 0)
          .executeTakeFirstOrThrow();
        const limit = random ? maxRandomAliases : maxCustomAliases;
        if (Number(count.n) >= limit)
          throw (random ? ownAliasRandomLimit : ownAliasCustomLimit)({ max: limit });
        const source = await chooseAddress(trx);
        const now = nowSeconds();
        await trx
          .insertInto("aliases")
          .values({
            source,
            domain_id: user.domainId,
            destinations: JSON.stringify([user.email]),
            user_id: user.id,
            smtp_quota_per_hour: null,
            smtp_quota_per_day: null,
            random: random ? 1 : 0,
            note,
            created_at: now,
            updated_at: now,
            deleted: 0,
          })
          .execute();
        const row = await trx
          .selectFrom("aliases")
          .select(["id", "source", "random", "note", "created_at"])
          .where("source", "=", source)
          .executeTakeFirstOrThrow();
        const alias = this.#own(user, row);
        await this.#onCreated(trx, alias, user, options);
        return alias;
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw ownAliasTaken();
      throw error;
    }
  }

  #own(
    user: User,
    row: { id: number; source: string; random: number | boolean; note: string | null; created_at: number },
  ): OwnAlias {
    const random = flag(row.random);
    return {
      id: row.id,
      source: row.source,
      random,
      note: row.note,
      createdAt: Number(row.created_at),
      deletable: random || mayDeleteCustom(user),
    };
  }

  #assertMayManage(user: User) {
    if (user.deleted || effectiveRoles(user.roles).has("ROLE_SPAM")) throw ownAliasesNotManaged();
  }

  async #domainOf(user: User): Promise<string> {
    const row = await this.#db
      .selectFrom("domains")
      .select("name")
      .where("id", "=", user.domainId)
      .executeTakeFirstOrThrow();
    return row.name;
  }
}

/** Trimmed; empty is none; at most 40 characters (the reference's form limit). */
export function checkNote(raw: unknown): string | null {
  if (raw === undefined || raw === null) return null;
  const note = String(raw).trim();
  if (note === "") return null;
  if ([...note].length > maxAliasNoteLength) throw ownAliasNoteTooLong({ max: maxAliasNoteLength });
  return note;
}

function randomLocalPart(): string {
  let out = "";
  for (let i = 0; i < randomLocalPartLength; i++) out += randomAlphabet[randomInt(randomAlphabet.length)];
  return out;
}

/** Never used by a user or an alias, deleted ones included: addresses are not handed out twice. */
async function isAvailable(db: Kysely<Database>, email: string): Promise<boolean> {
  const [user, alias] = await Promise.all([
    db.selectFrom("users").select("id").where("email", "=", email).executeTakeFirst(),
    db.selectFrom("aliases").select("id").where("source", "=", email).executeTakeFirst(),
  ]);
  return !user && !alias;
}
