import { randomBytes } from "node:crypto";
import type { Expression, ExpressionBuilder, Kysely, SqlBool, Transaction } from "kysely";
import type { CryptoPool } from "../credentials/crypto-pool.ts";
import {
  generateMailCryptKeyPair,
  newRecoveryToken,
  openSecretBox,
  SecretBoxError,
  sealSecretBox,
} from "../credentials/mailcrypt.ts";
import { secretBoxBinding } from "../credentials/password-check.ts";
import { hashPassword } from "../credentials/passwords.ts";
import { type Database, flag } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { recordActivity } from "./activity.ts";
import { parseAddress } from "./addresses.ts";
import { aliasNotFound } from "./aliases.ts";
import type { AppPasswordService } from "./app-passwords.ts";
import type { AccountEvents } from "./events.ts";
import { inactiveSince } from "./inactivity.ts";
import {
  type MailCryptEvent,
  type MailCryptMaterial,
  mailCryptFor,
  mailCryptMaterial,
} from "./mail-crypt-policy.ts";
import { passwordIdentical } from "./password-policy.ts";
import { endWebSessions, isActiveUser } from "./queries.ts";
import { recoveryExpirySeconds } from "./recovery.ts";
import { isExemptFromInactivityDeletion } from "./roles.ts";
import type { SecurityEventLog, SecurityEventOrigin } from "./security-events.ts";
import type { SettingsService } from "./settings.ts";
import type { ConfirmedPassword } from "./sign-in.ts";
import { nowSeconds, toUser, type User, type UserService, type UserTarget, userNotFound } from "./users.ts";

export const userIsActive = refusal("user.active", "conflict", () => "user is active; reset it instead");
export const mailCryptKeyUnopenable = refusal(
  "mail_crypt.key_unopenable",
  "conflict",
  () => "the MailCrypt key cannot be opened with this password",
);
export const passwordChangedConcurrently = refusal(
  "password.changed_concurrently",
  "conflict",
  () => "the password was changed concurrently; try again",
);
export const accountChangedMeanwhile = refusal(
  "user.changed_meanwhile",
  "conflict",
  () => "the account changed meanwhile; try again",
);

/** A stored password that no verifier accepts (the Unix "locked" convention). */
export const unusablePassword = (): string => `!deleted!${randomBytes(24).toString("hex")}`;

/** Columns that wipe every credential except the password: keys, boxes, recovery, second factor. */
const wipedCredentials = {
  mail_crypt: 0,
  mail_crypt_public_key: null,
  mail_crypt_secret_box: null,
  secret_box_binding: null,
  recovery_secret_box: null,
  recovery_start_time: null,
  totp_secret: null,
  totp_confirmed: 0,
  totp_backup_codes: "[]",
  totp_last_step: null,
  passkey_sign_in: 0,
} as const;

export interface NewCredentials {
  recoveryToken: string | null;
}

/**
 * More work of the caller inside a reset's or restore's transaction (an admin action's audit
 * entry), told what was made; Argon2 has run before the transaction opens.
 */
export type WithinCredentials = (trx: Transaction<Database>, credentials: NewCredentials) => Promise<void>;

/** What the inactive-user job's deletion did with one candidate. */
export type InactiveDeletion = "deleted" | "exempt" | "skipped";

type UserCondition = (eb: ExpressionBuilder<Database, "users">) => Expression<SqlBool>;

/** A recovery was started and has not expired (recovery.ts): a reset or a new token stops it. */
const recoveryInProgress = (startTime: number | null): boolean =>
  startTime !== null && nowSeconds() - Number(startTime) <= recoveryExpirySeconds;

/** Who deletes inactive users: the scheduled job. */
const inactiveUserJob: SecurityEventOrigin = {
  door: "job",
  clientAddress: null,
  actor: "job:remove-inactive-users",
};

/**
 * What happens to an account over its life: delete, reset, restore, password change. Each is one
 * transaction (the account row, its aliases, its OpenPGP keys and its events together), and every
 * caller (admin API, console, scheduled jobs) goes through these functions.
 */
