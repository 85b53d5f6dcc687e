import { createHash } from "node:crypto";
import { b64From24Bit, encodePermuted } from "./crypt-base64.ts";

// SHA-crypt ($5$ / $6$) after Ulrich Drepper's specification ("Unix crypt using SHA-256 and SHA-512").

const ROUNDS_DEFAULT = 5000;
const ROUNDS_MIN = 1000;
const ROUNDS_MAX = 999_999_999;
const SALT_MAX = 16;

type Group = readonly [number, number, number];

const SHA512_GROUPS: Group[] = [
  [0, 21, 42],
  [22, 43, 1],
  [44, 2, 23],
  [3, 24, 45],
  [25, 46, 4],
  [47, 5, 26],
  [6, 27, 48],
  [28, 49, 7],
  [50, 8, 29],
  [9, 30, 51],
  [31, 52, 10],
  [53, 11, 32],
  [12, 33, 54],
  [34, 55, 13],
  [56, 14, 35],
  [15, 36, 57],
  [37, 58, 16],
  [59, 17, 38],
  [18, 39, 60],
  [40, 61, 19],
  [62, 20, 41],
];

const SHA256_GROUPS: Group[] = [
  [0, 10, 20],
  [21, 1, 11],
  [12, 22, 2],
  [3, 13, 23],
  [24, 4, 14],
  [15, 25, 5],
  [6, 16, 26],
  [27, 7, 17],
  [18, 28, 8],
  [9, 19, 29],
];

/** Repeats `source` cyclically to `length` bytes (steps 16 and 20 of the specification). */
function stretch(source: Buffer, length: number): Buffer {
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i += source.length) source.copy(out, i, 0, Math.min(source.length, length - i));
  return out;
}

/**
 * crypt(password, setting) for `$5$` and `$6$` settings (a full hash works as a setting: everything
 * after the salt is ignored). Returns null when the setting is not SHA-crypt. The password is taken
 * as UTF-8 bytes, like PHP and glibc see it.
 */
export function shaCrypt(password: string | Buffer, setting: string): string | null {
  const match = /^\$([56])\$/.exec(setting);
  if (!match) return null;
  const algorithm = match[1] === "6" ? "sha512" : "sha256";
  const size = algorithm === "sha512" ? 64 : 32;
  let rest = setting.slice(3);

  let rounds = ROUNDS_DEFAULT;
  let roundsCustom = false;
  const roundsMatch = /^rounds=([0-9]+)\$/.exec(rest);
  if (roundsMatch) {
    // Clamped like glibc; the clamped value is what the output echoes.
    const requested = Number(roundsMatch[1]);
    rounds = Math.max(ROUNDS_MIN, Math.min(requested, ROUNDS_MAX));
    roundsCustom = true;
    rest = rest.slice(roundsMatch[0].length);
  }
  const saltEnd = rest.indexOf("$");
  const saltText = (saltEnd === -1 ? rest : rest.slice(0, saltEnd)).slice(0, SALT_MAX);
  const salt = Buffer.from(saltText, "utf8");
  const key = typeof password === "string" ? Buffer.from(password, "utf8") : password;
  const hash = (...parts: Buffer[]): Buffer => {
    const h = createHash(algorithm);
    for (const part of parts) h.update(part);
    return h.digest();
  };

  const b = hash(key, salt, key);
  const a = createHash(algorithm).update(key).update(salt);
  let remaining = key.length;
  for (; remaining > size; remaining -= size) a.update(b);
  a.update(b.subarray(0, remaining));
  for (let n = key.length; n > 0; n >>>= 1) a.update(n & 1 ? b : key);
  let c = a.digest();

  const dp = createHash(algorithm);
  for (let i = 0; i < key.length; i++) dp.update(key);
  const p = stretch(dp.digest(), key.length);

  const ds = createHash(algorithm);
  for (let i = 0; i < 16 + c[0]!; i++) ds.update(salt);
  const s = stretch(ds.digest(), salt.length);

  for (let i = 0; i < rounds; i++) {
    const h = createHash(algorithm);
    h.update(i & 1 ? p : c);
    if (i % 3 !== 0) h.update(s);
    if (i % 7 !== 0) h.update(p);
    h.update(i & 1 ? c : p);
    c = h.digest();
  }

  const encoded =
    algorithm === "sha512"
      ? encodePermuted(c, SHA512_GROUPS) + b64From24Bit(0, 0, c[63]!, 2)
      : encodePermuted(c, SHA256_GROUPS) + b64From24Bit(0, c[31]!, c[30]!, 3);
  const prefix = `$${match[1]}$${roundsCustom ? `rounds=${rounds}$` : ""}`;
  return `${prefix}${saltText}$${encoded}`;
}
