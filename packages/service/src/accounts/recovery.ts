import { createPrivateKey, createPublicKey, randomUUID } from "node:crypto";
import type { Kysely, Transaction } from "kysely";
import type { CryptoPool } from "../credentials/crypto-pool.ts";
import {
  newRecoveryToken,
  normalizeRecoveryToken,
  openSecretBox,
  SecretBoxError,
  sealSecretBox,
} from "../credentials/mailcrypt.ts";
import { secretBoxBinding } from "../credentials/password-check.ts";
import { hashPassword } from "../credentials/passwords.ts";
import type { Database } from "../db/schema.ts";
import type { Locale } from "../i18n/catalogue.ts";
import { parseAddress } from "./addresses.ts";
import { checkPasswordShape, type PasswordPolicy } from "./password-policy.ts";
import { activeUserRow, endWebSessions, isActiveUser } from "./queries.ts";
import type { SecurityEventDoor, SecurityEventLog, SecurityEventOrigin } from "./security-events.ts";
import type { SignInGuard } from "./sign-in-guard.ts";
import { nowSeconds } from "./users.ts";

/** The reference's fixed periods: a new password can be set 2 days after the start, until day 30. */
export const recoveryWaitSeconds = 2 * 86400;
export const recoveryExpirySeconds = 30 * 86400;

/** Who asks: the client address (throttling) and the language of the "recovery started" e-mail. */
export interface RecoveryRequest {
  client?: string | undefined;
  locale: Locale;
  /** The door of the security events; the recovery page's unless told. */
  door?: SecurityEventDoor;
}

export type RecoveryCheck =
  | { kind: "throttled"; retryAfter: number }
  /** Unknown address, no recovery token, or the token does not open it: one answer for all. */
  | { kind: "wrong" }
  /** `started`: this request (re)started the recovery (and wrote the e-mail). */
  | { kind: "waiting"; activeFrom: number; started: boolean }
  | { kind: "ready"; expiresAt: number };

export type RecoveryResult =
  | { kind: "throttled"; retryAfter: number }
  | { kind: "wrong" }
  | { kind: "waiting"; activeFrom: number }
  /** Not started, or started more than 30 days ago: it must be started again. */
  | { kind: "expired" }
  /** The new password is set; the new recovery token is returned once and never stored. */
  | { kind: "done"; recoveryToken: string };

interface Verified {
  id: number;
  email: string;
  domainId: number;
  twoFactor: boolean;
  recoveryBox: string;
  startTime: number | null;
  privateKey: string;
}

/**
 * Where "recovery started" goes: the e-mail outbox (mail/outbox.ts), written in the transaction that
 * starts the waiting period. Declared here so the accounts layer never imports mail/ (it sits above).
 */
export interface RecoveryMail {
  recoveryStarted(
    trx: Transaction<Database>,
    input: { email: string; activeFrom: number; locale: Locale },
  ): Promise<unknown>;
}

/**
 * Recovery with the recovery token (reference section 2.5), for a user who lost the password:
 * the token opens the recovery box, which holds the MailCrypt private key, so mail stays readable.
 * A first check starts a waiting period and tells the account by e-mail, so its owner can stop a
 * recovery somebody else started (a new recovery token does that); the new password can be set
 * from 2 days after the start until 30 days after it, and a later check starts it again.
 *
 * Unlike the reference: the token is lower-cased once and that form is used for every step (its
 * bug 6); the final step re-checks both bounds; 2FA is reset, all web sessions end and the
 * change-required flag clears with the new password the owner chose. A user without a recovery
 * box (no token was ever made: no MailCrypt key) cannot recover and gets the one "wrong" answer;
 * the key material written at the end is always consistent: the private key from the recovery box,
 * sealed under the new password, its own public key (the reference's bug 8 left boxes sealed under
 * old passwords behind).
 */
export class RecoveryService {
  readonly #db: Kysely<Database>;
  readonly #pool: CryptoPool;
  readonly #guard: SignInGuard;
  readonly #mail: RecoveryMail;
  readonly #passwordPolicy: PasswordPolicy;
  readonly #securityEvents: SecurityEventLog;
  #decoyBox: Promise<string> | null = null;

