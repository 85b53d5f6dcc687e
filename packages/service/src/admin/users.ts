import { type Kysely, sql } from "kysely";
import { parseAddress } from "../accounts/addresses.ts";
import type { Actor, AddressHolder } from "../accounts/admin-scope.ts";
import { assertMay, assertRoleChange, domainScope } from "../accounts/admin-scope.ts";
import { type AppPasswordService, appPasswordsRequiredInvalid } from "../accounts/app-passwords.ts";
import type { AuditLog } from "../accounts/audit-log.ts";
import type { LifecycleService, NewCredentials } from "../accounts/lifecycle.ts";
import { containsText } from "../accounts/paging.ts";
import { activeUserRow, endWebSessions, managedDomain } from "../accounts/queries.ts";
import { normalizeRoles, parseStoredRoles, type Role } from "../accounts/roles.ts";
import { actorOrigin, type SecurityEventLog } from "../accounts/security-events.ts";
import {
  type CreatedUser,
  type CreateUserInput,
  checkRoles,
  parseStringList,
  type TotpInput,
  toUserView,
  type User,
  type UserPatch,
  type UserService,
  type UserView,
} from "../accounts/users.ts";
import type { DialectName } from "../db/database.ts";
import { type Database, flag, toFlag } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { inCursorOrder, type KeysetPage, keysetPage, type ListCursor, readsBackwards } from "./keyset.ts";

/** The filters of the admin user list (reference 5.8): status, role, MailCrypt, 2FA, domain, search. */
export interface UserListFilter {
  search: string;
  status: "active" | "deleted" | "all";
  role?: Role;
  mailCrypt?: boolean;
  twoFactor?: boolean;
  domainId?: number;
}

export interface UserListItem {
  id: number;
  email: string;
  domain: string;
  roles: Role[];
  mailCrypt: boolean;
  twoFactor: boolean;
  deleted: boolean;
  quota: number | null;
  lastLoginTime: number | null;
  createdAt: number;
}

/** What the admin user page shows besides the user itself (reference 5.8 "show"). */
export interface UserFacts {
  id: number;
  user: UserView;
  aliases: { source: string; destinations: string[] }[];
  inviteCodes: { unredeemed: number; redeemed: number };
  invitedBy: string | null;
  openPgpKeysUploaded: number;
  openPgpKey: boolean;
  sessions: number;
}

/** The most matches the users page counts exactly; past it the page says "more than" (see `#pageIds`). */
export const countedMatches = 10_000;

/** The stored roles contain this role (JSON text `["ROLE_USER","ROLE_X"]`; `_` escaped for LIKE). */
export const holdsRole = (role: Role) =>
  sql<boolean>`roles LIKE ${`%"${role.replaceAll("_", "!_")}"%`} ESCAPE '!'`;

/** More distinct stored role strings than this (never written by the service) and the filter keeps the walk. */
const mostRoleValues = 200;

/**
 * The distinct stored role strings that may hold `role`, found along users_roles_deleted_id by one
 * seek each (users share a handful of them), or undefined past `mostRoleValues`. A superset of
 * `holdsRole` in every dialect (compared without case, as SQLite's LIKE does): the caller keeps
 * `holdsRole` beside `roles IN (...)`, so the users matched are exactly those it matches.
 */
async function roleValues(db: Kysely<Database>, role: Role): Promise<string[] | undefined> {
  const needle = `"${role}"`.toLowerCase();
  const holding: string[] = [];
  let last: string | undefined;
  for (let seen = 0; seen <= mostRoleValues; seen++) {
    let next = db.selectFrom("users").select("roles").orderBy("roles").limit(1);
    if (last !== undefined) next = next.where("roles", ">", last);
    const row = await next.executeTakeFirst();
    if (!row) return holding;
    if (row.roles.toLowerCase().includes(needle)) holding.push(row.roles);
    last = row.roles;
  }
  return undefined;
}

/**
 * The active user with this address (as typed: trimmed, any case) and what the scope rule needs of
 * it, its domain and stored roles: an alias's or an invite code's owner. Undefined when there is none.
 */
