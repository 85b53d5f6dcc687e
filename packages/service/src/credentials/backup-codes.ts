import { randomBytes, randomInt, type ScryptOptions, scrypt, timingSafeEqual } from "node:crypto";

// 6-digit codes carry ~20 bits: a fast hash would fall to brute force at once, so each is stored
// as a salted scrypt hash.
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

/** `$scrypt$N=16384,r=8,p=1$<base64 salt>$<base64 hash>` of a 6-digit code (spaces ignored). */
export async function hashBackupCode(code: string): Promise<string> {
  const normalized = normalize(code);
  if (normalized === null) throw new RangeError("a backup code has 6 digits");
  const salt = randomBytes(16);
  const hash = await scryptAsync(normalized, salt, KEY_BYTES, { N, r: R, p: P });
  return `$scrypt$N=${N},r=${R},p=${P}$${unpadded(salt)}$${unpadded(hash)}`;
}

async function matches(code: string, stored: string): Promise<boolean> {
  if (typeof stored !== "string") return false;
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
 * Index of the hash `code` matches, or -1. Every hash is checked (no early exit), so the time does
 * not tell where in the list a code sits. The scrypt calls run on libuv's thread pool.
 */
export async function findBackupCode(code: string, hashes: string[]): Promise<number> {
  const normalized = normalize(code);
  if (normalized === null || !Array.isArray(hashes)) return -1;
  const results = await Promise.all(hashes.map((stored) => matches(normalized, stored)));
  return results.indexOf(true);
}
