import { createHash } from "node:crypto";
import { maxPasswordBytes, minPasswordLength } from "./users.ts";

export type PasswordProblem = "too_short" | "too_long" | "compromised";

/**
 * The rule for a password a person chooses (web password change, registration, recovery, the
 * webmail's password plugin): at least 12 characters, and, when PWNED_PASSWORDS_URL is set, not
 * in the k-anonymity range API of leaked passwords (Have I Been Pwned's protocol: only the first
 * five hex digits of the SHA-1 leave the host). The range API being down does not block anyone.
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

  async check(password: string): Promise<PasswordProblem | null> {
    if ([...password].length < minPasswordLength) return "too_short";
    if (Buffer.byteLength(password, "utf8") > maxPasswordBytes) return "too_long";
    if (this.#rangeUrl && (await this.#isCompromised(password))) return "compromised";
    return null;
  }

  async #isCompromised(password: string): Promise<boolean> {
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
