import type { Kysely, Selectable, Transaction } from "kysely";
import type { InstallationSecret } from "../config.ts";
import { type BackupCodeKey, generateBackupCodes, hashBackupCode } from "../credentials/backup-codes.ts";
import type { CryptoPool } from "../credentials/crypto-pool.ts";
import { secretBoxBinding } from "../credentials/password-check.ts";
import { hashPassword } from "../credentials/passwords.ts";
import { generateTotpSecret } from "../credentials/totp.ts";
import { type Database, flag, toFlag, type UserTable } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { recordActivity } from "./activity.ts";
import { newAddressProblem, parseAddress, parseNewAddress } from "./addresses.ts";
import type { AccountEvents } from "./events.ts";
import { mailCryptFor, mailCryptMaterial } from "./mail-crypt-policy.ts";
import { containsText, type Listing, type Page } from "./paging.ts";
import type { PasswordPolicy } from "./password-policy.ts";
import {
  activeUserRow,
  endWebSessions,
  isActiveUser,
  isManagedDomainNamed,
  managedDomain,
} from "./queries.ts";
import { isRole, normalizeRoles, parseStoredRoles, type Role } from "./roles.ts";
import type { SecurityEventLog, SecurityEventOrigin } from "./security-events.ts";
import type { SettingsService } from "./settings.ts";

export interface SmtpQuota {
  perHour: number | null;
  perDay: number | null;
}

export interface User {
  id: number;
  email: string;
  domainId: number;
  passwordHash: string;
  roles: Role[];
  passwordChangeRequired: boolean;
  quota: number | null;
  smtpQuota: SmtpQuota;
  mailCrypt: boolean;
  mailCryptPublicKey: string | null;
  mailCryptSecretBox: string | null;
  /** The box's binding to the password hash (credentials/password-check.ts `secretBoxBinding`). */
  secretBoxBinding: string | null;
  recoverySecretBox: string | null;
  totpSecret: string | null;
  totpConfirmed: boolean;
  totpBackupCodes: string[];
  totpLastStep: number | null;
  lastLoginTime: number | null;
  createdAt: number;
  updatedAt: number;
  deleted: boolean;
  /** "Mail apps must use app passwords" as the user chose it; null follows the domain (app-passwords.ts `required`). */
  appPasswordsRequired: boolean | null;
  /** The user may sign in on the web with a passkey alone. */
  passkeySignIn: boolean;
  /** The account password may have the app-password form (schema.ts `password_app_form`). */
  passwordMayHaveAppForm: boolean;
}

export function toUser(row: Selectable<UserTable>): User {
  return {
    id: row.id,
    email: row.email,
    domainId: row.domain_id,
    passwordHash: row.password,
    roles: parseStoredRoles(row.roles),
    passwordChangeRequired: flag(row.password_change_required),
    quota: row.quota,
    smtpQuota: { perHour: row.smtp_quota_per_hour, perDay: row.smtp_quota_per_day },
    mailCrypt: flag(row.mail_crypt),
    mailCryptPublicKey: row.mail_crypt_public_key,
    mailCryptSecretBox: row.mail_crypt_secret_box,
    secretBoxBinding: row.secret_box_binding,
    recoverySecretBox: row.recovery_secret_box,
    totpSecret: row.totp_secret,
    totpConfirmed: flag(row.totp_confirmed),
    totpBackupCodes: parseStringList(row.totp_backup_codes),
    totpLastStep: row.totp_last_step,
    lastLoginTime: row.last_login_time,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    deleted: flag(row.deleted),
    appPasswordsRequired: row.app_passwords_required === null ? null : flag(row.app_passwords_required),
    passkeySignIn: flag(row.passkey_sign_in),
    passwordMayHaveAppForm: flag(row.password_app_form),
  };
}

export function parseStringList(json: string): string[] {
  try {
    const parsed: unknown = JSON.parse(json);
    return Array.isArray(parsed) ? parsed.filter((v): v is string => typeof v === "string") : [];
  } catch {
    return [];
  }
}

export const nowSeconds = (): number => Math.floor(Date.now() / 1000);

