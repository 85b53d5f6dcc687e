import { timingSafeEqual } from "node:crypto";
import type { CryptoPool } from "./crypto-pool.ts";
import { countDerivation } from "./derivations.ts";
import { legacyCrypt } from "./legacy-crypt.ts";
import { sodium } from "./sodium.ts";

// The cost of the secret box's key (libsodium's INTERACTIVE limits), not Symfony's t=4: every
// sign-in runs one derivation of one cost, the hash's or the box's (docs/design.md, "One derivation").
const OPSLIMIT = 2;
const MEMLIMIT = 67108864;
const CURRENT_PREFIX = "$argon2id$v=19$m=65536,t=2,p=1$";
export const MAX_PASSWORD_BYTES = 4096;

/** Hash of a random password nobody knows, with the current parameters: the unknown-user decoy. */
const DUMMY_HASH =
  "$argon2id$v=19$m=65536,t=2,p=1$Z3wGPZIb9p6OiW2v3y9QLA$lieUGc1PM+OdI3C2Rj4Ntq7S9RC8pRgP67G+Y92rmZs";

export class PasswordPolicyError extends Error {
  override name = "PasswordPolicyError";
}

export interface PasswordCheck {
  valid: boolean;
  needsRehash: boolean;
}

const INVALID: PasswordCheck = { valid: false, needsRehash: false };

function acceptableLength(plain: unknown): plain is string {
  if (typeof plain !== "string" || plain.length === 0) return false;
  return Buffer.byteLength(plain, "utf8") <= MAX_PASSWORD_BYTES;
}

/** Argon2id PHC string (`$argon2id$v=19$m=65536,t=2,p=1$...`) via libsodium on the thread pool. */
export async function hashPassword(plain: string, pool: CryptoPool): Promise<string> {
  if (typeof plain !== "string" || plain.length === 0) throw new PasswordPolicyError("password is empty");
  if (Buffer.byteLength(plain, "utf8") > MAX_PASSWORD_BYTES) {
    throw new PasswordPolicyError(`password is longer than ${MAX_PASSWORD_BYTES} bytes`);
  }
  const out = Buffer.alloc(sodium.crypto_pwhash_STRBYTES);
  countDerivation();
  await pool.run(() => sodium.crypto_pwhash_str_async(out, Buffer.from(plain, "utf8"), OPSLIMIT, MEMLIMIT));
  const end = out.indexOf(0);
  return out.toString("ascii", 0, end === -1 ? out.length : end);
}

async function verifyArgon2(plain: string, hash: string, pool: CryptoPool): Promise<boolean> {
  // libsodium wants the string NUL-terminated in a buffer of exactly STRBYTES.
  const encoded = Buffer.from(hash, "utf8");
  if (encoded.length >= sodium.crypto_pwhash_STRBYTES) return false;
  const str = Buffer.alloc(sodium.crypto_pwhash_STRBYTES);
  encoded.copy(str);
  countDerivation();
  return pool.run(() => sodium.crypto_pwhash_str_verify_async(str, Buffer.from(plain, "utf8")));
}

async function verifyCrypt(plain: string, hash: string, pool: CryptoPool): Promise<boolean> {
  const computed = await pool.run(() => legacyCrypt(plain, hash));
  if (computed === null) return false;
  const a = Buffer.from(computed, "utf8");
  const b = Buffer.from(hash, "utf8");
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Checks a password against its stored hash alone: Argon2id/Argon2i PHC strings and the crypt formats
 * `$6$`, `$5$`, `$1$`, `$2y$`/`$2a$`/`$2b$`. Never throws for bad input: empty, over-long, unknown or
 * garbage ⇒ invalid. It does not even out the time of its answers (a crypt answers far sooner than
 * Argon2): `checkPassword` (password-check.ts) does, and every sign-in goes through it.
 * `needsRehash` is set for a valid password whose hash is not Argon2id with the current parameters.
 */
export async function verifyPassword(plain: string, hash: string, pool: CryptoPool): Promise<PasswordCheck> {
  if (!acceptableLength(plain) || typeof hash !== "string") return INVALID;
  let valid: boolean;
  if (hash.startsWith("$argon2id$") || hash.startsWith("$argon2i$"))
    valid = await verifyArgon2(plain, hash, pool);
  else if (/^\$(?:1|5|6|2[aby])\$/.test(hash)) valid = await verifyCrypt(plain, hash, pool);
  else return INVALID;
  if (!valid) return INVALID;
  return { valid: true, needsRehash: !hash.startsWith(CURRENT_PREFIX) };
}

/** Whether a password is one a hash could be made of (not empty, not over-long): else no work is done. */
export const acceptablePassword = acceptableLength;

// The stored forms verifyPassword reads, each in full (a truncated or mangled hash is none of them).
const hashSchemes: readonly [name: string, form: RegExp][] = [
  ["argon2id", /^\$argon2id\$v=19\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/],
  ["argon2i", /^\$argon2i\$v=19\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/],
  ["sha512-crypt", /^\$6\$(?:rounds=\d+\$)?[^$]{0,16}\$[./0-9A-Za-z]{86}$/],
  ["sha256-crypt", /^\$5\$(?:rounds=\d+\$)?[^$]{0,16}\$[./0-9A-Za-z]{43}$/],
  ["md5-crypt", /^\$1\$[^$]{0,8}\$[./0-9A-Za-z]{22}$/],
  ["bcrypt", /^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$/],
];

/**
 * The scheme of a stored password hash that verifyPassword can check (`argon2id`, `sha512-crypt`,
 * ...), or null for anything else: what an import asks before it takes a hash over as it is.
 */
export function passwordHashScheme(hash: unknown): string | null {
  if (typeof hash !== "string") return null;
  for (const [name, form] of hashSchemes) if (form.test(hash)) return name;
  return null;
}

/** Whether a stored hash is the current Argon2id with the current parameters (no upgrade due). */
export const isCurrentPasswordHash = (hash: string): boolean => hash.startsWith(CURRENT_PREFIX);

/**
 * The same Argon2id work as checking a real user's password, for a user that does not exist, so that
 * response times do not reveal which addresses exist. Inputs a real check rejects early are rejected
 * here just as early.
 */
export async function verifyDummy(plain: string, pool: CryptoPool): Promise<false> {
  if (acceptableLength(plain)) await verifyArgon2(plain, DUMMY_HASH, pool);
  return false;
}
