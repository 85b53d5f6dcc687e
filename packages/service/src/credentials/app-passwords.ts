import { randomBytes, randomInt } from "node:crypto";
import type { InstallationSecret } from "../config.ts";
import { boxParts, openBox, sealBox } from "./mailcrypt.ts";
import { sodium } from "./sodium.ts";

/**
 * App passwords: 16 characters from a-z and 2-9 (34 symbols, about 81.4 bits), shown as four groups
 * of four. Being random and long, an app password needs no key stretching: it is found by a keyed
 * hash and opens its own secret box of the MailCrypt private key with a key derived by a keyed hash
 * of it and the box's salt, so a right and a wrong one cost the same and neither costs an Argon2 run.
 * Both hashes are keyed BLAKE2b-256 (libsodium's generichash, a PRF under a secret key) under two
 * keys derived once from the installation secret: a copy of the database alone tests no guess,
 * against a hash or a box; and each costs about a microsecond, on the mail server's hot path.
 */
const ALPHABET = "abcdefghijklmnopqrstuvwxyz23456789";
const LENGTH = 16;
const FORM = /^[a-z2-9]{16}$/;
const PURPOSE = "app-password";
const SALT_BYTES = 16;
const KEY_BYTES = 32;

/** A new app password in its shown form, `abcd-efgh-jkmn-pqrs`. */
export function generateAppPassword(): string {
  let raw = "";
  for (let i = 0; i < LENGTH; i++) raw += ALPHABET[randomInt(ALPHABET.length)];
  return groupedAppPassword(raw);
}

/** The shown form of a normalised app password: four groups of four, joined by dashes. */
export const groupedAppPassword = (normalized: string): string => normalized.replace(/(.{4})(?=.)/g, "$1-");

/**
 * The app password in its stored form (lower case, no dashes or spaces), or null when the secret
 * does not have the form of one. Any case, with or without the dashes.
 */
export function normalizeAppPassword(secret: unknown): string | null {
  if (typeof secret !== "string" || secret.length > 40) return null;
  const normalized = secret.replace(/[\s-]/g, "").toLowerCase();
  return FORM.test(normalized) ? normalized : null;
}

interface AppPasswordKeys {
  lookup: Buffer;
  box: Buffer;
}
/** The two keys of an installation secret, derived once. */
const derivedKeys = new WeakMap<InstallationSecret, AppPasswordKeys>();
function keysOf(secret: InstallationSecret): AppPasswordKeys {
  let keys = derivedKeys.get(secret);
  if (!keys) {
    keys = { lookup: secret.keyedHash(PURPOSE, "lookup"), box: secret.keyedHash(PURPOSE, "box") };
    derivedKeys.set(secret, keys);
  }
  return keys;
}

function keyedBlake2b(key: Buffer, ...parts: Buffer[]): Buffer {
  const out = Buffer.alloc(KEY_BYTES);
  sodium.crypto_generichash(out, parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts), key);
  return out;
}

/** Hex keyed BLAKE2b-256 of the normalised app password: its lookup key. */
export function appPasswordLookupHash(normalized: string, secret: InstallationSecret): string {
  return keyedBlake2b(keysOf(secret).lookup, Buffer.from(normalized, "utf8")).toString("hex");
}

function boxKey(normalized: string, salt: Buffer, secret: InstallationSecret): Buffer {
  return keyedBlake2b(keysOf(secret).box, salt, Buffer.from(normalized, "utf8"));
}

/** A box of the usual format (mailcrypt.ts) keyed by BLAKE2b-256(key = the installation's box key, salt ‖ app password). */
export function sealWithAppPassword(
  plaintext: string,
  normalized: string,
  secret: InstallationSecret,
): string {
  const salt = randomBytes(SALT_BYTES);
  return sealBox(plaintext, salt, boxKey(normalized, salt, secret));
}

/** Opens a box made by sealWithAppPassword; throws SecretBoxError. */
export function openWithAppPassword(box: string, normalized: string, secret: InstallationSecret): string {
  const parts = boxParts(box);
  return openBox(
    parts,
    boxKey(normalized, parts.salt, secret),
    "decryption of the app password's secret box failed",
  );
}