export const userNotFound = refusal("user.not_found", "not_found", () => "user not found");
export const addressTaken = refusal<{ email: string }>(
  "address.taken",
  "conflict",
  ({ email }) => `address ${email} is already taken`,
);
export const addressInvalid = refusal<{ field: string; problem: string }>(
  "address.invalid",
  "invalid",
  ({ field, problem }) => `${field}: not a valid e-mail address: ${problem}`,
);
export const domainNotManaged = refusal<{ field: string; domain: string }>(
  "domain.not_managed",
  "invalid",
  ({ field, domain }) => `${field}: domain ${domain} is not managed here`,
);
export const rolesNotList = refusal("roles.not_list", "invalid", () => "roles: must be a list of role names");
export const roleUnknown = refusal<{ role: string }>(
  "roles.unknown",
  "invalid",
  ({ role }) => `roles: unknown role ${role}`,
);
export const quotaInvalid = refusal(
  "quota.invalid",
  "invalid",
  () => "quota: must be a whole number of MiB, 0 or more",
);
export const flagInvalid = refusal<{ field: string }>(
  "flag.invalid",
  "invalid",
  ({ field }) => `${field}: must be true or false`,
);
export const smtpQuotaNotObject = refusal(
  "smtp_quota.not_object",
  "invalid",
  () => "smtpQuota: must be an object with per_hour and per_day",
);
export const smtpQuotaInvalid = refusal<{ field: string }>(
  "smtp_quota.invalid",
  "invalid",
  ({ field }) => `${field}: must be a whole number, 0 or more`,
);
export const mailCryptWithoutKeys = refusal(
  "mail_crypt.no_keys",
  "invalid",
  () => "mailCrypt: the user has no MailCrypt keys; reset the user to create them",
);
export const lastLoginTimeInvalid = refusal(
  "last_login_time.invalid",
  "invalid",
  () => "lastLoginTime: must be Unix seconds, not in the future, or null",
);
export const totpSecretInvalid = refusal(
  "totp.secret_invalid",
  "invalid",
  () => "secret: must be a base32 string of at least 16 characters",
);
export const backupCodesInvalid = refusal(
  "totp.backup_codes_invalid",
  "invalid",
  () => "backupCodes: must be a list of up to 20 six-digit codes",
);
export const totpStepInvalid = refusal(
  "totp.step_invalid",
  "invalid",
  () => "usedStep: must be a TOTP time step",
);

export function checkRoles(roles: unknown): Role[] {
  if (!Array.isArray(roles) || !roles.every((r) => typeof r === "string")) {
    throw rolesNotList();
  }
  const unknown = roles.filter((r) => !isRole(r));
  if (unknown.length > 0) throw roleUnknown({ role: String(unknown[0]) });
  return normalizeRoles(roles);
}

export function checkQuota(quota: unknown): number | null {
  if (quota === null || quota === undefined) return null;
  if (typeof quota !== "number" || !Number.isSafeInteger(quota) || quota < 0) {
    throw quotaInvalid();
  }
  return quota;
}

/** A yes/no field: only true or false, never a value that merely looks like one ("false", [false]). */
export function checkFlag(name: string, value: unknown): boolean {
  if (typeof value !== "boolean") throw flagInvalid({ field: name });
  return value;
}

/** SMTP limits as the admin API and the console give them; a null or missing value means the setting. */
export interface SmtpQuotaInput {
  per_hour?: number | null;
  per_day?: number | null;
}

export function checkSmtpQuota(value: unknown): SmtpQuota {
  if (value === null || value === undefined) return { perHour: null, perDay: null };
  if (typeof value !== "object" || Array.isArray(value)) throw smtpQuotaNotObject();
  const record = value as Record<string, unknown>;
  const read = (key: string): number | null => {
    const v = record[key];
    if (v === null || v === undefined) return null;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
      throw smtpQuotaInvalid({ field: `smtpQuota.${key}` });
    }
    return v;
  };
  return { perHour: read("per_hour"), perDay: read("per_day") };
}

export interface CreateUserInput {
  email: string;
  password: string;
  roles?: string[];
  mailCrypt?: boolean;
  quota?: number | null;
  passwordChangeRequired?: boolean;
  smtpQuota?: SmtpQuotaInput | null;
}