export async function activeOwner(
  db: Kysely<Database>,
  rawAddress: unknown,
): Promise<{ email: string; domainId: number; roles: Role[] } | undefined> {
  const address = parseAddress(String(rawAddress ?? "").trim());
  const row = address ? await activeUserRow(db, address.email) : undefined;
  return row && { email: row.email, domainId: Number(row.domain_id), roles: parseStoredRoles(row.roles) };
}

/**
 * The user an address belongs to, whatever its state: the user of that address, else the owner of
 * the alias with that source; null when neither (an alias without owner). Addresses are never
 * reused, so there is at most one of each.
 */
export async function addressHolder(db: Kysely<Database>, email: string): Promise<AddressHolder | null> {
  const user = await db
    .selectFrom("users")
    .select(["domain_id", "roles"])
    .where("email", "=", email)
    .executeTakeFirst();
  const row =
    user ??
    (await db
      .selectFrom("aliases")
      .innerJoin("users as owners", "owners.id", "aliases.user_id")
      .select(["owners.domain_id", "owners.roles"])
      .where("aliases.source", "=", email)
      .executeTakeFirst());
  return row ? { domainId: Number(row.domain_id), roles: parseStoredRoles(row.roles) } : null;
}

/**
 * The users of the admin area: every action checks the actor's reach (admin-scope.ts) and is
 * written to the audit log; the work itself is done by the same UserService and LifecycleService
 * functions the admin API and the console use.
 */
/** A domain admin names an address outside every managed domain (an admin gets the service's own answer). */
export const domainOfAddressNotManaged = refusal<{ email: string }>(
  "admin.domain_of_address_not_managed",
  "invalid",
  ({ email }) => `email: domain of ${email} is not managed here`,
);

export class AdminUsers {
  readonly #db: Kysely<Database>;
  readonly #users: UserService;
  readonly #lifecycle: LifecycleService;
  readonly #audit: AuditLog;
  readonly #securityEvents: SecurityEventLog;
  readonly #appPasswords: AppPasswordService;
  readonly #dialect: DialectName;

  constructor(
    db: Kysely<Database>,
    users: UserService,
    lifecycle: LifecycleService,
    audit: AuditLog,
    securityEvents: SecurityEventLog,
    appPasswords: AppPasswordService,
    dialect: DialectName,
  ) {
    this.#db = db;
    this.#users = users;
    this.#lifecycle = lifecycle;
    this.#audit = audit;
    this.#securityEvents = securityEvents;
    this.#appPasswords = appPasswords;
    this.#dialect = dialect;
  }

