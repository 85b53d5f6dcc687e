import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

// RFC 6238 TOTP with the reference's fixed parameters: SHA-1, 6 digits, 30 s steps.
const PERIOD_MS = 30_000;
const DIGITS = 6;
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** RFC 4648 base32, upper-case, unpadded. */
export function base32Encode(bytes: Uint8Array): string {
  let out = "";
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

/** Decodes base32 (case-insensitive, padding and spaces ignored); null on foreign characters. */
export function base32Decode(text: string): Buffer | null {
  const clean = text.replace(/[\s=]/g, "").toUpperCase();
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const char of clean) {
    const index = ALPHABET.indexOf(char);
    if (index === -1) return null;
    value = ((value << 5) | index) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** A new secret: base32 of 32 random bytes (52 characters). */
export function generateTotpSecret(): string {
  return base32Encode(randomBytes(32));
}

/** RFC 4226 HOTP value for one counter, as a zero-padded 6-digit string. */
function hotp(key: Buffer, counter: number): string {
  const message = Buffer.alloc(8);
  message.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac("sha1", key).update(message).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** DIGITS).padStart(DIGITS, "0");
}

function stepAt(now: number): number {
  return Math.floor(now / PERIOD_MS);
}

/** The code valid at `now` (ms), for tests and admin tooling. */
export function currentTotpCode(secret: string, now: number): string {
  const key = base32Decode(secret);
  if (!key || key.length === 0) throw new RangeError("TOTP secret is not base32");
  return hotp(key, stepAt(now));
}

/**
 * The time step `code` belongs to (current step ± 1, for clock drift), or null when it matches none
 * or matches a step at or before `lastUsedStep`: a code works once, so the caller stores the result.
 */
export function totpStepFor(
  secret: string,
  code: string,
  now: number,
  lastUsedStep: number | null,
): number | null {
  if (typeof code !== "string") return null;
  const given = code.replace(/\s/g, "");
  if (!/^\d{6}$/.test(given)) return null;
  const key = base32Decode(secret);
  if (!key || key.length === 0) return null;
  const expected = Buffer.from(given, "ascii");
  const current = stepAt(now);
  let matched: number | null = null;
  // Compare against every candidate step, without stopping early.
  for (const step of [current - 1, current, current + 1]) {
    if (step < 0) continue;
    if (timingSafeEqual(Buffer.from(hotp(key, step), "ascii"), expected)) matched = step;
  }
  if (matched === null) return null;
  if (lastUsedStep !== null && matched <= lastUsedStep) return null;
  return matched;
}
