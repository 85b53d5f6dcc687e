import { randomInt, type ScryptOptions, scrypt, timingSafeEqual } from "node:crypto";
import type { InstallationSecret } from "../config.ts";

// 6-digit codes carry ~20 bits: an unkeyed hash of one falls to brute force at once. So a code is
// stored as HMAC-SHA256 under the installation secret (kept outside the database), with the user's
// address in the input so that equal codes of two users differ: a stolen database alone reveals
// nothing, and checking a code costs one HMAC, not a slow hash per stored code (a flood of wrong
// codes cannot exhaust the CPU). Codes stored earlier as salted scrypt hashes are still accepted.
const HMAC_PREFIX = "$hmac-sha256$";
const HMAC_FORMAT = /^\$hmac-sha256\$([A-Za-z0-9+/]{43}=?)$/;
const PURPOSE = "backup-code";

/** What a user's codes are keyed with: the installation secret and the user's address. */
export interface BackupCodeKey {
  secret: InstallationSecret;
  email: string;
}

// The legacy format's parameters (codes enrolled before the keyed hash).
const N = 16384;
const R = 8;
const P = 1;
const KEY_BYTES = 32;
const CODE = /^\d{6}$/;
const FORMAT = /^\$scrypt\$N=(\d+),r=(\d+),p=(\d+)\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;

function scryptAsync(code: string, salt: Buffer, length: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(code, salt, length, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

/** `count` distinct codes, each 100000-999999. */
export function generateBackupCodes(count = 6): string[] {
  const codes = new Set<string>();
  while (codes.size < count) codes.add(String(randomInt(100000, 1000000)));
  return [...codes];
}

// PHC convention: standard alphabet, no padding.
function unpadded(bytes: Buffer): string {
  return bytes.toString("base64").replace(/=+$/, "");
}

function normalize(code: string): string | null {
  if (typeof code !== "string") return null;
  const trimmed = code.replace(/\s/g, "");
  return CODE.test(trimmed) ? trimmed : null;
}

function keyedHash(code: string, key: BackupCodeKey): Buffer {
  return key.secret.keyedHash(PURPOSE, key.email, code);
}

/** `$hmac-sha256$<base64 HMAC>` of a 6-digit code (spaces ignored) for the user of `key`. */
export function hashBackupCode(code: string, key: BackupCodeKey): string {
  const normalized = normalize(code);
  if (normalized === null) throw new RangeError("a backup code has 6 digits");
  return `${HMAC_PREFIX}${keyedHash(normalized, key).toString("base64")}`;
}

/**
 * The legacy format, `$scrypt$N=16384,r=8,p=1$<base64 salt>$<base64 hash>`: only for tests that
 * prove such stored codes still work; nothing new is stored this way.
 */
export async function hashBackupCodeWithScrypt(code: string, salt: Buffer): Promise<string> {
  const normalized = normalize(code);
  if (normalized === null) throw new RangeError("a backup code has 6 digits");
  const hash = await scryptAsync(normalized, salt, KEY_BYTES, { N, r: R, p: P });
  return `$scrypt$N=${N},r=${R},p=${P}$${unpadded(salt)}$${unpadded(hash)}`;
}

async function matchesScrypt(code: string, stored: string): Promise<boolean> {
  const parts = FORMAT.exec(stored);
  if (!parts) return false;
  const [n, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  // Bounds keep a corrupt row from asking for gigabytes.
  if (n < 2 || n > 1 << 20 || (n & (n - 1)) !== 0 || r < 1 || r > 32 || p < 1 || p > 16) return false;
  const salt = Buffer.from(parts[4]!, "base64");
  const expected = Buffer.from(parts[5]!, "base64");
  if (expected.length === 0) return false;
  try {
    const actual = await scryptAsync(code, salt, expected.length, { N: n, r, p, maxmem: 256 * n * r + 1024 });
    return timingSafeEqual(actual, expected);
  } catch {
    return false;
  }
}

/**
 * Index of the stored hash `code` matches, or -1. One keyed hash of the code, compared in constant
 * time with every stored keyed hash (no early exit, so the time does not tell where in the list a
 * code sits). Only a list holding legacy scrypt hashes costs one scrypt (on libuv's thread pool)
 * per such hash.
 */
export async function findBackupCode(code: string, hashes: string[], key: BackupCodeKey): Promise<number> {
  const normalized = normalize(code);
  if (normalized === null || !Array.isArray(hashes)) return -1;
  const actual = keyedHash(normalized, key);
  const results = await Promise.all(
    hashes.map((stored) => {
      if (typeof stored !== "string") return false;
      const keyed = HMAC_FORMAT.exec(stored);
      if (keyed) {
        const expected = Buffer.from(keyed[1]!, "base64");
        return expected.length === actual.length && timingSafeEqual(actual, expected);
      }
      return stored.startsWith("$scrypt$") ? matchesScrypt(normalized, stored) : false;
    }),
  );
  return results.indexOf(true);
}
