import { createHash } from "node:crypto";
import type { CryptoPool } from "./crypto-pool.ts";
import { openSecretBox, SecretBoxError } from "./mailcrypt.ts";
import {
  acceptablePassword,
  hashPassword,
  isCurrentPasswordHash,
  verifyDummy,
  verifyPassword,
} from "./passwords.ts";

/** What a password is checked against: the account's stored hash, secret box and their binding. */
export interface StoredPassword {
  passwordHash: string;
  /** The MailCrypt private key sealed under the password (null: none). */
  mailCryptSecretBox: string | null;
  /** `secretBoxBinding(passwordHash, box)` once the box was seen to open with the password. */
  secretBoxBinding: string | null;
}

export type PasswordVerdict =
  | { valid: false }
  | {
      valid: true;
      /** The MailCrypt private key, when the check opened the box (null: no box, or it did not open). */
      privateKey: string | null;
      /** The account's hash and binding in the current form, when they are not yet (write them). */
      upgrade: { passwordHash: string; secretBoxBinding: string | null } | null;
    };

/**
 * The binding of a secret box to a password hash: the box checks the password (alone, one
 * derivation) only while both are what they were when the box was seen to open with the password
 * the hash verified. A write that changes either without a new binding (an import of userli's
 * reset, which keeps a box sealed under the old password; any future path that forgets) leaves the
 * account on the full check, never lets an old password in through the box.
 */
export const secretBoxBinding = (passwordHash: string, secretBox: string): string =>
  createHash("sha256").update(passwordHash).update("\0").update(secretBox).digest("base64url");

/**
 * Whether the box of these stored credentials checks the password on its own: bound to a hash in the
 * current form (a box bound to an older hash is checked in full, so the older hash is replaced).
 */
export const boxChecksPassword = (stored: StoredPassword): boolean =>
  stored.mailCryptSecretBox !== null &&
  isCurrentPasswordHash(stored.passwordHash) &&
  stored.secretBoxBinding !== null &&
  stored.secretBoxBinding === secretBoxBinding(stored.passwordHash, stored.mailCryptSecretBox);

async function opened(box: string, password: string, pool: CryptoPool): Promise<string | null> {
  try {
    return await openSecretBox(box, password, pool);
  } catch (error) {
    if (error instanceof SecretBoxError) return null;
    throw error;
  }
}

/**
 * The one check of an account password, with the same number of Argon2 derivations for a right and
 * a wrong password (docs/design.md, "One derivation per sign-in"):
 * - an account in the current form costs one: its bound secret box is opened (the box's
 *   authenticator proves the password and yields the MailCrypt key), or without a box its hash
 *   (Argon2id at the box's cost) is verified;
 * - an account not yet in the current form (a legacy or older hash, a box not bound yet) has its hash
 *   verified, its box opened beside it, and a new hash made when the hash is not current, or for a
 *   wrong password the decoy's verification in its place; a right password brings it to the current
 *   form (`upgrade`, for the caller to write);
 * - `stored` null (no such account): the decoy's one verification.
 * Inputs no hash is made of (empty, over-long) cost nothing, whoever they are for.
 */
export async function checkPassword(
  password: string,
  stored: StoredPassword | null,
  pool: CryptoPool,
): Promise<PasswordVerdict> {
  if (typeof password !== "string" || !acceptablePassword(password)) return { valid: false };
  if (!stored) return verifyDummy(password, pool).then(() => ({ valid: false }));
  const { passwordHash, mailCryptSecretBox: secretBox } = stored;
  if (secretBox !== null && boxChecksPassword(stored)) {
    const privateKey = await opened(secretBox, password, pool);
    return privateKey === null ? { valid: false } : { valid: true, privateKey, upgrade: null };
  }
  const check = await verifyPassword(password, passwordHash, pool);
  const privateKey = secretBox === null ? null : await opened(secretBox, password, pool);
  const rehashDue = !isCurrentPasswordHash(passwordHash);
  if (!check.valid) {
    if (rehashDue) await verifyDummy(password, pool);
    return { valid: false };
  }
  const hash = rehashDue ? await hashPassword(password, pool) : passwordHash;
  // A box that does not open with the right password (userli's bug 8) stays unbound and unused.
  const binding = secretBox !== null && privateKey !== null ? secretBoxBinding(hash, secretBox) : null;
  const upgrade = rehashDue || binding !== null ? { passwordHash: hash, secretBoxBinding: binding } : null;
  return { valid: true, privateKey, upgrade };
}
