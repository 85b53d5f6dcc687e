import { createPrivateKey, createPublicKey, generateKeyPair, randomUUID } from "node:crypto";
import { promisify } from "node:util";
import type { CryptoPool } from "./crypto-pool.ts";
import { countDerivation } from "./derivations.ts";
import { sodium } from "./sodium.ts";

const generateKeyPairAsync = promisify(generateKeyPair);

// Secret box key derivation: crypto_pwhash with OPSLIMIT/MEMLIMIT_INTERACTIVE (userli's format),
// the same cost as the password hash's (passwords.ts).
const BOX_OPSLIMIT = 2;
const BOX_MEMLIMIT = 67108864;
const SALT_BYTES = 16;
const NONCE_BYTES = 24;
const MAC_BYTES = 16;
const KEY_BYTES = 32;

export class SecretBoxError extends Error {
  override name = "SecretBoxError";
}

export interface MailCryptKeyPair {
  /** base64 of the SPKI PEM. */
  publicKey: string;
  /** base64 of the unencrypted PKCS#8 PEM. */
  privateKey: string;
}

/** A secp521r1 key pair in the stored form: base64 of PEM text (what Dovecot gets as `inline:`). */
export async function generateMailCryptKeyPair(): Promise<MailCryptKeyPair> {
  const { publicKey, privateKey } = await generateKeyPairAsync("ec", {
    namedCurve: "secp521r1",
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
  return {
    publicKey: Buffer.from(publicKey, "utf8").toString("base64"),
    privateKey: Buffer.from(privateKey, "utf8").toString("base64"),
  };
}

async function deriveKey(secret: string, salt: Buffer, pool: CryptoPool): Promise<Buffer> {
  const key = Buffer.alloc(KEY_BYTES);
  countDerivation();
  await pool.run(() =>
    sodium.crypto_pwhash_async(
      key,
      Buffer.from(secret, "utf8"),
      salt,
      BOX_OPSLIMIT,
      BOX_MEMLIMIT,
      sodium.crypto_pwhash_ALG_ARGON2ID13,
    ),
  );
  return key;
}

/** base64(salt[16] ‖ nonce[24] ‖ mac[16] ‖ ciphertext), keyed by Argon2id(secret, salt). */
export async function sealSecretBox(plaintext: string, secret: string, pool: CryptoPool): Promise<string> {
  const salt = Buffer.alloc(SALT_BYTES);
  sodium.randombytes_buf(salt);
  return sealBox(plaintext, salt, await deriveKey(secret, salt, pool));
}

/**
 * The box format (userli's, shared by the app passwords' boxes): base64(salt ‖ nonce ‖ mac ‖
 * ciphertext) under `key`, which the caller derived from `salt`; the key is wiped after use.
 */
export function sealBox(plaintext: string, salt: Buffer, key: Buffer): string {
  const nonce = Buffer.alloc(NONCE_BYTES);
  sodium.randombytes_buf(nonce);
  const message = Buffer.from(plaintext, "utf8");
  const sealed = Buffer.alloc(MAC_BYTES + message.length);
  try {
    sodium.crypto_secretbox_easy(sealed, message, nonce, key);
  } finally {
    sodium.sodium_memzero(key);
  }
  return Buffer.concat([salt, nonce, sealed]).toString("base64");
}

/** A box's parts; throws SecretBoxError when it is not one. */
export function boxParts(box: string): { salt: Buffer; nonce: Buffer; sealed: Buffer } {
  if (typeof box !== "string" || !BASE64.test(box)) {
    throw new SecretBoxError("Base64 decoding of encrypted message failed");
  }
  const raw = Buffer.from(box, "base64");
  if (raw.length < SALT_BYTES + NONCE_BYTES + MAC_BYTES) {
    throw new SecretBoxError("The encrypted message was truncated");
  }
  return {
    salt: raw.subarray(0, SALT_BYTES),
    nonce: raw.subarray(SALT_BYTES, SALT_BYTES + NONCE_BYTES),
    sealed: raw.subarray(SALT_BYTES + NONCE_BYTES),
  };
}

/** Opens a box's parts with `key` (wiped after use); throws SecretBoxError with `failure`. */
export function openBox(parts: { nonce: Buffer; sealed: Buffer }, key: Buffer, failure: string): string {
  const message = Buffer.alloc(parts.sealed.length - MAC_BYTES);
  let opened: boolean;
  try {
    opened = sodium.crypto_secretbox_open_easy(message, parts.sealed, parts.nonce, key);
  } finally {
    sodium.sodium_memzero(key);
  }
  if (!opened) throw new SecretBoxError(failure);
  return message.toString("utf8");
}

// Standard alphabet, padding optional but never misplaced: Buffer.from(..., "base64") alone would
// silently skip foreign characters.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;

/** Opens a box made by sealSecretBox (or the reference implementation); throws SecretBoxError. */
export async function openSecretBox(box: string, secret: string, pool: CryptoPool): Promise<string> {
  const parts = boxParts(box);
  return openBox(parts, await deriveKey(secret, parts.salt, pool), "decryption of mailCryptSecretBox failed");
}

/** A new recovery token: lower-case canonical UUID v4. */
export function newRecoveryToken(): string {
  return randomUUID();
}

// Canonical RFC 9562 form, versions 1-8, RFC variant (what Symfony's Uuid constraint accepts).
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The token lower-cased (surrounding whitespace dropped), or null if it is not a valid UUID. */
export function normalizeRecoveryToken(token: string): string | null {
  if (typeof token !== "string") return null;
  const normalized = token.trim().toLowerCase();
  return UUID.test(normalized) ? normalized : null;
}

/** Whether the stored public key belongs to the stored private key (both base64 of PEM). */
export function publicKeyMatchesPrivateKey(publicKeyB64: string, privateKeyB64: string): boolean {
  try {
    const privateKey = createPrivateKey(Buffer.from(privateKeyB64, "base64").toString("utf8"));
    const derived = createPublicKey(privateKey).export({ type: "spki", format: "der" });
    const given = createPublicKey(Buffer.from(publicKeyB64, "base64").toString("utf8")).export({
      type: "spki",
      format: "der",
    });
    return derived.equals(given);
  } catch {
    return false;
  }
}
