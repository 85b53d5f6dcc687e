import type { Kysely, Transaction } from "kysely";
import type { InstallationSecret } from "../config.ts";
import {
  appPasswordLookupHash,
  generateAppPassword,
  normalizeAppPassword,
  openWithAppPassword,
  sealWithAppPassword,
} from "../credentials/app-passwords.ts";
import type { CryptoPool } from "../credentials/crypto-pool.ts";
import { openSecretBox, SecretBoxError } from "../credentials/mailcrypt.ts";
import { insertReturningId } from "../db/insert.ts";
import { type Keyed, type KeyedRead, type KeyReader, keyedRead, kyselyKeyReader } from "../db/key-reads.ts";
import { type AppPasswordScope, type Database, flag, toFlag } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { mailCryptKeyUnopenable } from "./lifecycle.ts";
import type { SecurityEventDoor, SecurityEventLog, SecurityEventOrigin } from "./security-events.ts";
import type { ConfirmedPassword } from "./sign-in.ts";
import { nowSeconds, type User } from "./users.ts";

/** More work of the caller in the same transaction (an admin's audit entry), with the app password's id. */
export type AppPasswordWithin = (trx: Transaction<Database>, id: number) => Promise<void>;

export const appPasswordScopes = ["mail", "smtp"] as const satisfies readonly AppPasswordScope[];
export type { AppPasswordScope } from "../db/schema.ts";

/** An app password as its owner and admins see it: never its value. */
export interface AppPasswordView {
  id: number;
  name: string;
  scope: AppPasswordScope;
  createdAt: number;
  /** Unix seconds, to the hour: "last used" is written at most once an hour. */
  lastUsedAt: number | null;
  lastUsedAddress: string | null;
}

/** A new app password: the only time its value is known. */
export interface CreatedAppPassword extends AppPasswordView {
  password: string;
}

export interface AppPasswordInput {
  name: unknown;
  scope: unknown;
}

/** Each user's app passwords are few; a bound keeps a list page and the table small. */
export const maxAppPasswordsPerUser = 50;
const maxNameLength = 64;
/** "Last used" is written at most this often per app password (and instance). */
const lastUsedInterval = 3600;

export const appPasswordsRequiredInvalid = refusal(
  "app_password.required_invalid",
  "invalid",
  () => "appPasswordsRequired: must be true, false or null",
);
export const appPasswordNotFound = refusal(
  "app_password.not_found",
  "not_found",
  () => "app password not found",
);
export const appPasswordNameInvalid = refusal(
  "app_password.name_invalid",
  "invalid",
  () => `name: give the device a name of 1 to ${maxNameLength} characters`,
);
export const appPasswordScopeInvalid = refusal(
  "app_password.scope_invalid",
  "invalid",
  () => `scope: one of ${appPasswordScopes.join(", ")}`,
);
export const appPasswordLimitReached = refusal(
  "app_password.limit_reached",
  "conflict",
  () => `at most ${maxAppPasswordsPerUser} app passwords per user; revoke one first`,
);
/**
 * An admin cannot make an app password that opens an encrypted mailbox: the private key is sealed
 * under the owner's password, which only the owner knows. SMTP-only ones need no key.
 */
/** The password changed (a reset, a change) between its confirmation and the new app password. */
export const appPasswordCredentialsChanged = refusal(
  "app_password.credentials_changed",
  "conflict",
  () => "the password changed meanwhile; try again",
);
export const appPasswordNeedsOwner = refusal(
  "app_password.needs_owner",
  "conflict",
  () => "the mailbox is encrypted: only its owner can create an app password for mail; scope smtp works",
);

/**
 * What an app password at a mail door came to: not one at all (the secret has another form), no
 * account's, another scope, or the user's own, with the private key it opens (null without keys).
 */
export type AppPasswordMatch =
  | { kind: "not_app_password" }
  | { kind: "no_match" }
  | { kind: "out_of_scope"; id: number }
  | { kind: "match"; id: number; privateKey: string | null; boxFailed: boolean };

/** The doors an app password opens, by scope: mail clients read and send, SMTP-only ones only send. */
const scopeDoors: Record<AppPasswordScope, readonly SecurityEventDoor[]> = {
  mail: ["passdb", "mta_auth"],
  smtp: ["mta_auth"],
};
/** The doors that take app passwords at all; the web, webmail, identity and every re-confirmation never do. */
export const appPasswordDoors: readonly SecurityEventDoor[] = ["passdb", "mta_auth"];