export class LifecycleService {
  readonly #db: Kysely<Database>;
  readonly #pool: CryptoPool;
  readonly #settings: SettingsService;
  readonly #users: UserService;
  readonly #events: AccountEvents;
  readonly #securityEvents: SecurityEventLog;
  readonly #appPasswords: AppPasswordService;

  constructor(
    db: Kysely<Database>,
    pool: CryptoPool,
    settings: SettingsService,
    users: UserService,
    events: AccountEvents,
    securityEvents: SecurityEventLog,
    appPasswords: AppPasswordService,
  ) {
    this.#appPasswords = appPasswords;
    this.#db = db;
    this.#pool = pool;
    this.#settings = settings;
    this.#users = users;
    this.#events = events;
    this.#securityEvents = securityEvents;
  }

  /**
   * Soft delete: owned aliases deleted (their address stays taken), password unusable, keys,
   * boxes and second factor wiped, OpenPGP keys of the freed addresses removed, `user.deleted`
   * and the security event `account.deleted`.
   */
  async delete(target: UserTarget, origin: SecurityEventOrigin, trx?: Transaction<Database>): Promise<void> {
    if (!trx) return this.#db.transaction().execute((t) => this.delete(target, origin, t));
    const user = await this.#users.active(target, trx);
    if (!(await this.#delete(user, trx, origin))) throw userNotFound();
  }

  /**
   * The inactive-user job's deletion: the normal deletion, done only if the user is still active,
   * still not exempt and still inactive since `cutoff` when it is deleted. Exemption is judged on
   * the roles read in this transaction, and the statement that flags the user deleted requires those
   * roles unchanged and the inactivity rule still true, so a sign-in (or a new role) that lands
   * between the job's selection and this deletion keeps the user.
   */
  async deleteIfInactive(email: string, cutoff: number): Promise<InactiveDeletion> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom("users")
        .selectAll()
        .where("email", "=", email)
        .where(isActiveUser)
        .executeTakeFirst();
      if (!row) return "skipped";
      const user = toUser(row);
      if (isExemptFromInactivityDeletion(user.roles)) return "exempt";
      const stillInactive: UserCondition = (eb) =>
        eb.and([eb("roles", "=", row.roles), inactiveSince(cutoff)(eb)]);
      return (await this.#delete(user, trx, inactiveUserJob, stillInactive)) ? "deleted" : "skipped";
    });
  }

