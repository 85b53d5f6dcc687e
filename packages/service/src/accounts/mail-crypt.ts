import type { CryptoPool } from "../credentials/crypto-pool.ts";
import { generateMailCryptKeyPair, newRecoveryToken, sealSecretBox } from "../credentials/mailcrypt.ts";

/** MailCrypt levels of the `mail_crypt` setting (reference section 4.3). */
export const MailCryptLevel = { off: 0, optional: 1, newUsers: 2, allUsers: 3 } as const;

export interface MailCryptMaterial {
  publicKey: string;
  secretBox: string;
  recoveryToken: string | null;
  recoverySecretBox: string | null;
}

/** A new key pair sealed under the password and, when asked, under a fresh recovery token. */
export async function createMailCryptMaterial(
  password: string,
  pool: CryptoPool,
  withRecoveryToken: boolean,
): Promise<MailCryptMaterial> {
  const pair = await generateMailCryptKeyPair();
  const recoveryToken = withRecoveryToken ? newRecoveryToken() : null;
  const [secretBox, recoverySecretBox] = await Promise.all([
    sealSecretBox(pair.privateKey, password, pool),
    recoveryToken === null ? Promise.resolve(null) : sealSecretBox(pair.privateKey, recoveryToken, pool),
  ]);
  return { publicKey: pair.publicKey, secretBox, recoveryToken, recoverySecretBox };
}

/** Whether lookups report MailCrypt for a user: the level allows it, the user has it on and has a key. */
export const reportsMailCrypt = (level: number, userFlag: boolean, publicKey: string | null): boolean =>
  level >= MailCryptLevel.optional && userFlag && !!publicKey;

/** Whether a new, reset or restored account gets (new) keys that are switched on. */
export const keysForNewAccount = (level: number, requested: boolean | undefined): boolean =>
  requested ?? level >= MailCryptLevel.newUsers;