/** A user as the admin API shows it: never a hash, key or secret. */
export interface UserView {
  email: string;
  domain: string;
  roles: Role[];
  mailCrypt: boolean;
  hasMailCryptKeys: boolean;
  hasRecoveryToken: boolean;
  quota: number | null;
  smtpQuota: { per_hour: number | null; per_day: number | null };
  passwordChangeRequired: boolean;
  totpEnabled: boolean;
  /** "Mail apps must use app passwords": the user's own choice, null for the domain's default. */
  appPasswordsRequired: boolean | null;
  lastLoginTime: number | null;
  createdAt: number;
  updatedAt: number;
  deleted: boolean;
}

export const toUserView = (user: User): UserView => ({
  email: user.email,
  domain: user.email.slice(user.email.lastIndexOf("@") + 1),
  roles: user.roles,
  mailCrypt: user.mailCrypt,
  hasMailCryptKeys: user.mailCryptPublicKey !== null && user.mailCryptSecretBox !== null,
  hasRecoveryToken: user.recoverySecretBox !== null,
  quota: user.quota,
  smtpQuota: { per_hour: user.smtpQuota.perHour, per_day: user.smtpQuota.perDay },
  passwordChangeRequired: user.passwordChangeRequired,
  totpEnabled: user.totpConfirmed && user.totpSecret !== null,
  appPasswordsRequired: user.appPasswordsRequired,
  lastLoginTime: user.lastLoginTime,
  createdAt: user.createdAt,
  updatedAt: user.updatedAt,
  deleted: user.deleted,
});

/** What an admin may change on a user; each value is still checked here (the console calls this too). */
export interface UserPatch {
  roles?: string[];
  quota?: number | null;
  passwordChangeRequired?: boolean;
  smtpQuota?: SmtpQuotaInput | null;
  mailCrypt?: boolean;
  lastLoginTime?: number | null;
  /**
   * "Mail apps must use app passwords" (null: the domain's default). Not a column this service
   * writes: AdminUsers.update sets it through AppPasswordService.setRequired, with its security event.
   */
  appPasswordsRequired?: boolean | null;
}

/** TOTP as an admin switches it on: what is not given is generated. */
export interface TotpInput {
  secret?: string | null;
  backupCodes?: string[] | null;
}

export type UserStatus = "active" | "deleted" | "all";

export interface CreateUserOptions {
  /**
   * More work of the caller in the creating transaction, after the user row and `user.created`
   * (registration: redeem the invite code, queue the welcome e-mail). Throwing rolls the whole
   * creation back. A callback rather than the caller's transaction, so Argon2 still runs before
   * any transaction is open. Use only `trx` in it: on SQLite another query would wait for it.
   */
  within?: (trx: Transaction<Database>, user: User) => Promise<void>;
}

/** Whom a function acts on: an address to look up, or the user row the caller has read already. */
export type UserTarget = string | User;

/**
 * More work of the caller inside the function's transaction (an admin action's audit entry), for
 * functions that do expensive work (Argon2, scrypt) before they open it.
 */
export type Within = (trx: Transaction<Database>) => Promise<void>;

export interface CreatedUser {
  user: User;
  recoveryToken: string | null;
}

export class UserService {
  readonly #db: Kysely<Database>;
  readonly #pool: CryptoPool;
  readonly #settings: SettingsService;
  readonly #events: AccountEvents;
  readonly #installationSecret: InstallationSecret;
  readonly #securityEvents: SecurityEventLog;
  /** The one password rule, for every door that sets a password (accounts/password-policy.ts). */
  readonly passwordPolicy: PasswordPolicy;

  constructor(
    db: Kysely<Database>,
    pool: CryptoPool,
    settings: SettingsService,
    events: AccountEvents,
    passwordPolicy: PasswordPolicy,
    securityEvents: SecurityEventLog,
    installationSecret: InstallationSecret,
  ) {
    this.#installationSecret = installationSecret;
    this.#db = db;
    this.#pool = pool;
    this.#settings = settings;
    this.#events = events;
    this.passwordPolicy = passwordPolicy;
    this.#securityEvents = securityEvents;
  }

