import { generateTotpSecret, totpStepFor } from "../credentials/totp.ts";
import { refusal } from "../errors.ts";
import type { SecurityEventOrigin } from "./security-events.ts";
import type { SettingsService } from "./settings.ts";
import type { User, UserService } from "./users.ts";

export const totpCodeWrong = refusal(
  "totp.code_wrong",
  "invalid",
  () => "code: the verification code is not valid",
);

/** A secret offered to the user and not yet confirmed with a code (kept by the caller, e.g. a web session). */
export interface PendingTotp {
  secret: string;
  /** Unix seconds; an offer older than `pendingTotpSeconds` is void. */
  offeredAt: number;
}

export const pendingTotpSeconds = 30 * 60;

/**
 * Self-service two-factor enrolment (reference 2.6, 2.7). A new secret is only offered until the
 * user proves with a current code that the authenticator holds it; then the secret and six new
 * backup codes (stored hashed) are switched on together, and the confirming code counts as used.
 * Switching off clears the backup codes too (the reference keeps them).
 */
export class TwoFactorService {
  readonly #users: UserService;
  readonly #settings: SettingsService;

  constructor(users: UserService, settings: SettingsService) {
    this.#users = users;
    this.#settings = settings;
  }

  offer(now = Date.now()): PendingTotp {
    return { secret: generateTotpSecret(), offeredAt: Math.floor(now / 1000) };
  }

  isCurrent(pending: unknown, now = Date.now()): pending is PendingTotp {
    if (typeof pending !== "object" || pending === null) return false;
    const { secret, offeredAt } = pending as Partial<PendingTotp>;
    return (
      typeof secret === "string" &&
      /^[A-Z2-7]{16,128}$/.test(secret) &&
      typeof offeredAt === "number" &&
      offeredAt + pendingTotpSeconds > Math.floor(now / 1000)
    );
  }

  /** The `otpauth://` URI an authenticator app reads (from the QR code): label = address, issuer = project name. */
  async provisioningUri(email: string, secret: string): Promise<string> {
    const issuer = await this.#settings.get("project_name");
    return `otpauth://totp/${encodeURIComponent(email)}?secret=${secret}&issuer=${encodeURIComponent(issuer)}`;
  }

  /**
   * Switches TOTP on when `code` is valid for the offered secret; returns the backup codes, shown
   * once. The user's other web sessions end in the same transaction (they were opened without
   * the second factor). Throws `invalid("code: ...")` for a wrong code, nothing changed.
   */
  async confirm(
    user: User,
    pending: PendingTotp,
    code: string,
    origin: SecurityEventOrigin,
    options: { keepSessionIdHash?: string } = {},
  ): Promise<string[]> {
    const step = totpStepFor(pending.secret, code, Date.now(), null);
    if (step === null) throw totpCodeWrong();
    const { backupCodes } = await this.#users.enableTotp(user.email, { secret: pending.secret }, origin, {
      usedStep: step,
      ...(options.keepSessionIdHash ? { keepSessionIdHash: options.keepSessionIdHash } : {}),
    });
    return backupCodes;
  }

  async disable(user: User, origin: SecurityEventOrigin): Promise<void> {
    await this.#users.disableTotp(user.email, origin);
  }
}
