import { createHash } from "node:crypto";
import { normalizeAppPassword } from "../credentials/app-passwords.ts";
import { MAX_PASSWORD_BYTES } from "../credentials/passwords.ts";
import { refusal } from "../errors.ts";

/** The rule's bounds: at least 12 characters, at most what the hasher takes. */
export const minPasswordLength = 12;
export const maxPasswordBytes = MAX_PASSWORD_BYTES;

export const passwordBlank = refusal("password.blank", "invalid", () => "password: must not be blank");
export const passwordTooShort = refusal<{ min: number }>(
  "password.too_short",
  "invalid",
  ({ min }) => `password: must be at least ${min} characters`,
);
export const passwordTooLong = refusal<{ max: number }>(
  "password.too_long",
  "invalid",
  ({ max }) => `password: must be at most ${max} bytes`,
);
export const passwordLeaked = refusal(
  "password.leaked",
  "invalid",
  () => "password: the password has been leaked in a data breach; choose another one",
);
/** A new password equal to the current one (a change must change it). */
export const passwordIdentical = refusal(
  "password.identical",
  "invalid",
  () => "password: the new password is identical with the old one",
);

/**
 * A new account password of an app password's form (16 of a-z and 2-9, dashes optional): IMAP and
 * SMTP take every secret of that form as an app password only, so it would not work there.
 */
export const passwordLikeAppPassword = refusal(
  "password.like_app_password",
  "invalid",
  () => "password: this has the form of an app password; choose another one",
);

/** The shape of a new password alone (no lookup): blank, too short, too long, an app password's form. */
export function checkPasswordShape(password: unknown): string {
  if (typeof password !== "string" || password.length === 0) throw passwordBlank();
  if ([...password].length < minPasswordLength) throw passwordTooShort({ min: minPasswordLength });
  if (Buffer.byteLength(password, "utf8") > maxPasswordBytes)
    throw passwordTooLong({ max: maxPasswordBytes });
  if (normalizeAppPassword(password) !== null) throw passwordLikeAppPassword();
  return password;
}

/**
 * The one rule for a password a person chooses, applied by the services at every door that sets
 * one (web and admin pages, admin API, console, webmail, recovery, registration, CSV import): the
 * shape above and, when PWNED_PASSWORDS_URL is set, not in the k-anonymity range API of leaked
 * passwords (Have I Been Pwned's protocol: only the first five hex digits of the SHA-1 leave the
 * host). The range API being down does not block anyone.
 */
export class PasswordPolicy {
  readonly #rangeUrl: string | null;
  readonly #timeoutMs: number;
  readonly #onLookupError: (error: unknown) => void;

  constructor(
    rangeUrl: string | null,
    options: { timeoutMs?: number; onLookupError?: (e: unknown) => void } = {},
  ) {
    this.#rangeUrl = rangeUrl ? rangeUrl.replace(/\/+$/, "") : null;
    this.#timeoutMs = options.timeoutMs ?? 2000;
    this.#onLookupError = options.onLookupError ?? (() => {});
  }

  /** The password if it passes; else throws `password.blank`, `.too_short`, `.too_long` or `.leaked`. */
  async require(password: unknown): Promise<string> {
    const shaped = checkPasswordShape(password);
    if (this.#rangeUrl && (await this.#isLeaked(shaped))) throw passwordLeaked();
    return shaped;
  }

  async #isLeaked(password: string): Promise<boolean> {
    const sha1 = createHash("sha1").update(password, "utf8").digest("hex").toUpperCase();
    const prefix = sha1.slice(0, 5);
    const suffix = sha1.slice(5);
    try {
      const response = await fetch(`${this.#rangeUrl}/${prefix}`, {
        headers: { "add-padding": "true" },
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      if (!response.ok) throw new Error(`range API answered ${response.status}`);
      const body = await response.text();
      for (const line of body.split("\n")) {
        const [hashSuffix, count] = line.trim().split(":");
        if (hashSuffix?.toUpperCase() === suffix && Number(count) > 0) return true;
      }
      return false;
    } catch (error) {
      this.#onLookupError(error);
      return false;
    }
  }
}
