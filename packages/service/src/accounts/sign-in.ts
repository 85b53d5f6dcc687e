import type { Kysely, Selectable } from "kysely";
import { normalizeAppPassword } from "../credentials/app-passwords.ts";
import { findBackupCode } from "../credentials/backup-codes.ts";
import type { CryptoPool } from "../credentials/crypto-pool.ts";
import { checkPassword, secretBoxBinding } from "../credentials/password-check.ts";
import { verifyDummy } from "../credentials/passwords.ts";
import { totpStepFor } from "../credentials/totp.ts";
import { type Keyed, type KeyedRead, type KeyReader, keyedRead, kyselyKeyReader } from "../db/key-reads.ts";
import type { Database, UserTable } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { recordActivity } from "./activity.ts";
import { parseAddress } from "./addresses.ts";
import {
  type AppPasswordMatch,
  type AppPasswordService,
  appPasswordDoors,
  takesAppPassword,
} from "./app-passwords.ts";
import { clientGroup } from "./client-address.ts";
import {
  type MailCryptAction,
  mailCryptFor,
  mailCryptMaterial,
  reportsMailCrypt,
} from "./mail-crypt-policy.ts";
import { activeUserRow, isActiveUser } from "./queries.ts";
import { effectiveRoles } from "./roles.ts";
import { decodeSetting, type SettingsService, storedSetting } from "./settings.ts";
import { attemptFrom, type CheckOrigin, type Guarded, type SignInGuard } from "./sign-in-guard.ts";

export type { CheckOrigin } from "./sign-in-guard.ts";

import {
  ownerOrigin,
  type SecondFactorKind,
  type SecurityEvent,
  type SecurityEventLog,
  type SecurityEventSubject,
} from "./security-events.ts";
import { nowSeconds, toUser, type User, type UserService } from "./users.ts";

/**
 * The outcome of a password sign-in. The password is checked first, so account state (spam,
 * password change) is only revealed to someone who knows the password; unknown and deleted users
 * cost the same Argon2 work as a wrong password.
 */
export type SignInResult =
  | { kind: "unknown" }
  /**
   * `user`: the account the failure is recorded for (its owner reads it); `reason` what its owner
   * reads (never told to the caller, who gets the ordinary failure).
   */
  | { kind: "wrong_password"; user: User; reason?: "app_password_required" | "app_password_scope" }
  | { kind: "spam"; user: User }
  | { kind: "password_change_required"; user: User; proof?: ConfirmedPassword }
  | { kind: "throttled"; retryAfter: number }
  /**
   * `proof` only when the account password signed in: an app password (`appPassword`, its id) is
   * never a proof for a change that needs the password.
   */
  | { kind: "ok"; user: User; mailCrypt: MailCryptUnlock; proof?: ConfirmedPassword; appPassword?: number };

/** The proof of a sign-in with the account password; an app password's sign-in has none. */
export function passwordProof(result: { proof?: ConfirmedPassword }): ConfirmedPassword {
  if (!result.proof) throw new Error("an app password is no proof of the account password");
  return result.proof;
}

/** The current password, asked again to confirm a change, is not the user's. */
export const passwordWrong = refusal("password.wrong", "invalid", () => "password: wrong password");
/** The brute-force policy refuses the attempt unchecked (sign-in-guard.ts); `retryAfter` in seconds. */
export const signInThrottled = refusal<{ retryAfter: number }>(
  "sign_in.throttled",
  "throttled",
  () => "too many failed sign-ins, try again later",
);

const confirmed = Symbol("confirmed password");
/**
 * The user's current password, checked by `confirmPassword` (or a sign-in) a moment ago: what a
 * change that needs the password (new password, recovery token, deletion) takes as its proof, so no
 * such change checks a password itself, unthrottled.
 */
export interface ConfirmedPassword {
  readonly user: User;
  readonly password: string;
  readonly [confirmed]: true;
}
const confirmation = (user: User, password: string): ConfirmedPassword => ({
  user,
  password,
  [confirmed]: true,
});

/** The outcome of a second-factor check; see `SignInService.validateSecondFactor`. */
export type SecondFactorResult =
  | "unknown"
  | "not_configured"
  | "wrong_code"
  | "password_change_required"
  | "ok";

export type MailCryptUnlock =
  | { state: "off" }
  | { state: "unlocked"; privateKey: string; publicKey: string }
  | { state: "failed"; reason: string };