  /**
   * One page of users, newest first, by keyset on the id (no OFFSET: every page costs the same, the
   * last of 100,000 users as the first). A domain admin sees its own domain without its admins.
   */
  async list(
    actor: Actor,
    filter: UserListFilter,
    cursor: ListCursor,
    limit = 20,
    counted = countedMatches,
  ): Promise<KeysetPage<UserListItem>> {
    let query = usersQuery(this.#db);
    const scope = domainScope(actor);
    if (scope !== null)
      query = query.where("domain_id", "=", scope).where(sql<boolean>`NOT (${holdsRole("ROLE_ADMIN")})`);
    if (filter.domainId !== undefined) query = query.where("domain_id", "=", filter.domainId);
    if (filter.status !== "all") query = query.where("deleted", "=", toFlag(filter.status === "deleted"));
    if (filter.role) {
      // The index answers `roles IN (...)` with one id-ordered range per value; MariaDB cannot
      // index the TEXT column whole (migration 0012), so there the filter stays a walk.
      const values = this.#dialect === "mysql" ? undefined : await roleValues(this.#db, filter.role);
      if (values?.length === 0) query = query.where(sql<boolean>`1 = 0`);
      else if (values) query = query.where("roles", "in", values);
      query = query.where(holdsRole(filter.role));
    }
    if (filter.mailCrypt !== undefined) query = query.where("mail_crypt", "=", toFlag(filter.mailCrypt));
    if (filter.twoFactor === true)
      query = query.where("totp_confirmed", "=", 1).where("totp_secret", "is not", null);
    if (filter.twoFactor === false)
      query = query.where((eb) => eb.or([eb("totp_confirmed", "=", 0), eb("totp_secret", "is", null)]));
    if (filter.search !== "") query = query.where(containsText("email", filter.search));
    const columns = [
      "id",
      "email",
      "domain_id",
      "roles",
      "mail_crypt",
      "totp_confirmed",
      "totp_secret",
      "deleted",
      "quota",
      "last_login_time",
      "created_at",
    ] as const;
    // The page's ids first, from the filter alone (an index walk in id order: users_deleted_id_email
    // holds the address the search tests), then those rows: the wide rows are read only for the
    // page, whatever plan the database picks for the filter.
    const { ids, total, totalAtLeast } = await this.#pageIds(query, cursor, limit, counted);
    const byId = new Map(
      (ids.length === 0
        ? []
        : await this.#db.selectFrom("users").select(columns).where("id", "in", ids).execute()
      ).map((row) => [Number(row.id), row]),
    );
    const rows = ids.flatMap((id) => {
      const row = byId.get(id);
      return row ? [row] : [];
    });
    const domains = await this.#domainNames(rows.map((row) => row.domain_id));
    const items = rows.map((row) => ({
      id: Number(row.id),
      email: row.email,
      domain: domains.get(row.domain_id) ?? "",
      roles: parseStoredRoles(row.roles),
      mailCrypt: flag(row.mail_crypt),
      twoFactor: flag(row.totp_confirmed) && row.totp_secret !== null,
      deleted: flag(row.deleted),
      quota: row.quota === null ? null : Number(row.quota),
      lastLoginTime: row.last_login_time === null ? null : Number(row.last_login_time),
      createdAt: Number(row.created_at),
    }));
    return keysetPage(items, limit, cursor, total, totalAtLeast);
  }

  /**
   * The ids of one page (`limit + 1`, in the cursor's reading order) and the number of matches.
   * One walk along the filter in id order collects the matching ids, at most `counted`:
   * when that is all of them, the count and the page come from it (the index is read once, not
   * twice). A filter matching more is counted as "more than `counted`" and its page read by
   * the cursor: an exact count of a million users reads a million index entries on every page
   * (bench/README.md, "Issue 30"), and past ten thousand the admin narrows the filter anyway.
   */
  async #pageIds(
    query: UserQuery,
    cursor: ListCursor,
    limit: number,
    counted: number,
  ): Promise<{ ids: number[]; total: number; totalAtLeast: boolean }> {
    const all = (
      await query
        .select("id")
        .orderBy("id", "desc")
        .limit(counted + 1)
        .execute()
    ).map((row) => Number(row.id));
    if (all.length <= counted) {
      if (readsBackwards(cursor)) {
        const newer = all.filter((id) => id > (cursor.before as number)).reverse();
        return { ids: newer.slice(0, limit + 1), total: all.length, totalAtLeast: false };
      }
      const older = cursor.after === undefined ? all : all.filter((id) => id < (cursor.after as number));
      return { ids: older.slice(0, limit + 1), total: all.length, totalAtLeast: false };
    }
    const ids =
      cursor.after === undefined && cursor.before === undefined
        ? all.slice(0, limit + 1)
        : (await inCursorOrder(query.select("id"), "id", cursor, limit).execute()).map((row) =>
            Number(row.id),
          );
    return { ids, total: counted, totalAtLeast: true };
  }

  /** A user the actor may see (deleted ones included), or a 404/403. */
  async get(actor: Actor, email: string, db: Kysely<Database> = this.#db): Promise<User> {
    const user = await this.#users.get(email, db);
    assertMay(actor, { kind: "user", domainId: user.domainId, roles: user.roles });
    return user;
  }

