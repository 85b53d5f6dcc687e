import { randomInt } from "node:crypto";
import { type Kysely, sql, type Transaction } from "kysely";
import { type Database, flag } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { parseAddress } from "./addresses.ts";
import { type DomainInvitations, domainNotFound, toInvitations } from "./domains.ts";
import type { Listing, Page } from "./paging.ts";
import { activeUserRow, isActiveUser, managedDomain } from "./queries.ts";
import { effectiveRoles, parseStoredRoles, type Role } from "./roles.ts";
import { nowSeconds, userNotFound } from "./users.ts";

/**
 * Invite codes (the reference's vouchers, sections 1.4, 5.5 and 5.6): six characters of
 * [0-9a-zA-Z], each registers one account in its domain. Differences from the reference (its
 * section 13): codes are unique whatever their case (the reference's database collation made codes
 * differing only in case collide, and its generator never retried); the automatic codes are handed
 * out by an explicit POST, never as a side effect of viewing a page (bug 19); "suspicious" follows
 * the role hierarchy, so the codes of a spam-flagged user stop working too (bug 12); a code whose
 * owner is gone is invalid rather than a crash (bug 13).
 */
export const inviteCodeLength = 6;
export const inviteCodePattern = /^[0-9A-Za-z]{6}$/;
const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
/** Attempts at a free code: with 62^6 codes a second attempt is already a curiosity. */
const generateAttempts = 10;
/** Codes one "Get my invite codes" may hand out at most, whatever the domain's limit says. */
const maxHandOut = 100;

export interface InviteCode {
  id: number;
  code: string;
  domainId: number;
  domain: string;
  /** The inviter; null once that user is gone. */
  ownerId: number | null;
  owner: string | null;
  redeemedAt: number | null;
  /** The account registered with it, while it exists. */
  redeemedBy: string | null;
  createdAt: number;
}

/** Why a code cannot be used; the pages say "invalid" for all but `redeemed` and `invitations_disabled`. */
export const inviteCodeNotFound = refusal(
  "invite_code.not_found",
  "not_found",
  () => "invite code not found",
);
export const inviteCodesOnlyMultipliers = refusal(
  "invite_code.only_multipliers",
  "invalid",
  () => "only multipliers may create more invite codes",
);
export const invitationsOff = refusal(
  "invite_code.invitations_off",
  "invalid",
  () => "invitations are turned off for this domain",
);
export const inviteCodeMalformed = refusal(
  "invite_code.malformed",
  "invalid",
  () => "code: must be exactly 6 letters and digits (a-z, A-Z, 0-9)",
);
export const inviteDomainNotManaged = refusal(
  "invite_code.domain_not_managed",
  "invalid",
  () => "domain: not a managed domain",
);
export const inviteDomainNotOwn = refusal(
  "invite_code.domain_not_own",
  "invalid",
  () => "domain: you may create invite codes only for your own domain",
);
export const inviteOwnerNotActive = refusal(
  "invite_code.owner_not_active",
  "invalid",
  () => "owner: not an active user",
);
export const inviteCodeUsed = refusal<{ code: string }>(
  "invite_code.used",
  "conflict",
  ({ code }) => `code: ${code} is already used`,
);

export type InviteCodeProblem = "unknown" | "redeemed" | "invalid_owner" | "invitations_disabled";

export type InviteCodeCheck =
  | { ok: true; code: InviteCode; invitations: DomainInvitations }
  | { ok: false; problem: InviteCodeProblem; code: InviteCode | null };

/** A fresh code from the operating system's random source. */
export function generateInviteCode(): string {
  let code = "";
  for (let i = 0; i < inviteCodeLength; i++) code += alphabet[randomInt(alphabet.length)];
  return code;
}

/**
 * Every spelling of a code that differs only in case (2^letters, at most 64 for six characters).
 * Codes are unique whatever their case; looking them up as `code IN (spellings)` uses the unique
 * index on every database, where `lower(code) = ?` would read the whole table.
 */
