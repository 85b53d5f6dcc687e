import { randomInt } from "node:crypto";
import { type Kysely, sql, type Transaction } from "kysely";
import { type Database, flag } from "../db/schema.ts";
import { isRefusal, refusal } from "../errors.ts";
import { parseAddress } from "./addresses.ts";
import { type DomainInvitations, domainNotFound, toInvitations } from "./domains.ts";
import type { Listing, Page } from "./paging.ts";
import { activeUserRow, isActiveUser, managedDomain } from "./queries.ts";
import { effectiveRoles, parseStoredRoles, type Role } from "./roles.ts";
import { attemptFrom, type CheckOrigin, type SignInGuard } from "./sign-in-guard.ts";
import { nowSeconds, userNotFound } from "./users.ts";

/**
 * Invite codes (the reference's vouchers, sections 1.4, 5.5 and 5.6): each registers one account
 * in its domain. A code is a secret anyone may guess at, so new codes are 20 characters of an
 * alphabet without look-alikes (2-9 and A-Z but I, L, O: 31 symbols, about 99 bits), written in
 * groups of five joined by dashes; typed in any case, with or without dashes and spaces, they are
 * the same code. userli's codes (six of [0-9a-zA-Z], found in any case) keep working as imported.
 * Differences from the reference (its section 13): codes are unique whatever their case (the
 * reference's database collation made codes differing only in case collide, and its generator
 * never retried); the automatic codes are handed out by an explicit POST, never as a side effect
 * of viewing a page (bug 19); "suspicious" follows the role hierarchy, so the codes of a
 * spam-flagged user stop working too (bug 12); a code whose owner is gone is invalid rather than a
 * crash (bug 13). Whether a code can be used is asked in one place, `InviteCodeService.check`, and
 * every "no" is the same answer, so no answer tells an unknown code from a used or void one.
 */
/** The symbols of new codes: digits and capitals without the look-alikes 0/O, 1/I/L. */
export const inviteCodeAlphabet = "23456789ABCDEFGHJKMNPQRSTUVWXYZ";
const groupLength = 5;
const groups = 4;
/** The symbols of a new code, without its dashes. */
export const inviteCodeSymbols = groupLength * groups;
/** The bits of chance in a new code (log2 31 per symbol): at least 80. */
export const inviteCodeBits = inviteCodeSymbols * Math.log2(inviteCodeAlphabet.length);
/** A new code as stored and shown: `XXXXX-XXXXX-XXXXX-XXXXX`. */
export const inviteCodePattern = new RegExp(
  `^[${inviteCodeAlphabet}]{${groupLength}}(?:-[${inviteCodeAlphabet}]{${groupLength}}){${groups - 1}}$`,
);
/** userli's codes, imported as they are: six of [0-9a-zA-Z], found in any case. */
export const legacyInviteCodePattern = /^[0-9A-Za-z]{6}$/;
/** Attempts at a free code: with 31^20 codes a second attempt is already a curiosity. */
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

export const inviteCodeNotFound = refusal(
  "invite_code.not_found",
  "not_found",
  () => "invite code not found",
);
/**
 * The one answer for a code that cannot register an account now, whatever the reason (unknown,
 * mistyped, already used, its owner gone or suspicious, its domain not inviting): a guesser learns
 * nothing from it.
 */