/** Whether this secret at this door is taken as an app password (its form, at IMAP or SMTP). */
export const takesAppPassword = (secret: unknown, door: SecurityEventDoor | undefined): boolean =>
  door !== undefined && appPasswordDoors.includes(door) && normalizeAppPassword(secret) !== null;

/** The device name as stored (trimmed), or `app_password.name_invalid`: the pages check it before the password. */
export function validName(raw: unknown): string {
  if (typeof raw !== "string") throw appPasswordNameInvalid();
  const name = raw.trim();
  // Control characters (a NUL among them) never belong in a name shown on pages and in lists.
  if (name.length === 0 || name.length > maxNameLength || /\p{Cc}/u.test(name))
    throw appPasswordNameInvalid();
  return name;
}

/** The scope, or `app_password.scope_invalid`. */
export function validScope(raw: unknown): AppPasswordScope {
  if (typeof raw !== "string" || !(appPasswordScopes as readonly string[]).includes(raw))
    throw appPasswordScopeInvalid();
  return raw as AppPasswordScope;
}

const appPasswordByHash = keyedRead((db, keys) =>
  db
    .selectFrom("app_passwords")
    .select(["lookup_hash as lookup_key", "id", "user_id", "scope", "secret_box", "last_used_at"])
    .where(keys("lookup_hash")),
);
type AppPasswordByHash = {
  lookup_key: string;
  id: number;
  user_id: number;
  scope: string;
  secret_box: string | null;
  last_used_at: number | null;
};

interface AppPasswordRow {
  id: number;
  name: string;
  scope: string;
  created_at: number;
  last_used_at: number | null;
  last_used_address: string | null;
}

const toView = (row: AppPasswordRow): AppPasswordView => ({
  id: Number(row.id),
  name: row.name,
  scope: row.scope as AppPasswordScope,
  createdAt: Number(row.created_at),
  lastUsedAt: row.last_used_at === null ? null : Number(row.last_used_at),
  lastUsedAddress: row.last_used_address,
});

/**
 * App passwords: one per mail client, each able to open the user's encrypted mailbox, each
 * revocable alone. The rules of where one works and of "mail apps must use app passwords" live
 * here; the sign-in (accounts/sign-in.ts) asks them.
 */
export class AppPasswordService {
  readonly #db: Kysely<Database>;
  readonly #pool: CryptoPool;
  readonly #secret: InstallationSecret;
  readonly #events: SecurityEventLog;
  /** When this instance last wrote "last used" per app password (seconds). */
  readonly #lastUsedWritten = new Map<number, number>();
  readonly #byLookupHash: KeyReader<AppPasswordByHash>;

  constructor(
    db: Kysely<Database>,
    pool: CryptoPool,
    secret: InstallationSecret,
    events: SecurityEventLog,
    keyReader: <Row extends Keyed>(read: KeyedRead<Row>) => KeyReader<Row> = (read) =>
      kyselyKeyReader(db, read),
  ) {
    this.#db = db;
    this.#pool = pool;
    this.#secret = secret;
    this.#events = events;
    // On the mail server's hot path: the database's keyed reads (one prepared statement on SQLite).
    this.#byLookupHash = keyReader(appPasswordByHash);
  }