  /** What the user's backup codes are keyed with (credentials/backup-codes.ts). */
  backupCodeKey(user: { email: string }): BackupCodeKey {
    return { secret: this.#installationSecret, email: user.email };
  }

  /** Any user with this address, deleted ones included. */
  async findByEmail(email: string, db: Kysely<Database> = this.#db): Promise<User | null> {
    const row = await db.selectFrom("users").selectAll().where("email", "=", email).executeTakeFirst();
    return row ? toUser(row) : null;
  }

  /** A user by address, deleted ones included. */
  async get(rawEmail: string, db: Kysely<Database> = this.#db): Promise<User> {
    const address = parseAddress(rawEmail);
    const user = address ? await this.findByEmail(address.email, db) : null;
    if (!user) throw userNotFound();
    return user;
  }

  /** The active user with this address (`activeUserRow`, the one "is this an active user" query). */
  async getActive(rawEmail: string, db: Kysely<Database> = this.#db): Promise<User> {
    const address = parseAddress(rawEmail);
    const row = address ? await activeUserRow(db, address.email) : undefined;
    if (!row) throw userNotFound();
    return toUser(row);
  }

  /**
   * The active user a function acts on: read by its address, or the row the caller read already
   * (an admin action reads the user once, checks it and hands it down), which must be active.
   */
  async active(target: UserTarget, db: Kysely<Database> = this.#db): Promise<User> {
    if (typeof target === "string") return this.getActive(target, db);
    if (target.deleted) throw userNotFound();
    return target;
  }

  /**
   * Creates an account; keys (and a recovery token) are made when MailCrypt applies to it.
   * `user.created` is recorded in the same transaction for every caller (admin API, console, web).
   */
  async create(input: CreateUserInput, options: CreateUserOptions = {}): Promise<CreatedUser> {
    const address = parseNewAddress(input.email);
    if (!address) throw addressInvalid({ field: "email", problem: newAddressProblem(input.email) ?? "" });
    const password = await this.passwordPolicy.require(input.password);
    const roles = checkRoles(input.roles ?? []);
    const quota = checkQuota(input.quota);
    const smtpQuota = checkSmtpQuota(input.smtpQuota);
    if (input.mailCrypt !== undefined) checkFlag("mailCrypt", input.mailCrypt);
    const passwordChangeRequired =
      input.passwordChangeRequired === undefined
        ? false
        : checkFlag("passwordChangeRequired", input.passwordChangeRequired);
    const domain = await managedDomain(this.#db, address.domain);
    if (!domain) throw domainNotManaged({ field: "email", domain: address.domain });
    await this.assertAddressAvailable(address.email);

    const level = await this.#settings.get("mail_crypt");
    const action = mailCryptFor(level, "create", { requested: input.mailCrypt });
    // Expensive work first, outside the transaction, so no lock is held while Argon2 runs.
    const [passwordHash, material] = await Promise.all([
      hashPassword(password, this.#pool),
      mailCryptMaterial(action, password, this.#pool),
    ]);
    const now = nowSeconds();
    const user = await this.#db.transaction().execute(async (trx) => {
      await this.assertAddressAvailable(address.email, trx);
      await trx
        .insertInto("users")
        .values({
          email: address.email,
          domain_id: domain.id,
          password: passwordHash,
          password_app_form: 0,
          roles: JSON.stringify(roles),
          password_change_required: toFlag(passwordChangeRequired),
          quota,
          smtp_quota_per_hour: smtpQuota.perHour,
          smtp_quota_per_day: smtpQuota.perDay,
          mail_crypt: toFlag(material !== null),
          mail_crypt_public_key: material?.publicKey ?? null,
          mail_crypt_secret_box: material?.secretBox ?? null,
          secret_box_binding: material ? secretBoxBinding(passwordHash, material.secretBox) : null,
          recovery_secret_box: material?.recoverySecretBox ?? null,
          totp_confirmed: 0,
          totp_backup_codes: "[]",
          created_at: now,
          updated_at: now,
          deleted: 0,
        })
        .execute();
      const created = await this.findByEmail(address.email, trx);
      if (!created) throw new Error("inserted user not found");
      await this.#events.record(trx, "user.created", created);
      await options.within?.(trx, created);
      return created;
    });
    return { user, recoveryToken: material?.recoveryToken ?? null };
  }

  async list(page: Page, filter: { domain?: string; status: UserStatus }): Promise<Listing<UserView>> {
    let query = this.#db.selectFrom("users");
    if (filter.domain) {
      const name = String(filter.domain).toLowerCase();
      query = query.where("domain_id", "=", (eb) =>
        eb.selectFrom("domains").select("id").where(isManagedDomainNamed(name)),
      );
    }
    if (filter.status !== "all") query = query.where("deleted", "=", filter.status === "deleted" ? 1 : 0);
    if (page.search !== "") query = query.where(containsText("email", page.search));
    const [rows, count] = await Promise.all([
      query.selectAll().orderBy("email").limit(page.limit).offset(page.offset).execute(),
      query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    ]);
    return { items: rows.map((row) => toUserView(toUser(row))), total: Number(count.n) };
  }

  /** Changes what an admin may change on an active user; all fields are checked before anything is written. */
  async update(target: UserTarget, patch: UserPatch, trx?: Transaction<Database>): Promise<User> {
    if (!trx) return this.#db.transaction().execute((t) => this.update(target, patch, t));
    const user = await this.active(target, trx);
    const changes: Partial<{
      roles: string;
      quota: number | null;
      password_change_required: 0 | 1;
      smtp_quota_per_hour: number | null;
      smtp_quota_per_day: number | null;
      mail_crypt: 0 | 1;
    }> = {};
    let lastLoginTime: number | null | undefined;
    if (patch.roles !== undefined) changes.roles = JSON.stringify(checkRoles(patch.roles));
    if (patch.quota !== undefined) changes.quota = checkQuota(patch.quota);
    if (patch.passwordChangeRequired !== undefined) {
      changes.password_change_required = toFlag(
        checkFlag("passwordChangeRequired", patch.passwordChangeRequired),
      );
    }
    if (patch.smtpQuota !== undefined) {
      const quota = checkSmtpQuota(patch.smtpQuota);
      changes.smtp_quota_per_hour = quota.perHour;
      changes.smtp_quota_per_day = quota.perDay;
    }
    if (patch.mailCrypt !== undefined) {
      if (checkFlag("mailCrypt", patch.mailCrypt) && (!user.mailCryptPublicKey || !user.mailCryptSecretBox)) {
        throw mailCryptWithoutKeys();
      }
      changes.mail_crypt = toFlag(patch.mailCrypt);
    }
    if (patch.lastLoginTime !== undefined) {
      const value = patch.lastLoginTime;
      if (
        value !== null &&
        (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0 || value > nowSeconds())
      ) {
        throw lastLoginTimeInvalid();
      }
      lastLoginTime = value;
    }
    if (Object.keys(changes).length > 0 || lastLoginTime !== undefined) {
      await trx
        .updateTable("users")
        .set({ ...changes, updated_at: nowSeconds() })
        .where("id", "=", user.id)
        .where(isActiveUser)
        .execute();
      if (lastLoginTime !== undefined)
        await recordActivity(trx, user, { kind: "corrected", at: lastLoginTime });
    }
    return this.getActive(user.email, trx);
  }

  /**
   * Switches TOTP on with the given secret and backup codes, generating what is not given.
   * `usedStep`: the step of the code that confirmed a self-service enrolment, so that code cannot
   * sign in afterwards (a code works once). The user's web sessions end with it, whoever switches
   * it on (the user on the pages, an admin through the API): they were opened without the second
   * factor. `keepSessionIdHash`: the session the user enrolled in, which stays. `two_factor.enabled`
   * is recorded with the change.
   */
  async enableTotp(
    target: UserTarget,
    input: TotpInput,
    origin: SecurityEventOrigin,
    options: { usedStep?: number; within?: Within; keepSessionIdHash?: string } = {},
  ): Promise<{ secret: string; backupCodes: string[] }> {
    const user = await this.active(target);
    let secret: string;
    if (input.secret === undefined || input.secret === null) secret = generateTotpSecret();
    else if (
      typeof input.secret === "string" &&
      /^[A-Z2-7]{16,128}=*$/i.test(input.secret.replaceAll(" ", ""))
    ) {
      secret = input.secret.replaceAll(" ", "").replace(/=+$/, "").toUpperCase();
    } else throw totpSecretInvalid();
    let codes: string[];
    if (input.backupCodes === undefined || input.backupCodes === null) codes = generateBackupCodes();
    else if (
      Array.isArray(input.backupCodes) &&
      input.backupCodes.length <= 20 &&
      input.backupCodes.every((c) => typeof c === "string" && /^\d{6}$/.test(c))
    ) {
      codes = [...new Set(input.backupCodes)];
    } else throw backupCodesInvalid();
    const usedStep = options.usedStep ?? null;
    if (usedStep !== null && (!Number.isSafeInteger(usedStep) || usedStep < 0)) throw totpStepInvalid();
    const key = this.backupCodeKey(user);
    const hashed = codes.map((code) => hashBackupCode(code, key));
    await this.#db.transaction().execute(async (trx) => {
      await trx
        .updateTable("users")
        .set({
          totp_secret: secret,
          totp_confirmed: 1,
          totp_backup_codes: JSON.stringify(hashed),
          totp_last_step: usedStep,
          updated_at: nowSeconds(),
        })
        .where("id", "=", user.id)
        .execute();
      await endWebSessions(
        trx,
        this.#securityEvents,
        { user, origin, because: "two_factor_enabled" },
        options.keepSessionIdHash,
      );
      await this.#securityEvents.record(trx, user, origin, { type: "two_factor.enabled" });
      await options.within?.(trx);
    });
    return { secret, backupCodes: codes };
  }