export interface SignInOptions extends CheckOrigin {
  /** Open the MailCrypt private key with the password (passdb). */
  unlockMailCrypt?: boolean;
  /** The address the attempt is counted for, when it is not the one signed in with (identity). */
  account?: string;
  /**
   * The door has a second step (the web's 2FA): the sign-in is recorded as activity only once that
   * step succeeds (`recordCompletedSignIn`), not at the password.
   */
  deferActivity?: boolean;
}

/** The active user of an address, with the MailCrypt level, for the app-password path (keyed read). */
const userForSignIn = keyedRead((db, keys) =>
  db
    .selectFrom("users")
    .selectAll()
    .select("email as lookup_key")
    .select(storedSetting(db, "mail_crypt").as("mail_crypt_level"))
    .where(keys("email"))
    .where(isActiveUser),
);

export class SignInService {
  readonly #db: Kysely<Database>;
  readonly #pool: CryptoPool;
  readonly #settings: SettingsService;
  readonly #users: UserService;
  readonly #guard: SignInGuard;
  readonly #events: SecurityEventLog;
  readonly #appPasswords: AppPasswordService;
  readonly #userByEmail: KeyReader<
    Selectable<UserTable> & { lookup_key: string; mail_crypt_level: string | null }
  >;
  /** When an event of a sort was last recorded, per door, client and account (see #recentlyRecorded). */
  readonly #recorded = new Map<string, number>();
  readonly #observe: (result: SignInResult["kind"]) => void;

  constructor(
    db: Kysely<Database>,
    pool: CryptoPool,
    settings: SettingsService,
    users: UserService,
    guard: SignInGuard,
    events: SecurityEventLog,
    appPasswords: AppPasswordService,
    observe: (result: SignInResult["kind"]) => void = () => {},
    keyReader: <Row extends Keyed>(read: KeyedRead<Row>) => KeyReader<Row> = (read) =>
      kyselyKeyReader(db, read),
  ) {
    this.#appPasswords = appPasswords;
    this.#userByEmail = keyReader(userForSignIn);
    this.#db = db;
    this.#pool = pool;
    this.#settings = settings;
    this.#users = users;
    this.#guard = guard;
    this.#events = events;
    this.#observe = observe;
  }

