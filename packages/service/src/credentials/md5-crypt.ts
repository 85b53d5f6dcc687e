import { createHash } from "node:crypto";
import { b64From24Bit, encodePermuted } from "./crypt-base64.ts";

// MD5-crypt ($1$), Poul-Henning Kamp's FreeBSD algorithm as implemented by glibc.

const MAGIC = Buffer.from("$1$");
const SALT_MAX = 8;
const ROUNDS = 1000;
const GROUPS = [
  [0, 6, 12],
  [1, 7, 13],
  [2, 8, 14],
  [3, 9, 15],
  [4, 10, 5],
] as const;

/** crypt(password, setting) for `$1$` settings; null when the setting is not MD5-crypt. */
export function md5Crypt(password: string | Buffer, setting: string): string | null {
  if (!setting.startsWith("$1$")) return null;
  const rest = setting.slice(3);
  const saltEnd = rest.indexOf("$");
  const saltText = (saltEnd === -1 ? rest : rest.slice(0, saltEnd)).slice(0, SALT_MAX);
  const salt = Buffer.from(saltText, "utf8");
  const key = typeof password === "string" ? Buffer.from(password, "utf8") : password;

  const alternate = createHash("md5").update(key).update(salt).update(key).digest();
  const ctx = createHash("md5").update(key).update(MAGIC).update(salt);
  for (let remaining = key.length; remaining > 0; remaining -= 16) {
    ctx.update(alternate.subarray(0, Math.min(remaining, 16)));
  }
  // The original's quirk: a zero byte or the first password byte, never the alternate sum.
  const zero = Buffer.alloc(1);
  const first = key.subarray(0, 1);
  for (let n = key.length; n > 0; n >>>= 1) ctx.update(n & 1 ? zero : first);
  let digest = ctx.digest();

  for (let i = 0; i < ROUNDS; i++) {
    const h = createHash("md5");
    h.update(i & 1 ? key : digest);
    if (i % 3 !== 0) h.update(salt);
    if (i % 7 !== 0) h.update(key);
    h.update(i & 1 ? digest : key);
    digest = h.digest();
  }

  return `$1$${saltText}$${encodePermuted(digest, GROUPS)}${b64From24Bit(0, 0, digest[11]!, 2)}`;
}