  /** Switches TOTP off (and its backup codes); `two_factor.disabled` when it was on. */
  /** The owner switches TOTP off; passkeys stay, and with one left two-factor authentication stays on. */
  async disableTotp(
    target: UserTarget,
    origin: SecurityEventOrigin,
    trx?: Transaction<Database>,
  ): Promise<void> {
    if (!trx) return this.#db.transaction().execute((t) => this.disableTotp(target, origin, t));
    const user = await this.active(target, trx);
    const switchedOff = await this.#clearTotp(user, trx);
    // With a passkey left, two-factor authentication stays on (accounts/passkeys.ts twoFactorIsOn).
    const passkey = await trx
      .selectFrom("passkeys")
      .select("id")
      .where("user_id", "=", user.id)
      .executeTakeFirst();
    if (switchedOff && !passkey)
      await this.#securityEvents.record(trx, user, origin, {
        type: "two_factor.disabled",
        detail: { how: "switched_off" },
      });
  }

  /**
   * An admin switches two-factor authentication off: every second factor goes, TOTP and passkeys
   * (and the sign-in with a passkey alone), so an owner who lost the phone holding them gets in
   * with the password again.
   */
  async disableTwoFactor(user: User, origin: SecurityEventOrigin, trx: Transaction<Database>): Promise<void> {
    const switchedOff = await this.#clearTotp(user, trx);
    const passkeys = await trx.deleteFrom("passkeys").where("user_id", "=", user.id).executeTakeFirst();
    await trx.updateTable("users").set({ passkey_sign_in: 0 }).where("id", "=", user.id).execute();
    if (switchedOff || Number(passkeys.numDeletedRows) > 0)
      await this.#securityEvents.record(trx, user, origin, {
        type: "two_factor.disabled",
        detail: { how: "switched_off" },
      });
  }

  async #clearTotp(user: User, trx: Transaction<Database>): Promise<boolean> {
    const updated = await trx
      .updateTable("users")
      .set({
        totp_secret: null,
        totp_confirmed: 0,
        totp_backup_codes: "[]",
        totp_last_step: null,
        updated_at: nowSeconds(),
      })
      .where("id", "=", user.id)
      .where((eb) => eb.or([eb("totp_confirmed", "=", 1), eb("totp_secret", "is not", null)]))
      .executeTakeFirst();
    return Number(updated.numUpdatedRows) > 0;
  }

  /** An address is taken by any user or alias, deleted ones included: addresses are never reused. */
  async assertAddressAvailable(email: string, db: Kysely<Database> | Transaction<Database> = this.#db) {
    const [user, alias] = await Promise.all([
      db.selectFrom("users").select("id").where("email", "=", email).executeTakeFirst(),
      db.selectFrom("aliases").select("id").where("source", "=", email).executeTakeFirst(),
    ]);
    if (user || alias) throw addressTaken({ email });
  }
}