export function caseVariants(code: string): string[] {
  let variants = [""];
  for (const char of code) {
    const lower = char.toLowerCase();
    const upper = char.toUpperCase();
    variants =
      lower === upper ? variants.map((v) => v + char) : variants.flatMap((v) => [v + lower, v + upper]);
  }
  return variants;
}

/** Suspicious by the hierarchy: ROLE_SUSPICIOUS or anything implying it (ROLE_SPAM). */
export const isSuspicious = (roles: readonly Role[]): boolean => effectiveRoles(roles).has("ROLE_SUSPICIOUS");

/** May create invite codes beyond the domain's limit: ROLE_MULTIPLIER, domain admins and admins. */
export const isMultiplier = (roles: readonly Role[]): boolean => {
  const effective = effectiveRoles(roles);
  return effective.has("ROLE_MULTIPLIER") || effective.has("ROLE_DOMAIN_ADMIN");
};

/** What the rule of the automatic codes needs to know about a user. */
export interface InviteCodeHolder {
  roles: readonly Role[];
  lastLoginTime: number | null;
  createdAt: number;
  deleted: boolean;
}

/** Why no automatic code is due, or null when some are. */
export type NotDueReason = "disabled" | "suspicious" | "never_signed_in" | "waiting" | "limit_reached";

export interface InviteCodeAllowance {
  /** Codes "Get my invite codes" hands out now. */
  due: number;
  reason: NotDueReason | null;
  /** When the waiting period ends (Unix seconds). */
  waitingUntil: number;
  /** Codes the user ever owned (redeemed or not) and the domain's limit. */
  owned: number;
  limit: number;
}

/**
 * The rule of the automatic codes (reference section 5.6): the domain's invitations are on, the
 * user is not suspicious, has signed in at least once and is older than the waiting period; then
 * the user gets codes up to the limit, counting every code ever owned (redeemed ones are not
 * replaced).
 */
export function inviteCodeAllowance(
  user: InviteCodeHolder,
  invitations: DomainInvitations,
  owned: number,
  now: number,
): InviteCodeAllowance {
  const waitingUntil = user.createdAt + invitations.waitingPeriodDays * 86400;
  const answer = (reason: NotDueReason | null, due = 0): InviteCodeAllowance => ({
    due,
    reason,
    waitingUntil,
    owned,
    limit: invitations.limit,
  });
  if (!invitations.enabled || user.deleted) return answer("disabled");
  if (isSuspicious(user.roles)) return answer("suspicious");
  if (user.lastLoginTime === null) return answer("never_signed_in");
  if (now < waitingUntil) return answer("waiting");
  if (owned >= invitations.limit) return answer("limit_reached");
  return answer(null, Math.min(invitations.limit - owned, maxHandOut));
}

/** The list filters of the admin area; `domainId` also scopes a domain admin to its domain. */
export interface InviteCodeFilter {
  domainId?: number;
  status?: "all" | "redeemed" | "unredeemed";
}

/** What an admin gives to create a code: the domain it registers in, its owner, perhaps the code. */
export interface InviteCodeInput {
  domain: string;
  owner: string;
  code?: string | null;
}

type Db = Kysely<Database>;

export class InviteCodeService {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  /** The code of any spelling, or null. */
  async find(rawCode: string, db: Db = this.#db): Promise<InviteCode | null> {
    if (typeof rawCode !== "string" || !inviteCodePattern.test(rawCode)) return null;
    const row = await selectCodes(db)
      .where("invite_codes.code", "in", caseVariants(rawCode))
      .executeTakeFirst();
    return row ? toInviteCode(row) : null;
  }