export const inviteCodeUnusable = refusal(
  "invite_code.unusable",
  "invalid",
  () => "code: this invite code cannot be used",
);
/** Too many unusable codes from this client (the sign-in guard); `retryAfter` in seconds. */
export const inviteCodeThrottled = refusal<{ retryAfter: number }>(
  "invite_code.throttled",
  "throttled",
  () => "too many invalid invite codes, try again later",
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
  () => "code: 20 of 2-9 and A-Z without I, L and O, in groups of five (dashes and spaces are ignored)",
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

/** A code that can register an account now, and its domain's invitation settings. */
export interface UsableInviteCode {
  code: InviteCode;
  invitations: DomainInvitations;
}

/** A fresh code from the operating system's random source, in its written form. */
export function generateInviteCode(): string {
  const symbols = Array.from(
    { length: inviteCodeSymbols },
    () => inviteCodeAlphabet[randomInt(inviteCodeAlphabet.length)],
  );
  const parts: string[] = [];
  for (let i = 0; i < groups; i++) parts.push(symbols.slice(i * groupLength, (i + 1) * groupLength).join(""));
  return parts.join("-");
}

/**
 * A code as typed, in the form it is stored: a new code in capitals with its dashes (typed in any
 * case, dashes and spaces anywhere), a userli code as typed (it is found in any case); null for
 * anything that is neither.
 */
export function normalizeInviteCode(raw: unknown): { code: string; legacy: boolean } | null {
  if (typeof raw !== "string" || raw.length > 100) return null;
  const bare = raw.replace(/[\s-]+/g, "");
  if (legacyInviteCodePattern.test(bare)) return { code: bare, legacy: true };
  const upper = bare.toUpperCase();
  if (upper.length !== inviteCodeSymbols || [...upper].some((c) => !inviteCodeAlphabet.includes(c)))
    return null;
  const parts: string[] = [];
  for (let i = 0; i < groups; i++) parts.push(upper.slice(i * groupLength, (i + 1) * groupLength));
  return { code: parts.join("-"), legacy: false };
}

/** Every stored spelling a normalised code may have: a userli code's case variants, a new code itself. */
const spellings = (code: { code: string; legacy: boolean }): string[] =>
  code.legacy ? caseVariants(code.code) : [code.code];

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

  readonly #guard: SignInGuard;

  constructor(db: Db, guard: SignInGuard) {
    this.#db = db;
    this.#guard = guard;
  }

  /** The code of any spelling, or null. */
  async find(rawCode: unknown, db: Db = this.#db): Promise<InviteCode | null> {
    const normalized = normalizeInviteCode(rawCode);
    if (!normalized) return null;
    const row = await selectCodes(db)
      .where("invite_codes.code", "in", spellings(normalized))
      .executeTakeFirst();
    return row ? toInviteCode(row) : null;
  }

  /**
   * The one check of an invite code, at every place one is typed or followed: the code exists, is
   * not redeemed, its owner is an active user who is not suspicious (by the hierarchy), and its
   * domain takes invitations. Every other case throws the same `invite_code.unusable`, so the
   * answer never tells which (a guesser learns nothing from it). Runs under the sign-in guard, per
   * client: a client guessing codes is throttled (`invite_code.throttled`) like one guessing passwords.
   */
  async check(rawCode: unknown, origin: CheckOrigin = {}): Promise<UsableInviteCode> {
    const guarded = await this.#guard.attempt(attemptFrom("invite_code", null, origin), async () => {
      try {
        return { right: true, value: await this.#usable(rawCode, this.#db) };
      } catch (error) {
        if (isRefusal(error, inviteCodeUnusable)) return { right: false, value: null };
        throw error;
      }
    });
    if (guarded.outcome === "throttled") throw inviteCodeThrottled({ retryAfter: guarded.retryAfter });
    if (!guarded.value) throw inviteCodeUnusable();
    return guarded.value;
  }

  async #usable(rawCode: unknown, db: Db): Promise<UsableInviteCode> {
    const code = await this.find(rawCode, db);
    if (!code || code.redeemedAt !== null || code.ownerId === null) throw inviteCodeUnusable();
    const owner = await db
      .selectFrom("users")
      .select(["roles"])
      .where("id", "=", code.ownerId)
      .where(isActiveUser)
      .executeTakeFirst();
    if (!owner || isSuspicious(parseStoredRoles(owner.roles))) throw inviteCodeUnusable();
    const invitations = await domainInvitations(db, code.domainId);
    if (!invitations.enabled) throw inviteCodeUnusable();
    return { code, invitations };
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
   * unless one is given (then in the form of a new code, free).
   * `scope.domainId` limits a domain admin to its own domain.
   */
  async create(
    input: InviteCodeInput,
    scope: { domainId?: number } = {},
    trx?: Transaction<Database>,
  ): Promise<InviteCode> {
    if (!trx) return this.#db.transaction().execute((t) => this.create(input, scope, t));
    // A code given by an admin is a new code like any other: userli's short form is for imports only.
    const normalized =
      input.code === undefined || input.code === null ? null : normalizeInviteCode(input.code);
    if (normalized?.legacy || (normalized === null && input.code !== undefined && input.code !== null))
      throw inviteCodeMalformed();
    const given = normalized?.code ?? null;
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
        .where("code", "in", spellings({ code, legacy: legacyInviteCodePattern.test(code) }))
        .executeTakeFirst();
      if (taken) {
        if (input.code) throw inviteCodeUsed({ code });
        continue;
      }
      // A savepoint would let a unique violation be retried inside the transaction on PostgreSQL;
      // the check above makes that case (the same code drawn twice at the same moment)
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