  /**
   * A new app password made by its owner, who re-confirmed the password: with MailCrypt keys, the
   * private key is opened with that password and sealed again under the app password.
   */
  async createForOwner(
    proof: ConfirmedPassword,
    input: AppPasswordInput,
    origin: SecurityEventOrigin,
  ): Promise<CreatedAppPassword> {
    const name = validName(input.name);
    const scope = validScope(input.scope);
    const { user, password } = proof;
    let privateKey: string | null = null;
    if (scope === "mail" && user.mailCryptSecretBox)
      try {
        privateKey = await openSecretBox(user.mailCryptSecretBox, password, this.#pool);
      } catch (error) {
        if (error instanceof SecretBoxError) throw mailCryptKeyUnopenable();
        throw error;
      }
    return this.#create(user, name, scope, privateKey, origin);
  }

  /**
   * A new app password made by an admin: without the owner's password no private key can be sealed,
   * so for a user with MailCrypt keys only an SMTP-only one can be made.
   */
  async createByAdmin(
    user: User,
    input: AppPasswordInput,
    origin: SecurityEventOrigin,
    within?: AppPasswordWithin,
  ): Promise<CreatedAppPassword> {
    const name = validName(input.name);
    const scope = validScope(input.scope);
    if (scope === "mail" && user.mailCryptSecretBox !== null) throw appPasswordNeedsOwner();
    return this.#create(user, name, scope, null, origin, within);
  }

  async #create(
    user: User,
    name: string,
    scope: AppPasswordScope,
    privateKey: string | null,
    origin: SecurityEventOrigin,
    within?: AppPasswordWithin,
  ): Promise<CreatedAppPassword> {
    const password = generateAppPassword();
    const normalized = normalizeAppPassword(password) as string;
    const secretBox =
      privateKey !== null && scope === "mail"
        ? sealWithAppPassword(privateKey, normalized, this.#secret)
        : null;
    const createdAt = nowSeconds();
    const id = await this.#db.transaction().execute(async (trx) => {
      // The owner row is locked first (where the dialect locks), so two creations racing cannot
      // pass the limit together; and only while the password is the one read before: a reset that
      // landed meanwhile (new keys, every app password revoked) leaves no app password behind.
      const owner = await trx
        .updateTable("users")
        .set({ updated_at: createdAt })
        .where("id", "=", user.id)
        .where("deleted", "=", toFlag(false))
        .where("password", "=", user.passwordHash)
        .executeTakeFirst();
      if (Number(owner.numUpdatedRows) !== 1) throw appPasswordCredentialsChanged();
      const { count } = await trx
        .selectFrom("app_passwords")
        .select((eb) => eb.fn.countAll<number>().as("count"))
        .where("user_id", "=", user.id)
        .executeTakeFirstOrThrow();
      if (Number(count) >= maxAppPasswordsPerUser) throw appPasswordLimitReached();
      const newId = await insertReturningId(trx, "app_passwords", {
        user_id: user.id,
        name,
        scope,
        lookup_hash: appPasswordLookupHash(normalized, this.#secret),
        secret_box: secretBox,
        created_at: createdAt,
        last_used_at: null,
        last_used_address: null,
      });
      await this.#events.record(trx, user, origin, {
        type: "app_password.created",
        detail: { id: newId, scope },
      });
      await within?.(trx, newId);
      return newId;
    });
    return { id, name, scope, createdAt, lastUsedAt: null, lastUsedAddress: null, password };
  }

  /** The user's app passwords, oldest first. */
  async list(user: Pick<User, "id">): Promise<AppPasswordView[]> {
    const rows = await this.#db
      .selectFrom("app_passwords")
      .select(["id", "name", "scope", "created_at", "last_used_at", "last_used_address"])
      .where("user_id", "=", user.id)
      .orderBy("id")
      .execute();
    return rows.map(toView);
  }

  /** Ends one of the user's app passwords at once: the next sign-in with it, on any instance, fails. */
  async revoke(
    user: User,
    id: number,
    origin: SecurityEventOrigin,
    within?: AppPasswordWithin,
  ): Promise<void> {
    if (!Number.isSafeInteger(id) || id <= 0) throw appPasswordNotFound();
    await this.#db.transaction().execute(async (trx) => {
      const deleted = await trx
        .deleteFrom("app_passwords")
        .where("id", "=", id)
        .where("user_id", "=", user.id)
        .executeTakeFirst();
      if (Number(deleted.numDeletedRows) !== 1) throw appPasswordNotFound();
      await this.#events.record(trx, user, origin, {
        type: "app_password.removed",
        detail: { id, how: "revoked" },
      });
      await within?.(trx, id);
    });
  }

  /**
   * Every app password of the user ends, inside the change that makes them useless or unwanted: a
   * reset (new keys: their boxes hold the old key) records each; a deletion removes them silently
   * (`account.deleted` says it all).
   */
  async revokeAll(
    trx: Transaction<Database>,
    user: User,
    origin: SecurityEventOrigin,
    why: "reset" | "deleted",
  ): Promise<void> {
    // A deletion records nothing per app password: one statement, no read (the deletion's budget).
    if (why === "deleted") {
      await trx.deleteFrom("app_passwords").where("user_id", "=", user.id).execute();
      return;
    }
    const rows = await trx.selectFrom("app_passwords").select("id").where("user_id", "=", user.id).execute();
    if (rows.length === 0) return;
    await trx.deleteFrom("app_passwords").where("user_id", "=", user.id).execute();
    for (const { id } of rows)
      await this.#events.record(trx, user, origin, {
        type: "app_password.removed",
        detail: { id: Number(id), how: "reset" },
      });
  }

  /**
   * The one rule of "mail apps must use app passwords": the user's own choice, else the domain's
   * default. When it holds, IMAP and SMTP refuse the account password.
   */
  async required(user: Pick<User, "id" | "domainId" | "appPasswordsRequired">): Promise<boolean> {
    if (user.appPasswordsRequired !== null) return user.appPasswordsRequired;
    const domain = await this.#db
      .selectFrom("domains")
      .select("app_passwords_required")
      .where("id", "=", user.domainId)
      .executeTakeFirst();
    return domain ? flag(domain.app_passwords_required) : false;
  }

  /**
   * Sets the user's own choice; null follows the domain's default. In the caller's transaction when
   * given (an admin's change of the user, audited with it).
   */
  async setRequired(
    user: User,
    required: unknown,
    origin: SecurityEventOrigin,
    trx?: Transaction<Database>,
  ): Promise<void> {
    if (required !== null && typeof required !== "boolean") throw appPasswordsRequiredInvalid();
    const change = async (trx: Transaction<Database>) => {
      const updated = await trx
        .updateTable("users")
        .set({
          app_passwords_required: required === null ? null : toFlag(required),
          updated_at: nowSeconds(),
        })
        .where("id", "=", user.id)
        .where("deleted", "=", toFlag(false))
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) !== 1) throw appPasswordNotFound();
      await this.#events.record(trx, user, origin, {
        type: "app_passwords.required_changed",
        detail: { setting: required === null ? "domain_default" : required ? "on" : "off" },
      });
    };
    if (trx) await change(trx);
    else await this.#db.transaction().execute(change);
  }

  /**
   * The secret given at a mail door, taken as an app password: found by its keyed hash (one hash and
   * one indexed read, whether it is right or wrong and whether the account exists), then checked to
   * be this user's and to work at this door. Whether an unmatched one may still be the account's
   * password (an older password of that form) is the sign-in's question (sign-in.ts).
   */
  async match(
    userId: number | null,
    secret: string,
    door: SecurityEventDoor,
    clientAddress: string | null,
  ): Promise<AppPasswordMatch> {
    const normalized = normalizeAppPassword(secret);
    if (normalized === null || !appPasswordDoors.includes(door)) return { kind: "not_app_password" };
    const [row] = await this.#byLookupHash(appPasswordLookupHash(normalized, this.#secret));
    if (!row || userId === null || Number(row.user_id) !== userId) return { kind: "no_match" };
    const id = Number(row.id);
    if (!scopeDoors[row.scope as AppPasswordScope]?.includes(door)) return { kind: "out_of_scope", id };
    await this.#noteUse(id, row.last_used_at === null ? null : Number(row.last_used_at), clientAddress);
    if (row.secret_box === null) return { kind: "match", id, privateKey: null, boxFailed: false };
    try {
      return {
        kind: "match",
        id,
        privateKey: openWithAppPassword(row.secret_box, normalized, this.#secret),
        boxFailed: false,
      };
    } catch (error) {
      if (error instanceof SecretBoxError) return { kind: "match", id, privateKey: null, boxFailed: true };
      throw error;
    }
  }

  /** "Last used", written at most once an hour per app password: no write per sign-in. */
  async #noteUse(id: number, stored: number | null, clientAddress: string | null): Promise<void> {
    const now = nowSeconds();
    const cutoff = now - lastUsedInterval;
    if (stored !== null && stored > cutoff) return;
    if ((this.#lastUsedWritten.get(id) ?? 0) > cutoff) return;
    this.#lastUsedWritten.set(id, now);
    if (this.#lastUsedWritten.size > 10_000)
      for (const old of [...this.#lastUsedWritten.keys()].slice(0, 1_000)) this.#lastUsedWritten.delete(old);
    // Conditional, so instances racing write once.
    await this.#db
      .updateTable("app_passwords")
      .set({ last_used_at: now, last_used_address: clientAddress?.slice(0, 64) ?? null })
      .where("id", "=", id)
      .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<=", cutoff)]))
      .execute();
  }
}