  constructor(
    db: Kysely<Database>,
    pool: CryptoPool,
    guard: SignInGuard,
    mail: RecoveryMail,
    passwordPolicy: PasswordPolicy,
    securityEvents: SecurityEventLog,
  ) {
    this.#passwordPolicy = passwordPolicy;
    this.#securityEvents = securityEvents;
    this.#db = db;
    this.#pool = pool;
    this.#guard = guard;
    this.#mail = mail;
  }

  /** The first step: checks address and token, starts (or restarts) the waiting period, says where it stands. */
  async check(rawEmail: string, rawToken: string, request: RecoveryRequest): Promise<RecoveryCheck> {
    const verified = await this.#verify(rawEmail, rawToken, request);
    if ("kind" in verified) return verified;
    const now = nowSeconds();
    const { startTime } = verified;
    if (startTime === null || now - startTime > recoveryExpirySeconds) {
      const started = await this.#db.transaction().execute(async (trx) => {
        const updated = await trx
          .updateTable("users")
          .set({ recovery_start_time: now })
          .where("id", "=", verified.id)
          .where("recovery_secret_box", "=", verified.recoveryBox)
          .where((eb) =>
            startTime === null
              ? eb("recovery_start_time", "is", null)
              : eb("recovery_start_time", "=", startTime),
          )
          .where(isActiveUser)
          .executeTakeFirst();
        if (Number(updated.numUpdatedRows) !== 1) return false;
        await this.#securityEvents.record(trx, verified, originOf(request), { type: "recovery.started" });
        await this.#mail.recoveryStarted(trx, {
          email: verified.email,
          activeFrom: now + recoveryWaitSeconds,
          locale: request.locale,
        });
        return true;
      });
      if (started) return { kind: "waiting", activeFrom: now + recoveryWaitSeconds, started: true };
      // Another request started it (or the account changed) meanwhile: answer from what is stored now.
      const row = await activeUserRow(this.#db, verified.email);
      if (row?.recovery_secret_box !== verified.recoveryBox || row.recovery_start_time === null)
        return { kind: "wrong" };
      return { kind: "waiting", activeFrom: row.recovery_start_time + recoveryWaitSeconds, started: false };
    }
    if (now - startTime < recoveryWaitSeconds)
      return { kind: "waiting", activeFrom: startTime + recoveryWaitSeconds, started: false };
    return { kind: "ready", expiresAt: startTime + recoveryExpirySeconds };
  }

  /**
   * The last step: address and token checked again, and both bounds of the period; then the new
   * password, the private key sealed under it, a new recovery token, 2FA reset, sessions ended.
   */
  async complete(
    rawEmail: string,
    rawToken: string,
    rawNewPassword: unknown,
    request: Omit<RecoveryRequest, "locale">,
  ): Promise<RecoveryResult> {
    // The password's shape first (no lookup); the leaked-password lookup only for a verified token,
    // so no one can make this service ask the range API without one.
    checkPasswordShape(rawNewPassword);
    const verified = await this.#verify(rawEmail, rawToken, request);
    if ("kind" in verified) return verified;
    const now = nowSeconds();
    const { startTime } = verified;
    if (startTime === null || now - startTime > recoveryExpirySeconds) return { kind: "expired" };
    if (now - startTime < recoveryWaitSeconds)
      return { kind: "waiting", activeFrom: startTime + recoveryWaitSeconds };
    const newPassword = await this.#passwordPolicy.require(rawNewPassword);
    const recoveryToken = newRecoveryToken();
    const [hash, secretBox, recoverySecretBox] = await Promise.all([
      hashPassword(newPassword, this.#pool),
      sealSecretBox(verified.privateKey, newPassword, this.#pool),
      sealSecretBox(verified.privateKey, recoveryToken, this.#pool),
    ]);
    const done = await this.#db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable("users")
        .set({
          password: hash,
          password_app_form: 0,
          password_change_required: 0,
          mail_crypt_public_key: publicKeyOf(verified.privateKey),
          mail_crypt_secret_box: secretBox,
          secret_box_binding: secretBoxBinding(hash, secretBox),
          recovery_secret_box: recoverySecretBox,
          recovery_start_time: null,
          totp_secret: null,
          totp_confirmed: 0,
          totp_backup_codes: "[]",
          totp_last_step: null,
          updated_at: now,
        })
        .where("id", "=", verified.id)
        .where("recovery_secret_box", "=", verified.recoveryBox)
        .where("recovery_start_time", "=", startTime)
        .where(isActiveUser)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) !== 1) return false;
      // Like TOTP, the passkeys go: recovery is for someone who lost their way in.
      const passkeys = await trx.deleteFrom("passkeys").where("user_id", "=", verified.id).executeTakeFirst();
      await trx.updateTable("users").set({ passkey_sign_in: 0 }).where("id", "=", verified.id).execute();
      const origin = originOf(request);
      const events = this.#securityEvents;
      await events.record(trx, verified, origin, { type: "recovery.completed" });
      await events.record(trx, verified, origin, { type: "password.changed", detail: { how: "recovery" } });
      if (verified.twoFactor || Number(passkeys.numDeletedRows) > 0)
        await events.record(trx, verified, origin, {
          type: "two_factor.disabled",
          detail: { how: "recovery" },
        });
      await endWebSessions(trx, events, { user: verified, origin, because: "recovery" });
      return true;
    });
    // Changed meanwhile (a new token, a finished recovery in another tab, a deletion): start over.
    return done ? { kind: "done", recoveryToken } : { kind: "wrong" };
  }

  /**
   * Address and token, throttled per address and per client like a sign-in. An unknown address
   * or one without a recovery box costs the same Argon2 work as a wrong token, so the answer's
   * time does not tell which accounts exist or have a token.
   */
  async #verify(
    rawEmail: string,
    rawToken: string,
    request: { client?: string | undefined },
  ): Promise<Verified | { kind: "wrong" } | { kind: "throttled"; retryAfter: number }> {
    const address = parseAddress(String(rawEmail));
    const token = normalizeRecoveryToken(String(rawToken));
    const guarded = await this.#guard.attempt(
      {
        kind: "recovery_token",
        door: "web",
        account: address?.email ?? String(rawEmail),
        client: { address: request.client },
      },
      async () => {
        const row = address ? await activeUserRow(this.#db, address.email) : undefined;
        const box = row?.recovery_secret_box ?? null;
        let privateKey: string | null = null;
        if (token !== null) {
          try {
            privateKey = await openSecretBox(box ?? (await this.#decoy()), token, this.#pool);
            if (box === null) privateKey = null;
          } catch (error) {
            if (!(error instanceof SecretBoxError)) throw error;
          }
        }
        if (!row || box === null || privateKey === null) return { right: false, value: null };
        const verified: Verified = {
          id: row.id,
          email: row.email,
          domainId: Number(row.domain_id),
          twoFactor: row.totp_secret !== null,
          recoveryBox: box,
          startTime: row.recovery_start_time,
          privateKey,
        };
        return { right: true, value: verified };
      },
    );
    if (guarded.outcome === "throttled") return { kind: "throttled", retryAfter: guarded.retryAfter };
    return guarded.value ?? { kind: "wrong" };
  }

  /** A box no token opens, made once, for the equal work on unknown addresses. */
  #decoy(): Promise<string> {
    this.#decoyBox ??= sealSecretBox("decoy", randomUUID(), this.#pool);
    return this.#decoyBox;
  }
}

/** The account's owner at the recovery page (or the door the caller names). */
const originOf = (request: {
  client?: string | undefined;
  door?: SecurityEventDoor;
}): SecurityEventOrigin => ({
  door: request.door ?? "web",
  clientAddress: request.client ?? null,
  actor: null,
});

/** The public half of a stored private key, in the stored form (base64 of the SPKI PEM). */
function publicKeyOf(privateKeyB64: string): string {
  const privateKey = createPrivateKey(Buffer.from(privateKeyB64, "base64").toString("utf8"));
  const pem = createPublicKey(privateKey).export({ type: "spki", format: "pem" });
  return Buffer.from(String(pem), "utf8").toString("base64");
}