  /** The user page's facts; a domain admin sees only the aliases of its own domain. */
  async facts(actor: Actor, email: string): Promise<UserFacts> {
    const user = await this.get(actor, email);
    const db = this.#db;
    const scope = domainScope(actor);
    let aliases = db
      .selectFrom("aliases")
      .select(["source", "destinations"])
      .where("user_id", "=", user.id)
      .where("deleted", "=", 0);
    if (scope !== null) aliases = aliases.where("domain_id", "=", scope);
    const count = (n: { n: number | string | bigint } | undefined) => Number(n?.n ?? 0);
    const [aliasRows, unredeemed, redeemed, invitedBy, uploaded, key, sessions] = await Promise.all([
      aliases.orderBy("source").limit(200).execute(),
      db
        .selectFrom("invite_codes")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("user_id", "=", user.id)
        .where("redeemed_at", "is", null)
        .executeTakeFirst(),
      db
        .selectFrom("invite_codes")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("user_id", "=", user.id)
        .where("redeemed_at", "is not", null)
        .executeTakeFirst(),
      db
        .selectFrom("invite_codes")
        .innerJoin("users as inviters", "inviters.id", "invite_codes.user_id")
        .select("inviters.email")
        .where("invite_codes.redeemed_by_id", "=", user.id)
        .executeTakeFirst(),
      db
        .selectFrom("openpgp_keys")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("uploader_id", "=", user.id)
        .executeTakeFirst(),
      db.selectFrom("openpgp_keys").select("id").where("email", "=", user.email).executeTakeFirst(),
      db
        .selectFrom("web_sessions")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("user_id", "=", user.id)
        .executeTakeFirst(),
    ]);
    return {
      id: user.id,
      user: toUserView(user),
      aliases: aliasRows.map((row) => ({
        source: row.source,
        destinations: parseStringList(row.destinations),
      })),
      inviteCodes: { unredeemed: count(unredeemed), redeemed: count(redeemed) },
      invitedBy: invitedBy?.email ?? null,
      openPgpKeysUploaded: count(uploaded),
      openPgpKey: key !== undefined,
      sessions: count(sessions),
    };
  }

