import type { Kysely, Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { refusal, ServiceError } from "../errors.ts";
import type { Locale } from "../i18n/catalogue.ts";
import { checkAddress } from "./address-syntax.ts";
import { type InviteCodeService, inviteCodeUnusable } from "./invite-codes.ts";
import { checkPasswordShape, passwordLeaked } from "./password-policy.ts";
import type { ReservedNameService } from "./reserved-names.ts";
import type { CheckOrigin } from "./sign-in-guard.ts";
import { addressTaken, type User, type UserService } from "./users.ts";

/** Local parts people register (reference section 5.5): 3 to 32 of [a-z0-9._-], after lower-casing. */
export const minLocalPartLength = 3;
export const maxLocalPartLength = 32;
const localPartCharacters = /^[a-z0-9._-]+$/;

export type LocalPartProblem = "too_short" | "too_long" | "characters" | "syntax" | "taken";

/**
 * One reason a registration is refused, by the form field it belongs to. A code that cannot be
 * used is no problem of a field: the registration throws InviteCodeService's one answer for it.
 */
export type RegistrationProblem =
  | { field: "localPart"; reason: LocalPartProblem }
  /** The password policy's refusal (accounts/password-policy.ts). */
  | { field: "password"; reason: ServiceError };

/** A refused registration, with every problem found: nothing was written. */
export const registrationRefused = refusal<{ problems: RegistrationProblem[] }>(
  "registration.refused",
  "invalid",
  ({ problems }) =>
    `registration refused: ${problems.map((p) => `${p.field} ${typeof p.reason === "string" ? p.reason : p.reason.code}`).join(", ")}`,
);
const refused = (...problems: RegistrationProblem[]) => registrationRefused({ problems });

/** Where the welcome e-mail goes: the e-mail outbox (mail/outbox.ts), written in the same transaction. */
export interface WelcomeMail {
  welcome(trx: Transaction<Database>, input: { email: string; locale: Locale }): Promise<unknown>;
}

export interface Registration {
  user: User;
  /** Shown once to the new user; null when MailCrypt does not apply to new accounts (levels 0 and 1). */
  recoveryToken: string | null;
}

export interface RegistrationInput {
  code: string;
  localPart: string;
  password: string;
  /** The language of the welcome e-mail. */
  locale?: Locale;
  /** Where the code comes from: its check runs under the sign-in guard (per client). */
  origin?: CheckOrigin;
}

/** The shape of a wanted local part alone (no database): the reference's rule and our address syntax. */
export function localPartProblem(localPart: string, domain: string): LocalPartProblem | null {
  if ([...localPart].length < minLocalPartLength) return "too_short";
  if ([...localPart].length > maxLocalPartLength) return "too_long";
  if (!localPartCharacters.test(localPart)) return "characters";
  // Dots only between other characters, no leading "-": what every new address obeys.
  if (!checkAddress(`${localPart}@${domain}`, "new").ok) return "syntax";
  return null;
}

/**
 * Registration with an invite code (reference section 5.5): the address is the wanted local part
 * (lower-cased) in the code's domain; it must be free (no user and no alias ever had it, deleted
 * ones included, and it is not a reserved name); the password follows the policy. The account is
 * made by UserService.create (keys, recovery token and `user.created` as for every account) and
 * the code is redeemed in the same transaction, conditionally, so a code registers one account
 * even when two registrations race for it. The welcome e-mail is queued in that transaction too.
 */
export class RegistrationService {
  readonly #db: Kysely<Database>;
  readonly #users: UserService;
  readonly #inviteCodes: InviteCodeService;
  readonly #reservedNames: ReservedNameService;
  readonly #welcomeMail: WelcomeMail | null;

  constructor(
    db: Kysely<Database>,
    users: UserService,
    inviteCodes: InviteCodeService,
    reservedNames: ReservedNameService,
    welcomeMail: WelcomeMail | null = null,
  ) {
    this.#db = db;
    this.#users = users;
    this.#inviteCodes = inviteCodes;
    this.#reservedNames = reservedNames;
    this.#welcomeMail = welcomeMail;
  }

  /** Whether the local part is free in the domain: no user or alias (deleted included), not reserved. */
  async isAvailable(localPart: string, domain: string, db: Kysely<Database> = this.#db): Promise<boolean> {
    const email = `${localPart}@${domain}`;
    const [user, alias, reserved] = await Promise.all([
      db.selectFrom("users").select("id").where("email", "=", email).executeTakeFirst(),
      db.selectFrom("aliases").select("id").where("source", "=", email).executeTakeFirst(),
      this.#reservedNames.isReserved(localPart, db),
    ]);
    return !user && !alias && !reserved;
  }

  /**
   * Registers an account, or throws `invite_code.unusable` for a code that cannot be used, or
   * `registration.refused` with every problem of the other fields (nothing written either way).
   * Everything is checked again here, whatever the page checked before.
   */
  async register(input: RegistrationInput): Promise<Registration> {
    const check = await this.#inviteCodes.check(input.code, input.origin);
    const domain = check.code.domain;
    const localPart = typeof input.localPart === "string" ? input.localPart.trim().toLowerCase() : "";
    const password = typeof input.password === "string" ? input.password : "";

    const problems: RegistrationProblem[] = [];
    const shape = localPartProblem(localPart, domain);
    if (shape) problems.push({ field: "localPart", reason: shape });
    else if (!(await this.isAvailable(localPart, domain)))
      problems.push({ field: "localPart", reason: "taken" });
    try {
      // The shape here, beside the other fields; the leaked-password lookup once, in users.create.
      checkPasswordShape(password);
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      problems.push({ field: "password", reason: error });
    }
    if (problems.length > 0) throw refused(...problems);

    const email = `${localPart}@${domain}`;
    try {
      const created = await this.#users.create(
        { email, password },
        {
          within: async (trx, user) => {
            // Checked again in the transaction: a name reserved meanwhile is refused too.
            if (await this.#reservedNames.isReserved(localPart, trx))
              throw refused({ field: "localPart", reason: "taken" });
            if (!(await this.#inviteCodes.redeem(trx, check.code.id, user.id))) throw inviteCodeUnusable();
            await this.#welcomeMail?.welcome(trx, { email: user.email, locale: input.locale ?? "en" });
          },
        },
      );
      return { user: created.user, recoveryToken: created.recoveryToken };
    } catch (error) {
      if (error instanceof ServiceError && (error.is(registrationRefused) || error.is(inviteCodeUnusable)))
        throw error;
      if (error instanceof ServiceError && error.is(passwordLeaked))
        throw refused({ field: "password", reason: error });
      // Another registration took the address first: the service's own check (a conflict) or,
      // when both passed it at the same moment, the unique index.
      if (error instanceof ServiceError && error.is(addressTaken))
        throw refused({ field: "localPart", reason: "taken" });
      if (!(error instanceof ServiceError) && (await this.#users.findByEmail(email)))
        throw refused({ field: "localPart", reason: "taken" });
      throw error;
    }
  }
}