  /**
   * The one rule for who may sign in with a password; every sign-in path calls it, and it runs under
   * the sign-in guard: a throttled attempt is answered without checking the password.
   */
  async signIn(rawEmail: string, password: string, options: SignInOptions = {}): Promise<SignInResult> {
    const account = (options.account ?? String(rawEmail)).trim();
    // A secret of the app-password form at IMAP or SMTP is counted as one, apart from the password,
    // and checked on the guard's cheap path: no Argon2, and a right one writes nothing.
    const kind = takesAppPassword(password, options.door) ? "app_password" : "password";
    if (kind === "app_password") {
      const cheap = await this.#guard.attemptCheap(attemptFrom(kind, account, options), async () => {
        const result = await this.#appPasswordCheck(rawEmail, password, options);
        return (
          result && { right: result.kind !== "unknown" && result.kind !== "wrong_password", value: result }
        );
      });
      if (cheap !== null) return this.#answered(account, options, cheap);
    }
    const guarded = await this.#guard.attempt(attemptFrom(kind, account, options), async () => {
      const result = await this.#signIn(rawEmail, password, options);
      // The right account password refused where app passwords are required is not a guess: not
      // counted (the owner's old mail client must not lock the owner out), yet no reason to trust.
      const refusedRight = result.kind === "wrong_password" && result.reason === "app_password_required";
      return {
        right: refusedRight || (result.kind !== "unknown" && result.kind !== "wrong_password"),
        trust: !refusedRight,
        value: result,
      };
    });
    return this.#answered(account, options, guarded);
  }

  async #answered(
    account: string,
    options: SignInOptions,
    guarded: Guarded<SignInResult>,
  ): Promise<SignInResult> {
    const result: SignInResult =
      guarded.outcome === "throttled" ? { kind: "throttled", retryAfter: guarded.retryAfter } : guarded.value;
    this.#observe(result.kind);
    await this.#recordSignIn(account, options, result, guarded.outcome === "right" && guarded.trusted);
    return result;
  }

  /**
   * An app password at IMAP or SMTP, read through the database's keyed reads: the account and the
   * app password (one keyed hash, one read), then the rules of #appPasswordSignIn. Null when the secret
   * may be the account's password instead (an account whose password may have that form): the
   * full sign-in decides, under the guard's full path.
   */
  async #appPasswordCheck(
    rawEmail: string,
    password: string,
    options: SignInOptions,
  ): Promise<SignInResult | null> {
    const address = parseAddress(rawEmail);
    const [row] = address ? await this.#userByEmail(address.email) : [];
    const user = row ? toUser(row) : null;
    const door = options.door ?? "console";
    const app = await this.#appPasswords.match(
      user?.id ?? null,
      password,
      door,
      options.client?.address ?? null,
    );
    if (app.kind === "not_app_password" || (app.kind === "no_match" && user?.passwordMayHaveAppForm))
      return null;
    const level = row ? decodeSetting("mail_crypt", row.mail_crypt_level) : undefined;
    return this.#appPasswordSignIn(user, app, options, level);
  }

  /**
   * The security event of a password sign-in. Failures are recorded for unknown addresses too (the
   * same work either way, so the time does not tell); the mail server's sign-ins of clients that
   * signed in before are not (each IMAP connection would be a row); the web's is recorded when the
   * whole sign-in is done (`recordCompletedSignIn`).
   */
  async #recordSignIn(account: string, origin: SignInOptions, result: SignInResult, trusted: boolean) {
    const door = origin.door ?? "console";
    const subject =
      "user" in result ? result.user : { id: null, email: account.slice(0, 254), domainId: null };
    switch (result.kind) {
      case "throttled":
        return this.#recordThrottled(subject, origin, result.retryAfter);
      case "unknown":
        return this.#record(subject, origin, {
          type: "sign_in.failed",
          detail: { reason: "unknown_account" },
        });
      case "wrong_password":
        // An old client still sending the refused password: once an hour is enough to be seen.
        if (
          result.reason === "app_password_required" &&
          this.#recentlyRecorded("app_password_required", subject, origin, 3_600_000)
        )
          return;
        return this.#record(subject, origin, {
          type: "sign_in.failed",
          detail: { reason: result.reason ?? "wrong_password" },
        });
      case "spam":
        return this.#record(subject, origin, {
          type: "sign_in.failed",
          detail: { reason: "account_disabled" },
        });
      default:
        if (origin.deferActivity) return;
        if ((door === "passdb" || door === "mta_auth") && trusted) return;
        return this.#record(
          subject,
          origin,
          result.kind === "ok" && result.appPassword !== undefined
            ? { type: "sign_in.succeeded", detail: { appPassword: result.appPassword } }
            : { type: "sign_in.succeeded" },
        );
    }
  }

  /** At most one throttled event a minute per door and client group: a flood writes no flood of rows. */
  async #recordThrottled(subject: SecurityEventSubject, origin: CheckOrigin, retryAfter: number) {
    if (this.#recentlyRecorded("throttled", subject, origin, 60_000)) return;
    await this.#record(subject, origin, { type: "sign_in.throttled", detail: { retryAfter } });
  }

  /**
   * Whether an event of this sort was recorded within `window` ms for this door and client group on
   * this instance (and notes it now if not): a flood, or an old mail client retrying the account
   * password where app passwords are required, writes no flood of rows.
   */
  #recentlyRecorded(
    sort: string,
    subject: SecurityEventSubject,
    origin: CheckOrigin,
    window: number,
  ): boolean {
    const address = origin.client?.address;
    const group = address ? clientGroup(address) : `${subject.email}`;
    // A throttled flood is one client's, whatever accounts it tries; a refused password is one account's.
    const key =
      sort === "throttled"
        ? `${sort}|${origin.door}|${group}`
        : `${sort}|${origin.door}|${group}|${subject.email}`;
    const now = Date.now();
    if ((this.#recorded.get(key) ?? 0) > now - window) return true;
    // Bounded: the oldest entries go first (a Map keeps insertion order).
    this.#recorded.delete(key);
    this.#recorded.set(key, now);
    if (this.#recorded.size > 10_000)
      for (const old of [...this.#recorded.keys()].slice(0, 1_000)) this.#recorded.delete(old);
    return false;
  }

  async #record(subject: SecurityEventSubject, origin: CheckOrigin, event: SecurityEvent): Promise<void> {
    const where = ownerOrigin(origin.door ?? "console", origin.client?.address ?? null);
    await this.#db.transaction().execute((trx) => this.#events.record(trx, subject, where, event));
  }

  /**
   * The one re-confirmation of a signed-in user's current password (password change, recovery token,
   * deletion, two-factor and OpenPGP changes, at every door): under the sign-in guard like a sign-in,
   * but not recorded as one. Throws `sign_in.throttled` (unchecked) or `password.wrong`.
   */
  async confirmPassword(user: User, password: string, origin: CheckOrigin = {}): Promise<ConfirmedPassword> {
    const guarded = await this.#guard.attempt(attemptFrom("password", user.email, origin), async () => {
      const found = await this.#users.findByEmail(user.email);
      const current = found && !found.deleted ? found : null;
      const verdict = current
        ? await checkPassword(password, current, this.#pool)
        : { valid: false as const };
      if (!current || !verdict.valid) return { right: false, value: null };
      return {
        right: true,
        value: verdict.upgrade ? await this.#upgrade(current, verdict.upgrade) : current,
      };
    });
    if (guarded.outcome === "throttled") throw signInThrottled({ retryAfter: guarded.retryAfter });
    if (guarded.outcome === "wrong" || !guarded.value) throw passwordWrong();
    return confirmation(guarded.value, password);
  }

  /**
   * The last step of a deferred sign-in (the web's password, or its second factor) succeeded: now it
   * counts as the user's activity and is recorded as a sign-in.
   */
  async recordCompletedSignIn(
    user: User,
    origin: CheckOrigin = {},
    secondFactor?: SecondFactorKind,
  ): Promise<void> {
    await recordActivity(this.#db, user, { kind: "sign-in" });
    await this.#record(user, origin, {
      type: "sign_in.succeeded",
      ...(secondFactor ? { detail: { secondFactor } } : {}),
    });
  }

  async #signIn(rawEmail: string, password: string, options: SignInOptions): Promise<SignInResult> {
    const address = parseAddress(rawEmail);
    const row = address ? await activeUserRow(this.#db, address.email) : undefined;
    const user = row ? toUser(row) : null;
    const door = options.door ?? "console";
    if (typeof password === "string") {
      const app = await this.#appPasswords.match(
        user?.id ?? null,
        password,
        door,
        options.client?.address ?? null,
      );
      // An account password of that form, set before the policy refused it, still works there.
      const maybePassword = app.kind === "no_match" && user?.passwordMayHaveAppForm === true;
      if (app.kind !== "not_app_password" && !maybePassword)
        return this.#appPasswordSignIn(user, app, options);
    }
    if (!user || typeof password !== "string" || password === "") {
      await checkPassword(typeof password === "string" ? password : "", null, this.#pool);
      return { kind: "unknown" };
    }
    const level = await this.#settings.get("mail_crypt");
    const keys = mailCryptFor(level, "sign-in", {
      userFlag: user.mailCrypt,
      hasKeys: user.mailCryptPublicKey !== null,
    });
    const verdict = await checkPassword(password, user, this.#pool);
    const current = verdict.valid && verdict.upgrade ? await this.#upgrade(user, verdict.upgrade) : user;
    if (verdict.valid && current.passwordMayHaveAppForm && normalizeAppPassword(password) === null)
      await this.#notAppForm(current);
    const refused = verdict.valid
      ? await this.#accountRefusal(current, password, door)
      : ({ kind: "wrong_password", user } as const);
    if (refused || !verdict.valid) {
      // Making the keys would have cost a derivation: a refusal costs the decoy's instead.
      if (keys !== "keep") await verifyDummy(password, this.#pool);
      return refused ?? { kind: "wrong_password", user };
    }
    const made = keys !== "keep" ? await this.#enableMailCrypt(current, password, keys) : null;
    // The password changed (or the account went) while the keys were made: it is no longer right.
    if (made === "changed") return { kind: "wrong_password", user };
    const signedIn = made?.user ?? current;
    if (!options.deferActivity) await recordActivity(this.#db, signedIn, { kind: "sign-in" });
    const mailCrypt = options.unlockMailCrypt
      ? this.#unlocked(signedIn, level, made ? made.privateKey : verdict.privateKey)
      : { state: "off" as const };
    return { kind: "ok", user: signedIn, mailCrypt, proof: confirmation(signedIn, password) };
  }

  /**
   * What refuses the right password of an account, in the order it is told: app passwords required
   * at IMAP and SMTP, the spam role, a password change required. Null: nothing does.
   */
  async #accountRefusal(
    user: User,
    password: string,
    door: NonNullable<SignInOptions["door"]>,
  ): Promise<SignInResult | null> {
    // The account password, right but refused at IMAP and SMTP: a stolen password alone opens no mailbox.
    if (appPasswordDoors.includes(door) && (await this.#appPasswords.required(user)))
      return { kind: "wrong_password", user, reason: "app_password_required" };
    if (effectiveRoles(user.roles).has("ROLE_SPAM")) return { kind: "spam", user };
    if (user.passwordChangeRequired)
      return { kind: "password_change_required", user, proof: confirmation(user, password) };
    return null;
  }

  /**
   * A sign-in with an app password: the account rules (spam, password change) as for the password,
   * the mailbox key from the app password's own box, no key created or rehash (that needs the
   * account password), and activity recorded.
   */
  async #appPasswordSignIn(
    user: User | null,
    app: Exclude<AppPasswordMatch, { kind: "not_app_password" }>,
    options: SignInOptions,
    mailCryptLevel?: number,
  ): Promise<SignInResult> {
    if (!user || app.kind === "no_match")
      return user ? { kind: "wrong_password", user } : { kind: "unknown" };
    if (app.kind === "out_of_scope") return { kind: "wrong_password", user, reason: "app_password_scope" };
    if (effectiveRoles(user.roles).has("ROLE_SPAM")) return { kind: "spam", user };
    if (user.passwordChangeRequired) return { kind: "password_change_required", user };
    if (!options.deferActivity) await recordActivity(this.#db, user, { kind: "sign-in" });
    let mailCrypt: MailCryptUnlock = { state: "off" };
    if (options.unlockMailCrypt) {
      const level = mailCryptLevel ?? (await this.#settings.get("mail_crypt"));
      if (reportsMailCrypt(level, user.mailCrypt, user.mailCryptPublicKey))
        mailCrypt =
          app.privateKey !== null
            ? { state: "unlocked", privateKey: app.privateKey, publicKey: user.mailCryptPublicKey ?? "" }
            : {
                state: "failed",
                reason: app.boxFailed
                  ? "decryption of the app password's secret box failed"
                  : "app password made before the mailbox keys: make a new one",
              };
    }
    return { kind: "ok", user, mailCrypt, appPassword: app.id };
  }

  /**
   * The one rule for a second-factor check (identity `validate` with `otp`): unknown, deleted and
   * spam users fail; a user without TOTP has nothing to check; then the code must match (a TOTP code
   * of the current step or one either side, not used before, or an unused backup code); only then is
   * "password change required" revealed. A code is used up (its TOTP step recorded, the backup code
   * removed) only when the answer is `ok`, so a refused request leaves it usable. Of two requests
   * racing with one code, only one gets `ok`. Runs under the sign-in guard (throws
   * `sign_in.throttled` unchecked).
   */
  async validateSecondFactor(
    user: User | null,
    code: string,
    origin: CheckOrigin & { account?: string } = {},
  ): Promise<SecondFactorResult> {
    const account = origin.account ?? user?.email ?? "";
    const guarded = await this.#guard.attempt(attemptFrom("second_factor", account, origin), async () => {
      const result = await this.#secondFactor(user, String(code));
      return { right: result === "ok" || result === "password_change_required", value: result };
    });
    const subject = user ?? { id: null, email: account.slice(0, 254), domainId: null };
    if (guarded.outcome === "throttled") {
      await this.#recordThrottled(subject, origin, guarded.retryAfter);
      throw signInThrottled({ retryAfter: guarded.retryAfter });
    }
    if (guarded.outcome === "wrong") await this.#record(subject, origin, { type: "second_factor.failed" });
    return guarded.value;
  }

  async #secondFactor(user: User | null, code: string): Promise<SecondFactorResult> {
    if (!user || user.deleted || effectiveRoles(user.roles).has("ROLE_SPAM")) return "unknown";
    if (!user.totpConfirmed || !user.totpSecret) return "not_configured";
    const step = totpStepFor(user.totpSecret, code, Date.now(), user.totpLastStep);
    const backupIndex =
      step === null ? await findBackupCode(code, user.totpBackupCodes, this.#users.backupCodeKey(user)) : -1;
    if (step === null && backupIndex < 0) return "wrong_code";
    if (user.passwordChangeRequired) return "password_change_required";
    if (step !== null) {
      const result = await this.#db
        .updateTable("users")
        .set({ totp_last_step: step })
        .where("id", "=", user.id)
        .where((eb) => eb.or([eb("totp_last_step", "is", null), eb("totp_last_step", "<", step)]))
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 1 ? "ok" : "wrong_code";
    }
    const remaining = user.totpBackupCodes.filter((_, i) => i !== backupIndex);
    const result = await this.#db
      .updateTable("users")
      .set({ totp_backup_codes: JSON.stringify(remaining) })
      .where("id", "=", user.id)
      .where("totp_backup_codes", "=", JSON.stringify(user.totpBackupCodes))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1 ? "ok" : "wrong_code";
  }

  /**
   * The MailCrypt answer of a sign-in, from the private key its check opened (or its key creation
   * made): no derivation of its own.
   */
  #unlocked(user: User, level: number, privateKey: string | null): MailCryptUnlock {
    if (!reportsMailCrypt(level, user.mailCrypt, user.mailCryptPublicKey)) return { state: "off" };
    if (!user.mailCryptSecretBox) return { state: "failed", reason: "secret should not be null" };
    if (privateKey === null) return { state: "failed", reason: "decryption of mailCryptSecretBox failed" };
    return { state: "unlocked", privateKey, publicKey: user.mailCryptPublicKey ?? "" };
  }

  /**
   * Level 3: a user signing in without keys gets them now, sealed under the password just verified
   * and bound to its hash. Of two sign-ins racing to make them, the second opens the first's box.
   */
  async #enableMailCrypt(
    user: User,
    password: string,
    action: MailCryptAction,
  ): Promise<{ user: User; privateKey: string | null } | "changed"> {
    const material = await mailCryptMaterial(action, password, this.#pool);
    if (!material) return { user, privateKey: null };
    const { publicKey, secretBox } = material;
    const binding = secretBoxBinding(user.passwordHash, secretBox);
    const result = await this.#db
      .updateTable("users")
      .set({
        mail_crypt: 1,
        mail_crypt_public_key: publicKey,
        mail_crypt_secret_box: secretBox,
        secret_box_binding: binding,
        updated_at: nowSeconds(),
      })
      .where("id", "=", user.id)
      .where("password", "=", user.passwordHash)
      .where("mail_crypt_public_key", "is", null)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 1) {
      const made = { mailCrypt: true, mailCryptPublicKey: publicKey, mailCryptSecretBox: secretBox };
      return { user: { ...user, ...made, secretBoxBinding: binding }, privateKey: material.privateKey };
    }
    // Another sign-in made the keys, or the password changed meanwhile: the password is checked
    // again against what is stored now, and a password no longer right signs nothing in (its proof
    // would carry the new hash).
    const found = await this.#users.findByEmail(user.email);
    const current = found && !found.deleted ? found : null;
    const verdict = current ? await checkPassword(password, current, this.#pool) : { valid: false as const };
    if (!current || !verdict.valid) return "changed";
    return { user: current, privateKey: verdict.privateKey };
  }

  /**
   * A right password brings its account to the current form (credentials/password-check.ts): the
   * new hash and the box's binding, written only if neither changed meanwhile.
   */
  async #upgrade(
    user: User,
    upgrade: { passwordHash: string; secretBoxBinding: string | null },
  ): Promise<User> {
    const box = user.mailCryptSecretBox;
    const result = await this.#db
      .updateTable("users")
      .set({ password: upgrade.passwordHash, secret_box_binding: upgrade.secretBoxBinding })
      .where("id", "=", user.id)
      .where("password", "=", user.passwordHash)
      .where((eb) =>
        box === null ? eb("mail_crypt_secret_box", "is", null) : eb("mail_crypt_secret_box", "=", box),
      )
      .executeTakeFirst();
    // The user as stored now: a change that needs the password (its proof) expects this hash.
    return Number(result.numUpdatedRows) === 1 ? { ...user, ...upgrade } : user;
  }

  /** A right password not of the app-password form: from now on IMAP and SMTP need not try that form as it. */
  async #notAppForm(user: User): Promise<void> {
    await this.#db
      .updateTable("users")
      .set({ password_app_form: 0 })
      .where("id", "=", user.id)
      .where("password", "=", user.passwordHash)
      .execute();
  }
}