  /**
   * A new user; a domain admin only in its own domain and with the roles it may assign. Checked
   * before Argon2 runs, again on the created row, and audited inside the creating transaction.
   */
  async create(actor: Actor, input: CreateUserInput): Promise<CreatedUser> {
    const domainId = await this.#domainIdOf(input.email);
    const roles = checkRoles(input.roles ?? []);
    if (domainId !== null) assertMay(actor, { kind: "user", domainId, roles: [] });
    else if (actor.reach !== "all")
      throw domainOfAddressNotManaged({ email: String(input.email).slice(0, 100) });
    assertRoleChange(actor, normalizeRoles([]), roles);
    return this.#users.create(
      { ...input, roles },
      {
        within: async (trx, user) => {
          assertMay(actor, { kind: "user", domainId: user.domainId, roles: [] });
          await this.#audit.record(
            actor,
            {
              action: "user.create",
              target: user.email,
              targetDomainId: user.domainId,
              detail: {
                roles: user.roles,
                quota: user.quota,
                mailCrypt: user.mailCrypt,
                passwordChangeRequired: user.passwordChangeRequired,
                smtpQuota: user.smtpQuota,
              },
            },
            trx,
          );
        },
      },
    );
  }

  /** Changes an active user; the audit entry names each changed field with its old and new value. */
  async update(actor: Actor, email: string, patch: UserPatch): Promise<User> {
    return this.#db.transaction().execute(async (trx) => {
      const before = await this.get(actor, email, trx);
      if (patch.roles !== undefined) assertRoleChange(actor, before.roles, checkRoles(patch.roles));
      const { appPasswordsRequired, ...rest } = patch;
      if (appPasswordsRequired !== undefined && appPasswordsRequired !== null)
        if (typeof appPasswordsRequired !== "boolean") throw appPasswordsRequiredInvalid();
      let after = await this.#users.update(before, rest, trx);
      if (appPasswordsRequired !== undefined && appPasswordsRequired !== before.appPasswordsRequired) {
        await this.#appPasswords.setRequired(after, appPasswordsRequired, actorOrigin(actor), trx);
        after = await this.#users.getActive(after.email, trx);
      }
      const changes = changedFields(before, after);
      if (Object.keys(changes).length > 0)
        await this.#audit.record(
          actor,
          { action: "user.update", target: after.email, targetDomainId: after.domainId, detail: changes },
          trx,
        );
      return after;
    });
  }

  /** Deletes the user read here, once (LifecycleService.delete acts on that row); returns it. */
  async delete(actor: Actor, email: string): Promise<User> {
    return this.#db.transaction().execute(async (trx) => {
      const user = await this.get(actor, email, trx);
      await this.#lifecycle.delete(user, actorOrigin(actor), trx);
      await this.#audit.record(
        actor,
        { action: "user.delete", target: user.email, targetDomainId: user.domainId },
        trx,
      );
      return user;
    });
  }

  /**
   * New password; new keys and recovery token where MailCrypt applies (returned once, never
   * logged). Argon2 runs between the check and the transaction that writes and audits.
   */
  async reset(actor: Actor, email: string, password: string): Promise<NewCredentials> {
    const user = await this.get(actor, email);
    return this.#lifecycle.reset(user, password, actorOrigin(actor), async (trx, result) => {
      await this.get(actor, user.email, trx);
      await this.#audit.record(
        actor,
        {
          action: "user.reset",
          target: user.email,
          targetDomainId: user.domainId,
          detail: { newRecoveryToken: result.recoveryToken !== null },
        },
        trx,
      );
    });
  }

  async restore(actor: Actor, email: string, password: string): Promise<NewCredentials> {
    const user = await this.get(actor, email);
    return this.#lifecycle.restore(user, password, actorOrigin(actor), async (trx, result) => {
      await this.get(actor, user.email, trx);
      await this.#audit.record(
        actor,
        {
          action: "user.restore",
          target: user.email,
          targetDomainId: user.domainId,
          detail: { newRecoveryToken: result.recoveryToken !== null },
        },
        trx,
      );
    });
  }

  async enableTotp(
    actor: Actor,
    email: string,
    input: TotpInput,
  ): Promise<{ secret: string; backupCodes: string[] }> {
    const user = await this.get(actor, email);
    return this.#users.enableTotp(user, input, actorOrigin(actor), {
      within: async (trx) => {
        await this.get(actor, user.email, trx);
        await this.#audit.record(
          actor,
          { action: "user.totp.enable", target: user.email, targetDomainId: user.domainId },
          trx,
        );
      },
    });
  }

  async disableTotp(actor: Actor, email: string): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      const user = await this.get(actor, email, trx);
      await this.#users.disableTwoFactor(user, actorOrigin(actor), trx);
      await this.#audit.record(
        actor,
        { action: "user.totp.disable", target: user.email, targetDomainId: user.domainId },
        trx,
      );
    });
  }

  /** Ends every web session of the user (its sign-ins everywhere). */
  async endSessions(actor: Actor, email: string): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      const user = await this.get(actor, email, trx);
      await endWebSessions(trx, this.#securityEvents, {
        user,
        origin: actorOrigin(actor),
        because: "ended_by_admin",
      });
      await this.#audit.record(
        actor,
        { action: "user.sessions.end", target: user.email, targetDomainId: user.domainId },
        trx,
      );
    });
  }

  async #domainIdOf(email: unknown): Promise<number | null> {
    const text = typeof email === "string" ? email.trim().toLowerCase() : "";
    const at = text.lastIndexOf("@");
    if (at < 0) return null;
    const domain = await managedDomain(this.#db, text.slice(at + 1));
    return domain ? domain.id : null;
  }

  async #domainNames(ids: number[]): Promise<Map<number, string>> {
    const unique = [...new Set(ids)];
    if (unique.length === 0) return new Map();
    const rows = await this.#db
      .selectFrom("domains")
      .select(["id", "name"])
      .where("id", "in", unique)
      .execute();
    return new Map(rows.map((row) => [Number(row.id), row.name]));
  }
}

const usersQuery = (db: Kysely<Database>) => db.selectFrom("users");
type UserQuery = ReturnType<typeof usersQuery>;

/** The fields an admin changed, each `{from, to}`; secrets never appear (a user has none here). */
function changedFields(before: User, after: User): Record<string, { from: unknown; to: unknown }> {
  const result: Record<string, { from: unknown; to: unknown }> = {};
  const compare = (name: string, from: unknown, to: unknown) => {
    if (JSON.stringify(from) !== JSON.stringify(to)) result[name] = { from, to };
  };
  compare("roles", before.roles, after.roles);
  compare("quota", before.quota, after.quota);
  compare("smtpQuota", before.smtpQuota, after.smtpQuota);
  compare("passwordChangeRequired", before.passwordChangeRequired, after.passwordChangeRequired);
  compare("mailCrypt", before.mailCrypt, after.mailCrypt);
  compare("lastLoginTime", before.lastLoginTime, after.lastLoginTime);
  compare("appPasswordsRequired", before.appPasswordsRequired, after.appPasswordsRequired);
  return result;
}