  /**
   * The one deletion path. The user row is flagged first, by a statement that also requires the
   * user still active (and `condition`, when given); when it matches nothing, nothing was written
   * and false is returned.
   */
  async #delete(
    user: User,
    trx: Transaction<Database>,
    origin: SecurityEventOrigin,
    condition?: UserCondition,
  ): Promise<boolean> {
    const now = nowSeconds();
    let flag = trx
      .updateTable("users")
      .set({ ...wipedCredentials, password: unusablePassword(), deleted: 1, updated_at: now })
      .where("id", "=", user.id)
      .where(isActiveUser);
    if (condition) flag = flag.where(condition);
    const updated = await flag.executeTakeFirst();
    if (Number(updated.numUpdatedRows) !== 1) return false;
    // The keys of the freed addresses (the user's and its aliases', which the reference lost and
    // kept publishing) go before the aliases are detached from the user, in one statement: those
    // no active user and no other active alias holds.
    await trx
      .deleteFrom("openpgp_keys")
      .where((eb) =>
        eb.and([
          eb.or([
            eb("openpgp_keys.email", "=", user.email),
            eb(
              "openpgp_keys.email",
              "in",
              eb
                .selectFrom("aliases")
                .select("source")
                .where("user_id", "=", user.id)
                .where("deleted", "=", 0),
            ),
          ]),
          eb.not(
            eb.exists(
              eb
                .selectFrom("users")
                .select("users.id")
                .whereRef("users.email", "=", "openpgp_keys.email")
                .where(isActiveUser),
            ),
          ),
          eb.not(
            eb.exists(
              eb
                .selectFrom("aliases")
                .select("aliases.id")
                .whereRef("aliases.source", "=", "openpgp_keys.email")
                .where("aliases.deleted", "=", 0)
                .where((alias) =>
                  alias.or([alias("aliases.user_id", "is", null), alias("aliases.user_id", "!=", user.id)]),
                ),
            ),
          ),
        ]),
      )
      .execute();
    await trx
      .updateTable("aliases")
      .set({ deleted: 1, user_id: null, destinations: "[]", updated_at: now })
      .where("user_id", "=", user.id)
      .where("deleted", "=", 0)
      .execute();
    await this.#appPasswords.revokeAll(trx, user, origin, "deleted");
    await trx.deleteFrom("passkeys").where("user_id", "=", user.id).execute();
    await endWebSessions(trx, this.#securityEvents, { user, origin, because: "account_deleted" });
    await this.#events.record(trx, "user.deleted", user);
    await this.#securityEvents.record(trx, user, origin, { type: "account.deleted" });
    return true;
  }

  /**
   * New password; new keys and recovery token where MailCrypt applies, none otherwise; 2FA off, a
   * recovery in progress stopped. Each of these is a security event of the reset's transaction.
   */
  async reset(
    target: UserTarget,
    rawPassword: string,
    origin: SecurityEventOrigin,
    within?: WithinCredentials,
  ): Promise<NewCredentials> {
    const password = await this.#users.passwordPolicy.require(rawPassword);
    const user = await this.#users.active(target);
    const { hash, material } = await this.#newCredentials(user, password, "reset");
    await this.#db.transaction().execute(async (trx) => {
      const before = await trx
        .selectFrom("users")
        .select(["recovery_start_time", "totp_confirmed"])
        .where("id", "=", user.id)
        .executeTakeFirst();
      const updated = await trx
        .updateTable("users")
        .set({ ...this.#credentialColumns(hash, material), updated_at: nowSeconds() })
        .where("id", "=", user.id)
        .where(isActiveUser)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) !== 1) throw userNotFound();
      // Passkeys are second factors too: a reset leaves none.
      const passkeys = await trx.deleteFrom("passkeys").where("user_id", "=", user.id).executeTakeFirst();
      const events = this.#securityEvents;
      await events.record(trx, user, origin, { type: "password.changed", detail: { how: "reset" } });
      if ((before && flag(before.totp_confirmed)) || Number(passkeys.numDeletedRows) > 0)
        await events.record(trx, user, origin, { type: "two_factor.disabled", detail: { how: "reset" } });
      if (recoveryInProgress(before?.recovery_start_time ?? null))
        await events.record(trx, user, origin, { type: "recovery.stopped", detail: { how: "reset" } });
      // New keys: the app passwords' boxes hold the old one, and whoever is locked out should be.
      await this.#appPasswords.revokeAll(trx, user, origin, "reset");
      await endWebSessions(trx, events, { user, origin, because: "password_reset" });
      await this.#events.record(trx, "user.reset", user);
      await within?.(trx, { recoveryToken: material?.recoveryToken ?? null });
    });
    return { recoveryToken: material?.recoveryToken ?? null };
  }

  /**
   * A deleted user becomes active again with a new password (and keys as for reset); no aliases
   * return. A restore counts as activity: last login becomes today (as a sign-in records it), so the
   * inactive-user job does not delete the account again before its owner had a chance to sign in.
   */
  async restore(
    target: UserTarget,
    rawPassword: string,
    origin: SecurityEventOrigin,
    within?: WithinCredentials,
  ): Promise<NewCredentials> {
    const password = await this.#users.passwordPolicy.require(rawPassword);
    const address = typeof target === "string" ? parseAddress(String(target)) : null;
    const user =
      typeof target === "string" ? (address ? await this.#users.findByEmail(address.email) : null) : target;
    if (!user) throw userNotFound();
    if (!user.deleted) throw userIsActive();
    const { hash, material } = await this.#newCredentials(user, password, "restore");
    await this.#db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable("users")
        .set({ ...this.#credentialColumns(hash, material), deleted: 0, updated_at: nowSeconds() })
        .where("id", "=", user.id)
        .where("deleted", "=", 1)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) !== 1) throw userIsActive();
      await recordActivity(trx, user, { kind: "restore" });
      await this.#securityEvents.record(trx, user, origin, { type: "account.restored" });
      await within?.(trx, { recoveryToken: material?.recoveryToken ?? null });
    });
    return { recoveryToken: material?.recoveryToken ?? null };
  }

  /**
   * A password change by someone who knows the old one: the MailCrypt key is re-sealed, mail stays
   * readable; `password.changed` and the other sessions' end are recorded with it.
   */
  async changePassword(
    proof: ConfirmedPassword,
    rawNewPassword: unknown,
    origin: SecurityEventOrigin,
    options: { keepSessionIdHash?: string } = {},
  ): Promise<void> {
    const { user, password: oldPassword } = proof;
    if (oldPassword === rawNewPassword) throw passwordIdentical();
    const newPassword = await this.#users.passwordPolicy.require(rawNewPassword);
    let secretBox = user.mailCryptSecretBox;
    if (secretBox) {
      try {
        const privateKey = await openSecretBox(secretBox, oldPassword, this.#pool);
        secretBox = await sealSecretBox(privateKey, newPassword, this.#pool);
      } catch (error) {
        if (error instanceof SecretBoxError) throw mailCryptKeyUnopenable();
        throw error;
      }
    }
    const hash = await hashPassword(newPassword, this.#pool);
    await this.#db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable("users")
        .set({
          password: hash,
          password_app_form: 0,
          mail_crypt_secret_box: secretBox,
          secret_box_binding: secretBox ? secretBoxBinding(hash, secretBox) : null,
          password_change_required: 0,
          updated_at: nowSeconds(),
        })
        .where("id", "=", user.id)
        .where("password", "=", user.passwordHash)
        // The box re-sealed above is the one stored: keys made meanwhile are not wiped.
        .where((eb) =>
          user.mailCryptSecretBox === null
            ? eb("mail_crypt_secret_box", "is", null)
            : eb("mail_crypt_secret_box", "=", user.mailCryptSecretBox),
        )
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) !== 1) throw passwordChangedConcurrently();
      const events = this.#securityEvents;
      await events.record(trx, user, origin, { type: "password.changed", detail: { how: "changed" } });
      await endWebSessions(
        trx,
        events,
        { user, origin, because: "password_changed" },
        options.keepSessionIdHash,
      );
    });
  }

  /** "Sign out everywhere": every web session of the user ends, the one asking included. */
  async signOutEverywhere(user: User, origin: SecurityEventOrigin): Promise<void> {
    await this.#db
      .transaction()
      .execute((trx) =>
        endWebSessions(trx, this.#securityEvents, { user, origin, because: "signed_out_everywhere" }),
      );
  }

  /**
   * A new recovery token for a user who knows the password: the MailCrypt private key is sealed
   * under it (a user without keys gets a pair first, not switched on), which makes the old token
   * useless and stops a recovery in progress (`recovery.stopped`). The token is returned once and
   * never stored.
   */
  async renewRecoveryToken(proof: ConfirmedPassword, origin: SecurityEventOrigin): Promise<string> {
    const { user, password } = proof;
    let privateKey: string;
    let publicKey = user.mailCryptPublicKey;
    let secretBox = user.mailCryptSecretBox;
    if (secretBox && publicKey) {
      try {
        privateKey = await openSecretBox(secretBox, password, this.#pool);
      } catch (error) {
        if (error instanceof SecretBoxError) throw mailCryptKeyUnopenable();
        throw error;
      }
    } else {
      const pair = await generateMailCryptKeyPair();
      privateKey = pair.privateKey;
      publicKey = pair.publicKey;
      secretBox = await sealSecretBox(privateKey, password, this.#pool);
    }
    const recoveryToken = newRecoveryToken();
    const recoverySecretBox = await sealSecretBox(privateKey, recoveryToken, this.#pool);
    await this.#db.transaction().execute(async (trx) => {
      // First the recovery in progress, if any: whether this stopped one is the event's question.
      const stopped = await trx
        .updateTable("users")
        .set({ recovery_start_time: null })
        .where("id", "=", user.id)
        .where("password", "=", user.passwordHash)
        .where("recovery_start_time", ">=", nowSeconds() - recoveryExpirySeconds)
        .where(isActiveUser)
        .executeTakeFirst();
      const updated = await trx
        .updateTable("users")
        .set({
          mail_crypt_public_key: publicKey,
          mail_crypt_secret_box: secretBox,
          // The box opened with (or was sealed under) the password confirmed against this hash.
          secret_box_binding: secretBoxBinding(user.passwordHash, secretBox),
          recovery_secret_box: recoverySecretBox,
          recovery_start_time: null,
          updated_at: nowSeconds(),
        })
        .where("id", "=", user.id)
        .where("password", "=", user.passwordHash)
        .where(isActiveUser)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) !== 1) throw accountChangedMeanwhile();
      const events = this.#securityEvents;
      await events.record(trx, user, origin, { type: "recovery_token.renewed" });
      if (Number(stopped.numUpdatedRows) > 0)
        await events.record(trx, user, origin, {
          type: "recovery.stopped",
          detail: { how: "new_recovery_token" },
        });
    });
    return recoveryToken;
  }

  /** Soft delete of an alias: the address stays taken, owner and destinations are cleared. */
  async deleteAlias(rawSource: string, trx?: Transaction<Database>): Promise<void> {
    if (!trx) return this.#db.transaction().execute((t) => this.deleteAlias(rawSource, t));
    const address = parseAddress(String(rawSource));
    const updated = address
      ? await trx
          .updateTable("aliases")
          .set({ deleted: 1, user_id: null, destinations: "[]", updated_at: nowSeconds() })
          .where("source", "=", address.email)
          .where("deleted", "=", 0)
          .executeTakeFirst()
      : null;
    if (!address || Number(updated?.numUpdatedRows ?? 0) !== 1) throw aliasNotFound();
    await this.removeOrphanedOpenPgpKeys([address.email], trx);
  }

  /** Keys published for addresses that no active user or alias holds any more are removed. */
  async removeOrphanedOpenPgpKeys(addresses: string[], trx: Transaction<Database>): Promise<void> {
    if (addresses.length === 0) return;
    const [users, aliases] = await Promise.all([
      trx.selectFrom("users").select("email").where("email", "in", addresses).where(isActiveUser).execute(),
      trx
        .selectFrom("aliases")
        .select("source")
        .where("source", "in", addresses)
        .where("deleted", "=", 0)
        .execute(),
    ]);
    const held = new Set([...users.map((u) => u.email), ...aliases.map((a) => a.source)]);
    const orphaned = addresses.filter((a) => !held.has(a));
    if (orphaned.length > 0) await trx.deleteFrom("openpgp_keys").where("email", "in", orphaned).execute();
  }

  /**
   * Reset and restore: new keys where the MailCrypt rule (`mailCryptFor`) says so; otherwise old
   * boxes are wiped, so no box sealed under an old password is left behind.
   */
  async #newCredentials(
    user: User,
    password: string,
    event: Extract<MailCryptEvent, "reset" | "restore">,
  ): Promise<{ hash: string; material: MailCryptMaterial | null }> {
    const level = await this.#settings.get("mail_crypt");
    const action = mailCryptFor(level, event, { userFlag: user.mailCrypt });
    const [hash, material] = await Promise.all([
      hashPassword(password, this.#pool),
      mailCryptMaterial(action, password, this.#pool),
    ]);
    return { hash, material };
  }

  #credentialColumns(hash: string, material: MailCryptMaterial | null) {
    return {
      ...wipedCredentials,
      password: hash,
      password_app_form: 0 as const,
      mail_crypt: material ? (1 as const) : (0 as const),
      mail_crypt_public_key: material?.publicKey ?? null,
      mail_crypt_secret_box: material?.secretBox ?? null,
      secret_box_binding: material ? secretBoxBinding(hash, material.secretBox) : null,
      recovery_secret_box: material?.recoverySecretBox ?? null,
    };
  }
}