  /**
   * Whether a code can register an account now: it exists, is not redeemed, its owner is an
   * active user who is not suspicious (by the hierarchy), and its domain takes invitations.
   */
  async validate(rawCode: string, db: Db = this.#db): Promise<InviteCodeCheck> {
    const code = await this.find(rawCode, db);
    if (!code) return { ok: false, problem: "unknown", code: null };
    if (code.redeemedAt !== null) return { ok: false, problem: "redeemed", code };
    const owner =
      code.ownerId === null
        ? undefined
        : await db
            .selectFrom("users")
            .select(["roles"])
            .where("id", "=", code.ownerId)
            .where(isActiveUser)
            .executeTakeFirst();
    if (!owner || isSuspicious(parseStoredRoles(owner.roles)))
      return { ok: false, problem: "invalid_owner", code };
    const invitations = await domainInvitations(db, code.domainId);
    if (!invitations.enabled) return { ok: false, problem: "invitations_disabled", code };
    return { ok: true, code, invitations };
  }

  /**
   * Marks a code redeemed by a new account, inside the registration's transaction. The update is
   * conditional, so of two registrations racing for one code exactly one redeems it; false for
   * the other (its transaction must roll back).
   */
  async redeem(trx: Transaction<Database>, codeId: number, userId: number): Promise<boolean> {
    const result = await trx
      .updateTable("invite_codes")
      .set({ redeemed_at: nowSeconds(), redeemed_by_id: userId })
      .where("id", "=", codeId)
      .where("redeemed_at", "is", null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** The user's codes that are not redeemed yet, oldest first (the account's invite-code page). */
  async unredeemedOf(userId: number): Promise<InviteCode[]> {
    const rows = await selectCodes(this.#db)
      .where("invite_codes.user_id", "=", userId)
      .where("invite_codes.redeemed_at", "is", null)
      .orderBy("invite_codes.created_at")
      .orderBy("invite_codes.id")
      .execute();
    return rows.map(toInviteCode);
  }

  /** Whether the user may have invite codes at all: the own domain invites and the user is not suspicious. */
  async mayHaveCodes(user: { roles: readonly Role[]; domainId: number }): Promise<boolean> {
    if (isSuspicious(user.roles)) return false;
    return (await domainInvitations(this.#db, user.domainId)).enabled;
  }

  /** How many automatic codes the user would get now, and if none, why. */
  async allowance(userId: number): Promise<InviteCodeAllowance> {
    return this.#allowance(this.#db, userId);
  }

  async #allowance(db: Db, userId: number): Promise<InviteCodeAllowance> {
    const user = await db
      .selectFrom("users")
      .select(["domain_id", "roles", "last_login_time", "created_at", "deleted"])
      .where("id", "=", userId)
      .executeTakeFirst();
    if (!user) throw userNotFound();
    const [invitations, owned] = await Promise.all([
      domainInvitations(db, user.domain_id),
      db
        .selectFrom("invite_codes")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("user_id", "=", userId)
        .executeTakeFirstOrThrow(),
    ]);
    return inviteCodeAllowance(
      {
        roles: parseStoredRoles(user.roles),
        lastLoginTime: user.last_login_time,
        createdAt: Number(user.created_at),
        deleted: flag(user.deleted),
      },
      invitations,
      Number(owned.n),
      nowSeconds(),
    );
  }

  /**
   * Hands out the automatic codes that are due ("Get my invite codes", a POST). The user's row is
   * locked first, so two clicks at once cannot both count the same codes and hand out twice the
   * limit. Returns the new codes (none when none are due).
   */
  async handOut(userId: number): Promise<InviteCode[]> {
    return this.#db.transaction().execute(async (trx) => {
      await lockUser(trx, userId);
      const allowance = await this.#allowance(trx, userId);
      if (allowance.due === 0) return [];
      const user = await trx
        .selectFrom("users")
        .select("domain_id")
        .where("id", "=", userId)
        .executeTakeFirstOrThrow();
      const created: InviteCode[] = [];
      for (let i = 0; i < allowance.due; i++)
        created.push(await this.#insert(trx, { domainId: user.domain_id, ownerId: userId }));
      return created;
    });
  }

  /**
   * One more code for a multiplier (ROLE_MULTIPLIER, domain admins, admins), for the own domain and
   * beyond the limit; the domain must take invitations and the user must not be suspicious.
   */
  async createOneMore(userId: number): Promise<InviteCode> {
    return this.#db.transaction().execute(async (trx) => {
      const user = await trx
        .selectFrom("users")
        .select(["domain_id", "roles"])
        .where("id", "=", userId)
        .where(isActiveUser)
        .executeTakeFirst();
      if (!user) throw userNotFound();
      const roles = parseStoredRoles(user.roles);
      if (isSuspicious(roles) || !isMultiplier(roles)) throw inviteCodesOnlyMultipliers();
      if (!(await domainInvitations(trx, user.domain_id)).enabled) throw invitationsOff();
      return this.#insert(trx, { domainId: user.domain_id, ownerId: userId });
    });
  }

