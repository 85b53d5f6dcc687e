import type { CryptoPool } from "../credentials/crypto-pool.ts";
import { generateMailCryptKeyPair, newRecoveryToken, sealSecretBox } from "../credentials/mailcrypt.ts";

/** MailCrypt levels of the `mail_crypt` setting (reference section 4.3). */
export const MailCryptLevel = { off: 0, optional: 1, newUsers: 2, allUsers: 3 } as const;

export interface MailCryptMaterial {
  publicKey: string;
  /** The new private key itself (never stored unsealed): a sign-in that made it hands it on. */
  privateKey: string;
  secretBox: string;
  recoveryToken: string | null;
  recoverySecretBox: string | null;
}

/** When the MailCrypt rule is asked: a new account, new credentials for one, or a password sign-in. */
export type MailCryptEvent = "create" | "reset" | "restore" | "sign-in";

/**
 * What to do with a user's MailCrypt keys:
 * - `new-keys`: a new key pair sealed under the password and a new recovery token; MailCrypt on.
 * - `new-keys-without-recovery`: as `new-keys` but no recovery token (the level-3 sign-in).
 * - `no-keys`: no keys; any old key, box and recovery box is wiped and MailCrypt is off, so no box
 *   sealed under an old password is left behind (the reference's bug 8).
 * - `keep`: nothing changes.
 */
export type MailCryptAction = "new-keys" | "new-keys-without-recovery" | "no-keys" | "keep";

export interface MailCryptSubject {
  /** create: the caller's explicit choice (admin API `mailCrypt`, console `--mail-crypt`). */
  requested?: boolean;
  /** reset, sign-in: the user's current `mail_crypt` flag. */
  userFlag?: boolean;
  /** sign-in: whether the user has a public key. */
  hasKeys?: boolean;
}

/**
 * The one MailCrypt rule. New credentials (create, reset, restore) get keys when MailCrypt is chosen
 * for the account, else when the level enforces it for new credentials (2 and 3):
 * - create: the caller's choice, else the level;
 * - reset: the user's own choice is kept (a user with MailCrypt on keeps it at every level), else the
 *   level, exactly as a create without a choice;
 * - restore: as a create without a choice (the deletion wiped keys and flag, so there is no choice
 *   left to keep);
 * - sign-in: at level 3 a user without keys gets them (no recovery token; none can be shown), else
 *   nothing changes.
 */
export function mailCryptFor(
  level: number,
  event: MailCryptEvent,
  subject: MailCryptSubject = {},
): MailCryptAction {
  const enforced = level >= MailCryptLevel.newUsers;
  switch (event) {
    case "create":
      return (subject.requested ?? enforced) ? "new-keys" : "no-keys";
    case "reset":
      return subject.userFlag || enforced ? "new-keys" : "no-keys";
    case "restore":
      return enforced ? "new-keys" : "no-keys";
    case "sign-in":
      return level === MailCryptLevel.allUsers && !subject.hasKeys ? "new-keys-without-recovery" : "keep";
  }
}

/** The key material an action calls for, sealed under the password (null: no new keys). */
export async function mailCryptMaterial(
  action: "new-keys" | "new-keys-without-recovery",
  password: string,
  pool: CryptoPool,
): Promise<MailCryptMaterial>;
export async function mailCryptMaterial(
  action: MailCryptAction,
  password: string,
  pool: CryptoPool,
): Promise<MailCryptMaterial | null>;
export async function mailCryptMaterial(
  action: MailCryptAction,
  password: string,
  pool: CryptoPool,
): Promise<MailCryptMaterial | null> {
  if (action !== "new-keys" && action !== "new-keys-without-recovery") return null;
  const pair = await generateMailCryptKeyPair();
  const recoveryToken = action === "new-keys" ? newRecoveryToken() : null;
  const [secretBox, recoverySecretBox] = await Promise.all([
    sealSecretBox(pair.privateKey, password, pool),
    recoveryToken === null ? Promise.resolve(null) : sealSecretBox(pair.privateKey, recoveryToken, pool),
  ]);
  return {
    publicKey: pair.publicKey,
    privateKey: pair.privateKey,
    secretBox,
    recoveryToken,
    recoverySecretBox,
  };
}

/**
 * Whether lookups report MailCrypt for a user: the level allows it (1 and up), the user has it on
 * and has a key. userdb, passdb and the console all ask this.
 */
export const reportsMailCrypt = (level: number, userFlag: boolean, publicKey: string | null): boolean =>
  level >= MailCryptLevel.optional && userFlag && !!publicKey;
