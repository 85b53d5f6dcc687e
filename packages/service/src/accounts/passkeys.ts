import { randomBytes } from "node:crypto";
import {
  type AuthenticationResponseJSON,
  type AuthenticatorTransportFuture,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from "@simplewebauthn/server";
import type { Kysely, Transaction } from "kysely";
import type { InstallationSecret } from "../config.ts";
import { insertReturningId } from "../db/insert.ts";
import { type Database, flag, type PasskeyChallengePurpose, toFlag } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import { clientGroup } from "./client-address.ts";
import { endWebSessions, isActiveUser } from "./queries.ts";
import { effectiveRoles } from "./roles.ts";
import {
  ownerOrigin,
  type SecurityEvent,
  type SecurityEventLog,
  type SecurityEventOrigin,
  type SecurityEventSubject,
} from "./security-events.ts";
import { type SettingsService, storedSetting } from "./settings.ts";
import { type ConfirmedPassword, signInThrottled } from "./sign-in.ts";
import { attemptFrom, type CheckOrigin, type SignInGuard } from "./sign-in-guard.ts";
import { nowSeconds, toUser, type User } from "./users.ts";

/**
 * Passkeys (WebAuthn credentials) as a second factor beside TOTP, and, for users who turn it on, as
 * the whole sign-in (a discoverable credential with user verification is itself two factors).
 *
 * - The relying party is the configured public address (`app_url`): its host name is the RP id, its
 *   origin the only origin accepted. Without a stored `app_url` no passkey is registered: one made
 *   for the default address would never work once it is set.
 * - Every challenge is single-use and expires (table `passkey_challenges`): an answer deletes its
 *   row, so a replayed answer, or two racing with one challenge, get one verdict between them.
 * - Every check of an assertion passes the sign-in guard as a `second_factor` attempt.
 * - The signature counter: when the stored counter is above 0 and the new one is not above it, the
 *   credential was copied (or replayed): refused, and `passkey.cloned` recorded for the owner.
 */

export interface Passkey {
  id: number;
  name: string;
  createdAt: number;
  lastUsedAt: number | null;
}

/** How long a challenge may be answered (the browser's own timeout is a minute). */
export const challengeSeconds = 5 * 60;
export const passkeyNameMax = 64;

export const passkeyNoAppUrl = refusal(
  "passkey.no_app_url",
  "conflict",
  () => "passkeys need the setting app_url (the public address of the web interface)",
);
/** Passkeys one account holds at most (a person's devices and security keys). */
export const maxPasskeysPerUser = 20;
export const passkeyLimitReached = refusal(
  "passkey.limit_reached",
  "conflict",
  () => `at most ${maxPasskeysPerUser} passkeys per user; remove one first`,
);
/** Unanswered sign-in challenges kept at most (each lives 5 minutes). */
export const maxOpenSignInChallenges = 100_000;
/** Sign-in challenges one network (IPv4 /24, IPv6 /48) is handed per 5 minutes, per instance. */
export const signInChallengesPerNetwork = 30;
export const passkeyChallengesBusy = refusal(
  "passkey.busy",
  "unavailable",
  () => "too many passkey sign-ins under way; try again in a few minutes",
);
export const passkeyNotFound = refusal("passkey.not_found", "not_found", () => "passkey not found");
export const passkeyNameInvalid = refusal<{ max: number }>(
  "passkey.name_invalid",
  "invalid",
  ({ max }) => `name: 1 to ${max} characters`,
);
export const passkeyChallengeVoid = refusal(
  "passkey.challenge_void",
  "invalid",
  () => "the passkey request expired or was answered already; start again",
);
export const passkeyNotVerified = refusal(
  "passkey.not_verified",
  "invalid",
  () => "the passkey's answer could not be verified",
);
export const passkeyTaken = refusal("passkey.taken", "conflict", () => "this passkey is registered already");
export const passkeyNone = refusal(
  "passkey.none",
  "conflict",
  () => "signing in with a passkey alone needs a passkey",
);

/** The outcome of a passkey as second factor (the web's `/2fa`). */
export type PasskeyCheck = "ok" | "password_change_required" | "wrong";

/** The outcome of a sign-in with a passkey alone; `user` only once the passkey's signature is right. */
export type PasskeySignInResult =
  | { kind: "wrong" }
  | { kind: "throttled"; retryAfter: number }
  | { kind: "sign_in_off"; user: User }
  | { kind: "spam"; user: User }
  | { kind: "password_change_required"; user: User }
  | { kind: "ok"; user: User };

interface RelyingParty {
  id: string;
  origin: string;
  name: string;
}

// A credential id as stored (a varchar(255) with a unique index): longer ones are refused, not cut.
const b64url = /^[A-Za-z0-9_-]{1,255}$/;
const transportNames = new Set(["ble", "cable", "hybrid", "internal", "nfc", "smart-card", "usb"]);

/** The answer's credential id when it has the shape of one; anything else is no answer. */
function credentialIdOf(response: unknown): string | null {
  if (typeof response !== "object" || response === null) return null;
  const { id, rawId, type } = response as Record<string, unknown>;
  return typeof id === "string" && b64url.test(id) && rawId === id && type === "public-key" ? id : null;
}

const transportsOf = (stored: string): AuthenticatorTransportFuture[] => {
  try {
    const list: unknown = JSON.parse(stored);
    return Array.isArray(list)
      ? list.filter((t): t is AuthenticatorTransportFuture => typeof t === "string" && transportNames.has(t))
      : [];
  } catch {
    return [];
  }
};

/** The one rule "two-factor authentication is on": TOTP confirmed, or at least one passkey. */
export async function twoFactorIsOn(db: Kysely<Database> | Transaction<Database>, user: User) {
  if (user.totpConfirmed && user.totpSecret !== null) return true;
  const row = await db.selectFrom("passkeys").select("id").where("user_id", "=", user.id).executeTakeFirst();
  return row !== undefined;
}

export class PasskeyService {
  readonly #db: Kysely<Database>;
  readonly #settings: SettingsService;
  readonly #guard: SignInGuard;
  readonly #events: SecurityEventLog;
  /** Sign-in challenges handed out per network in the current 5 minutes (#countSignInChallenge). */
  readonly #handedOut = new Map<string, { since: number; count: number }>();

  readonly #secret: InstallationSecret;

  constructor(
    db: Kysely<Database>,
    settings: SettingsService,
    guard: SignInGuard,
    events: SecurityEventLog,
    secret: InstallationSecret,
  ) {
    this.#secret = secret;
    this.#db = db;
    this.#settings = settings;
    this.#guard = guard;
    this.#events = events;
  }

  /** RP id and origin from the stored `app_url`; refused while it is not set. */
  async relyingParty(): Promise<RelyingParty> {
    const stored = await storedSetting(this.#db, "app_url").executeTakeFirst();
    let url: URL;
    try {
      url = new URL(stored?.value ?? "");
    } catch {
      throw passkeyNoAppUrl();
    }
    return { id: url.hostname, origin: url.origin, name: await this.#settings.get("app_name") };
  }

  twoFactorIsOn(user: User): Promise<boolean> {
    return twoFactorIsOn(this.#db, user);
  }

  /** One of the user's passkeys, or `passkey.not_found`. */
  async get(user: User, id: number): Promise<Passkey> {
    const found = (await this.list(user)).find((passkey) => passkey.id === id);
    if (!found) throw passkeyNotFound();
    return found;
  }

  async list(user: User): Promise<Passkey[]> {
    const rows = await this.#db
      .selectFrom("passkeys")
      .select(["id", "name", "created_at", "last_used_at"])
      .where("user_id", "=", user.id)
      .orderBy("id")
      .execute();
    return rows.map((row) => ({
      id: row.id,
      name: row.name,
      createdAt: Number(row.created_at),
      lastUsedAt: row.last_used_at === null ? null : Number(row.last_used_at),
    }));
  }

  /** Whether the user may sign in with a passkey alone. */
  async signInAllowed(user: User): Promise<boolean> {
    const row = await this.#db
      .selectFrom("users")
      .select("passkey_sign_in")
      .where("id", "=", user.id)
      .executeTakeFirst();
    return row !== undefined && flag(row.passkey_sign_in);
  }

  /** A passkey's name as given: trimmed, 1 to 64 characters. */
  checkName(raw: unknown): string {
    const name = typeof raw === "string" ? raw.trim() : "";
    if (name === "" || name.length > passkeyNameMax || /[\p{Cc}]/u.test(name))
      throw passkeyNameInvalid({ max: passkeyNameMax });
    return name;
  }

  /**
   * The options for `navigator.credentials.create`, after the password was confirmed a moment ago
   * (the proof): the challenge is bound to the user. The user's passkeys are excluded (an
   * authenticator holds one per account).
   */
  async registrationOptions(proof: ConfirmedPassword): Promise<PublicKeyCredentialCreationOptionsJSON> {
    const { user } = proof;
    const rp = await this.relyingParty();
    const existing = await this.#db
      .selectFrom("passkeys")
      .select(["credential_id", "transports"])
      .where("user_id", "=", user.id)
      .execute();
    const challenge = await this.#issue("register", user.id);
    return generateRegistrationOptions({
      rpName: rp.name,
      rpID: rp.id,
      userName: user.email,
      // Stable per account; keyed, so nobody can work the account's id or address back out of it.
      userID: new Uint8Array(this.#secret.keyedHash("passkey-user", String(user.id))),
      challenge,
      timeout: 60_000,
      attestationType: "none",
      excludeCredentials: existing.map((row) => ({
        id: row.credential_id,
        transports: transportsOf(row.transports),
      })),
      // Discoverable where the authenticator can (for the sign-in with a passkey alone).
      authenticatorSelection: { residentKey: "preferred", userVerification: "preferred" },
    });
  }

  /**
   * Stores the passkey of a registration answer. `passkey.added`; when it is the user's first
   * second factor, two-factor authentication is now on: `two_factor.enabled`, and the user's other
   * web sessions end (they were opened without it), as when TOTP is switched on.
   */
  async register(
    user: User,
    response: unknown,
    rawName: unknown,
    origin: SecurityEventOrigin,
    options: { keepSessionIdHash?: string } = {},
  ): Promise<Passkey> {
    const name = this.checkName(rawName);
    const rp = await this.relyingParty();
    if (credentialIdOf(response) === null) throw passkeyNotVerified();
    let taken = false;
    let verified: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
    try {
      verified = await verifyRegistrationResponse({
        response: response as RegistrationResponseJSON,
        expectedChallenge: async (challenge) => {
          taken = await this.#take(challenge, "register", user.id);
          return taken;
        },
        expectedOrigin: rp.origin,
        expectedRPID: rp.id,
        requireUserVerification: false,
      });
    } catch {
      if (!taken) throw passkeyChallengeVoid();
      throw passkeyNotVerified();
    }
    if (!verified.verified) throw passkeyNotVerified();
    const { credential } = verified.registrationInfo;
    const now = nowSeconds();
    return this.#db.transaction().execute(async (trx) => {
      const clash = await trx
        .selectFrom("passkeys")
        .select("id")
        .where("credential_id", "=", credential.id)
        .executeTakeFirst();
      if (clash) throw passkeyTaken();
      const before = await trx
        .selectFrom("users")
        .select(["totp_confirmed", "totp_secret"])
        .where("id", "=", user.id)
        .where(isActiveUser)
        .executeTakeFirst();
      if (!before) throw passkeyNotVerified();
      const { count } = await trx
        .selectFrom("passkeys")
        .select((eb) => eb.fn.countAll<number>().as("count"))
        .where("user_id", "=", user.id)
        .executeTakeFirstOrThrow();
      if (Number(count) >= maxPasskeysPerUser) throw passkeyLimitReached();
      const hadOne = await twoFactorIsOn(trx, {
        ...user,
        totpConfirmed: flag(before.totp_confirmed),
        totpSecret: before.totp_secret,
      });
      const id = await insertReturningId(trx, "passkeys", {
        user_id: user.id,
        credential_id: credential.id,
        public_key: Buffer.from(credential.publicKey).toString("base64url"),
        counter: credential.counter,
        transports: JSON.stringify((credential.transports ?? []).filter((t) => transportNames.has(t))),
        name,
        created_at: now,
      });
      await this.#events.record(trx, user, origin, { type: "passkey.added", detail: { id } });
      if (!hadOne) {
        await endWebSessions(
          trx,
          this.#events,
          { user, origin, because: "two_factor_enabled" },
          options.keepSessionIdHash,
        );
        await this.#events.record(trx, user, origin, { type: "two_factor.enabled" });
      }
      return { id, name, createdAt: now, lastUsedAt: null };
    });
  }

  async rename(user: User, id: number, rawName: unknown): Promise<void> {
    const name = this.checkName(rawName);
    const updated = await this.#db
      .updateTable("passkeys")
      .set({ name })
      .where("id", "=", id)
      .where("user_id", "=", user.id)
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) !== 1) throw passkeyNotFound();
  }

  /**
   * Removes one of the user's own passkeys (by its id and the owner: another user's id is not
   * found). Removing the last second factor turns two-factor authentication off, as switching TOTP
   * off does: `two_factor.disabled`, and signing in with a passkey alone goes off with it.
   */
  /**
   * Removes one of the owner's passkeys; the password is asked again (a proof), as for switching TOTP
   * off: a session left open must not take the second factor away.
   */
  async remove(proof: ConfirmedPassword, id: number, origin: SecurityEventOrigin): Promise<void> {
    const { user } = proof;
    if (!Number.isSafeInteger(id) || id <= 0) throw passkeyNotFound();
    await this.#db.transaction().execute(async (trx) => {
      const deleted = await trx
        .deleteFrom("passkeys")
        .where("id", "=", id)
        .where("user_id", "=", user.id)
        .executeTakeFirst();
      if (Number(deleted.numDeletedRows) !== 1) throw passkeyNotFound();
      await this.#events.record(trx, user, origin, { type: "passkey.removed", detail: { id } });
      const left = await trx
        .selectFrom("passkeys")
        .select("id")
        .where("user_id", "=", user.id)
        .executeTakeFirst();
      if (left) return;
      await trx
        .updateTable("users")
        .set({ passkey_sign_in: toFlag(false) })
        .where("id", "=", user.id)
        .execute();
      const current = await trx
        .selectFrom("users")
        .select(["totp_confirmed", "totp_secret"])
        .where("id", "=", user.id)
        .executeTakeFirst();
      if (current && !(flag(current.totp_confirmed) && current.totp_secret !== null))
        await this.#events.record(trx, user, origin, {
          type: "two_factor.disabled",
          detail: { how: "switched_off" },
        });
    });
  }

  /** "Sign in with a passkey alone": on only while the user has a passkey. */
  async setSignIn(user: User, on: boolean): Promise<void> {
    const query = this.#db
      .updateTable("users")
      .set({ passkey_sign_in: toFlag(on) })
      .where("id", "=", user.id)
      .where(isActiveUser);
    const updated = await (on
      ? query.where((eb) =>
          eb.exists(
            eb.selectFrom("passkeys").select("passkeys.id").whereRef("passkeys.user_id", "=", "users.id"),
          ),
        )
      : query
    ).executeTakeFirst();
    if (on && Number(updated.numUpdatedRows) !== 1) throw passkeyNone();
  }

  /**
   * The options for `navigator.credentials.get`: for a known user (second factor) its passkeys;
   * for a sign-in with a passkey alone none (the authenticator offers its discoverable ones), and
   * user verification is required then.
   */
  async authenticationOptions(
    user: User | null,
    origin: CheckOrigin = {},
  ): Promise<PublicKeyCredentialRequestOptionsJSON> {
    const rp = await this.relyingParty();
    if (!user) this.#countSignInChallenge(origin);
    const allow = user
      ? await this.#db
          .selectFrom("passkeys")
          .select(["credential_id", "transports"])
          .where("user_id", "=", user.id)
          .execute()
      : [];
    const challenge = await this.#issue(user ? "second_factor" : "sign_in", user?.id ?? null);
    return generateAuthenticationOptions({
      rpID: rp.id,
      challenge,
      timeout: 60_000,
      userVerification: user ? "preferred" : "required",
      allowCredentials: allow.map((row) => ({
        id: row.credential_id,
        transports: transportsOf(row.transports),
      })),
    });
  }

  /**
   * A passkey as the second factor of `user` (signed in with the password a moment ago). Runs under
   * the sign-in guard (throws `sign_in.throttled` unchecked); a wrong answer is
   * `second_factor.failed` (method passkey).
   */
  async verifySecondFactor(user: User, response: unknown, origin: CheckOrigin): Promise<PasskeyCheck> {
    const guarded = await this.#guard.attempt(attemptFrom("second_factor", user.email, origin), async () => {
      const checked = await this.#check(response, "second_factor", user.id, origin);
      if (!checked) return { right: false, value: "wrong" as const };
      const current = checked.user;
      if (current.deleted || effectiveRoles(current.roles).has("ROLE_SPAM"))
        return { right: false, value: "wrong" as const };
      return {
        right: true,
        value: current.passwordChangeRequired ? ("password_change_required" as const) : ("ok" as const),
      };
    });
    if (guarded.outcome === "throttled") throw signInThrottled({ retryAfter: guarded.retryAfter });
    if (guarded.outcome === "wrong")
      await this.#record(user, origin, { type: "second_factor.failed", detail: { method: "passkey" } });
    return guarded.value;
  }

  /**
   * A sign-in with a passkey alone (a discoverable credential): the user is the passkey's owner,
   * who must be active, not spam, and have turned it on. Runs under the sign-in guard (counted for
   * the owner's address once the passkey is known). A refused known user is `sign_in.failed`.
   */
  async signIn(response: unknown, origin: CheckOrigin): Promise<PasskeySignInResult> {
    // Counted for the client only: an answer's signature cannot be guessed, and charging the
    // passkey's owner (whose credential ids /2fa hands out) would let anyone exhaust the owner's
    // daily ceiling with junk answers.
    const guarded = await this.#guard.attempt<PasskeySignInResult>(
      attemptFrom("second_factor", null, origin),
      async () => {
        const checked = await this.#check(response, "sign_in", null, origin);
        if (!checked || checked.user.deleted) return { right: false, value: { kind: "wrong" } };
        const { user, signInAllowed } = checked;
        const result: PasskeySignInResult = effectiveRoles(user.roles).has("ROLE_SPAM")
          ? { kind: "spam", user }
          : !signInAllowed
            ? { kind: "sign_in_off", user }
            : user.passwordChangeRequired
              ? { kind: "password_change_required", user }
              : { kind: "ok", user };
        return { right: true, value: result };
      },
    );
    if (guarded.outcome === "throttled") return { kind: "throttled", retryAfter: guarded.retryAfter };
    const result = guarded.value;
    if (result.kind === "spam" || result.kind === "sign_in_off")
      await this.#record(result.user, origin, {
        type: "sign_in.failed",
        detail: { reason: result.kind === "spam" ? "account_disabled" : "passkey_sign_in_off" },
      });
    return result;
  }

  /**
   * Verifies an assertion: its challenge (used up here, whatever follows), the passkey (the
   * user's own when `userId` is given), origin, RP id and signature, then the counter rule. Null for
   * anything wrong; the passkey's owner as stored now when right.
   */
  async #check(
    response: unknown,
    purpose: PasskeyChallengePurpose,
    userId: number | null,
    origin: CheckOrigin,
  ): Promise<{ user: User; signInAllowed: boolean } | null> {
    const credentialId = credentialIdOf(response);
    if (credentialId === null) return null;
    const rp = await this.relyingParty();
    const row = await this.#db
      .selectFrom("passkeys")
      .innerJoin("users", "users.id", "passkeys.user_id")
      .selectAll("users")
      .select([
        "passkeys.id as passkey_id",
        "passkeys.public_key as passkey_public_key",
        "passkeys.counter as passkey_counter",
        "passkeys.transports as passkey_transports",
      ])
      .where("passkeys.credential_id", "=", credentialId)
      .executeTakeFirst();
    let taken = false;
    const take = async (challenge: string) => {
      taken = await this.#take(challenge, purpose, userId);
      return taken;
    };
    if (!row || (userId !== null && row.id !== userId)) {
      // Still used up: an answer with someone else's passkey leaves no challenge to try again.
      const challenge = challengeOf(response);
      if (challenge) await take(challenge);
      return null;
    }
    const stored = Number(row.passkey_counter);
    let newCounter: number;
    try {
      const verified = await verifyAuthenticationResponse({
        response: response as AuthenticationResponseJSON,
        expectedChallenge: take,
        expectedOrigin: rp.origin,
        expectedRPID: rp.id,
        // The counter rule is ours (below), so that a copy is told from other failures.
        credential: {
          id: credentialId,
          publicKey: new Uint8Array(Buffer.from(row.passkey_public_key, "base64url")),
          counter: 0,
          transports: transportsOf(row.passkey_transports),
        },
        requireUserVerification: purpose === "sign_in",
      });
      if (!verified.verified || !taken) return null;
      newCounter = verified.authenticationInfo.newCounter;
    } catch {
      return null;
    }
    const user = toUser(row);
    const id = row.passkey_id;
    const now = nowSeconds();
    // The counter rule. A counter that moves is written only forward (of two racing answers the
    // lower one is refused); an authenticator that keeps none (0, as synced passkeys) just signs.
    const cloned = stored > 0 && newCounter <= stored;
    const updated = cloned
      ? 0
      : Number(
          (
            await this.#db
              .updateTable("passkeys")
              .set({ counter: newCounter, last_used_at: now })
              .where("id", "=", id)
              .where((eb) => (newCounter > 0 ? eb("counter", "<", newCounter) : eb("counter", "=", 0)))
              .executeTakeFirst()
          ).numUpdatedRows,
        );
    // A counter above 0 that did not rise (no row updated) is a copy; a counter of 0 is never judged.
    if (cloned || (updated === 0 && newCounter > 0)) {
      await this.#record(user, origin, { type: "passkey.cloned", detail: { id } });
      return null;
    }
    return { user, signInAllowed: flag(row.passkey_sign_in) };
  }

  /**
   * The sign-in's challenges are handed to anyone: one network gets a few per 5 minutes (on this
   * instance), so no one fills the table's bound alone and locks everyone out of passkey sign-in.
   */
  #countSignInChallenge(origin: CheckOrigin): void {
    const address = origin.client?.address;
    const network = (address ? clientGroup(address, "network") : null) ?? `door:${origin.door ?? "web"}`;
    const now = Date.now();
    const window = this.#handedOut.get(network);
    if (!window || window.since < now - 300_000) {
      this.#handedOut.delete(network);
      this.#handedOut.set(network, { since: now, count: 1 });
      if (this.#handedOut.size > 10_000)
        for (const old of [...this.#handedOut.keys()].slice(0, 1_000)) this.#handedOut.delete(old);
      return;
    }
    if (++window.count > signInChallengesPerNetwork) throw passkeyChallengesBusy();
  }

  /** A new challenge: its bytes for the options (which encode them), its base64url (as signed) stored. */
  async #issue(purpose: PasskeyChallengePurpose, userId: number | null): Promise<Uint8Array<ArrayBuffer>> {
    const now = nowSeconds();
    const bytes = new Uint8Array(randomBytes(32));
    const challenge = Buffer.from(bytes).toString("base64url");
    // Unanswered challenges go with the next one handed out: the table stays small. A user's
    // earlier open challenge of the same purpose goes too: one ceremony at a time per account.
    await this.#db.deleteFrom("passkey_challenges").where("expires_at", "<", now).execute();
    if (userId !== null)
      await this.#db
        .deleteFrom("passkey_challenges")
        .where("user_id", "=", userId)
        .where("purpose", "=", purpose)
        .execute();
    // The sign-in's challenges are handed to anyone: a flood of requests may not fill the table.
    if (purpose === "sign_in") {
      const { count } = await this.#db
        .selectFrom("passkey_challenges")
        .select((eb) => eb.fn.countAll<number>().as("count"))
        .where("purpose", "=", "sign_in")
        .executeTakeFirstOrThrow();
      if (Number(count) >= maxOpenSignInChallenges) throw passkeyChallengesBusy();
    }
    await this.#db
      .insertInto("passkey_challenges")
      .values({ challenge, purpose, user_id: userId, expires_at: now + challengeSeconds })
      .execute();
    return bytes;
  }

  /** Uses up a challenge: true exactly once, for an unexpired one of this purpose and user. */
  async #take(challenge: string, purpose: PasskeyChallengePurpose, userId: number | null): Promise<boolean> {
    if (!b64url.test(challenge) || challenge.length > 64) return false;
    const deleted = await this.#db
      .deleteFrom("passkey_challenges")
      .where("challenge", "=", challenge)
      .where("purpose", "=", purpose)
      .where((eb) => (userId === null ? eb("user_id", "is", null) : eb("user_id", "=", userId)))
      .where("expires_at", ">=", nowSeconds())
      .executeTakeFirst();
    return Number(deleted.numDeletedRows) === 1;
  }

  async #record(subject: SecurityEventSubject, origin: CheckOrigin, event: SecurityEvent): Promise<void> {
    const where = ownerOrigin(origin.door ?? "console", origin.client?.address ?? null);
    await this.#db.transaction().execute((trx) => this.#events.record(trx, subject, where, event));
  }
}

/** The challenge a browser signed, read from the answer's client data (null when there is none). */
function challengeOf(response: unknown): string | null {
  try {
    const data = (response as { response?: { clientDataJSON?: unknown } }).response?.clientDataJSON;
    if (typeof data !== "string" || !b64url.test(data)) return null;
    const parsed: unknown = JSON.parse(Buffer.from(data, "base64url").toString("utf8"));
    const challenge = (parsed as { challenge?: unknown }).challenge;
    return typeof challenge === "string" ? challenge : null;
  } catch {
    return null;
  }
}