  /**
   * The admin area's create: a code for a domain, owned by an active user; the code is generated
   * unless one is given (then exactly six of [0-9a-zA-Z], free whatever its case).
   * `scope.domainId` limits a domain admin to its own domain.
   */
  async create(
    input: InviteCodeInput,
    scope: { domainId?: number } = {},
    trx?: Transaction<Database>,
  ): Promise<InviteCode> {
    if (!trx) return this.#db.transaction().execute((t) => this.create(input, scope, t));
    const given = input.code === undefined || input.code === null ? null : input.code;
    if (given !== null && (typeof given !== "string" || !inviteCodePattern.test(given)))
      throw inviteCodeMalformed();
    const domain = typeof input.domain === "string" ? await managedDomain(trx, input.domain) : null;
    if (!domain) throw inviteDomainNotManaged();
    if (scope.domainId !== undefined && domain.id !== scope.domainId) throw inviteDomainNotOwn();
    const address = typeof input.owner === "string" ? parseAddress(input.owner.trim()) : null;
    const owner = address ? await activeUserRow(trx, address.email) : undefined;
    if (!owner) throw inviteOwnerNotActive();
    return this.#insert(trx, { domainId: domain.id, ownerId: owner.id, code: given });
  }

  async get(id: number, scope: { domainId?: number } = {}, db: Db = this.#db): Promise<InviteCode> {
    let query = selectCodes(db).where("invite_codes.id", "=", id);
    if (scope.domainId !== undefined) query = query.where("invite_codes.domain_id", "=", scope.domainId);
    const row = await query.executeTakeFirst();
    if (!row) throw inviteCodeNotFound();
    return toInviteCode(row);
  }

  /** The admin area's list: search in the code and the owner's address, newest first. */
  async list(page: Page, filter: InviteCodeFilter = {}): Promise<Listing<InviteCode>> {
    let query = selectCodes(this.#db);
    if (filter.domainId !== undefined) query = query.where("invite_codes.domain_id", "=", filter.domainId);
    if (filter.status === "redeemed") query = query.where("invite_codes.redeemed_at", "is not", null);
    if (filter.status === "unredeemed") query = query.where("invite_codes.redeemed_at", "is", null);
    if (page.search.includes("\0")) query = query.where(sql<boolean>`1 = 0`);
    else if (page.search !== "") {
      const pattern = likePattern(page.search);
      query = query.where((eb) =>
        eb.or([
          sql<boolean>`lower(${sql.ref("invite_codes.code")}) LIKE ${pattern} ESCAPE '!'`,
          sql<boolean>`${sql.ref("owner.email")} LIKE ${pattern} ESCAPE '!'`,
        ]),
      );
    }
    const [rows, count] = await Promise.all([
      query
        .orderBy("invite_codes.created_at", "desc")
        .orderBy("invite_codes.id", "desc")
        .limit(page.limit)
        .offset(page.offset)
        .execute(),
      query
        .clearSelect()
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .executeTakeFirstOrThrow(),
    ]);
    return { items: rows.map(toInviteCode), total: Number(count.n) };
  }

  /** Deletes a code (hard, as the reference); `scope.domainId` limits a domain admin to its domain. */
  async delete(id: number, scope: { domainId?: number } = {}, db: Db = this.#db): Promise<void> {
    let query = db.deleteFrom("invite_codes").where("id", "=", id);
    if (scope.domainId !== undefined) query = query.where("domain_id", "=", scope.domainId);
    const result = await query.executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) throw inviteCodeNotFound();
  }

  /**
   * Inserts one code, generated unless given. A generated code that is taken in any spelling is
   * drawn again; a concurrent insert of the very same code fails on the unique index and is drawn
   * again too. A given code that is taken is a conflict.
   */
  async #insert(
    trx: Transaction<Database>,
    input: { domainId: number; ownerId: number; code?: string | null },
  ): Promise<InviteCode> {
    for (let attempt = 0; attempt < generateAttempts; attempt++) {
      const code = input.code ?? generateInviteCode();
      const taken = await trx
        .selectFrom("invite_codes")
        .select("id")
        .where("code", "in", caseVariants(code))
        .executeTakeFirst();
      if (taken) {
        if (input.code) throw inviteCodeUsed({ code });
        continue;
      }
      // A savepoint would let a unique violation be retried inside the transaction on PostgreSQL;
      // the check above makes that case (the same six characters drawn twice at the same moment)
      // rare enough to answer with the database's error instead.
      await trx
        .insertInto("invite_codes")
        .values({
          code,
          domain_id: input.domainId,
          user_id: input.ownerId,
          redeemed_at: null,
          redeemed_by_id: null,
          created_at: nowSeconds(),
        })
        .execute();
      const row = await selectCodes(trx).where("invite_codes.code", "=", code).executeTakeFirstOrThrow();
      return toInviteCode(row);
    }
    throw new Error(`no free invite code after ${generateAttempts} attempts`);
  }
}

/**
 * Takes the user's row lock for the rest of the transaction (PostgreSQL, MariaDB; SQLite
 * serialises writing transactions anyway): an update that changes nothing, the one locking
 * statement all three dialects share.
 */
async function lockUser(trx: Transaction<Database>, userId: number): Promise<void> {
  await trx
    .updateTable("users")
    .set((eb) => ({ updated_at: eb.ref("updated_at") }))
    .where("id", "=", userId)
    .execute();
}

async function domainInvitations(db: Db, domainId: number): Promise<DomainInvitations> {
  const row = await db
    .selectFrom("domains")
    .select(["invitation_enabled", "invitation_limit", "invitation_waiting_period_days"])
    .where("id", "=", domainId)
    .executeTakeFirst();
  if (!row) throw domainNotFound();
  return toInvitations(row);
}

function selectCodes(db: Db) {
  return db
    .selectFrom("invite_codes")
    .innerJoin("domains", "domains.id", "invite_codes.domain_id")
    .leftJoin("users as owner", "owner.id", "invite_codes.user_id")
    .leftJoin("users as invitee", "invitee.id", "invite_codes.redeemed_by_id")
    .select([
      "invite_codes.id",
      "invite_codes.code",
      "invite_codes.domain_id",
      "invite_codes.user_id",
      "invite_codes.redeemed_at",
      "invite_codes.created_at",
      "domains.name as domain_name",
      "owner.email as owner_email",
      "invitee.email as invitee_email",
    ]);
}

type CodeRow = Awaited<ReturnType<ReturnType<typeof selectCodes>["executeTakeFirstOrThrow"]>>;

function toInviteCode(row: CodeRow): InviteCode {
  return {
    id: Number(row.id),
    code: row.code,
    domainId: Number(row.domain_id),
    domain: row.domain_name,
    ownerId: row.user_id === null ? null : Number(row.user_id),
    owner: row.owner_email ?? null,
    redeemedAt: row.redeemed_at === null ? null : Number(row.redeemed_at),
    redeemedBy: row.invitee_email ?? null,
    createdAt: Number(row.created_at),
  };
}

/** `%text%` for LIKE, lower-cased, with the text's own wildcards escaped by `!` (as paging.ts). */
function likePattern(text: string): string {
  return `%${text.toLowerCase().replace(/[!%_]/g, (c) => `!${c}`)}%`;
}
