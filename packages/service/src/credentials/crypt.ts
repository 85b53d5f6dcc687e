import { createHash } from "node:crypto";
import bcrypt from "bcryptjs";
import { md5Crypt } from "./md5-crypt.ts";
import { shaCrypt } from "./sha-crypt.ts";

/**
 * Synchronous crypt(password, setting) for the legacy formats we read: `$1$`, `$5$`, `$6$` and bcrypt
 * `$2a$`/`$2b$`/`$2y$`. Returns null for any other or malformed setting. CPU-heavy: call it through
 * `legacyCrypt` (a worker thread), not on the event loop.
 */
export function cryptSync(password: string, setting: string): string | null {
  if (setting.startsWith("$6$") || setting.startsWith("$5$")) return shaCrypt(password, setting);
  if (setting.startsWith("$1$")) return md5Crypt(password, setting);
  if (/^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$/.test(setting)) {
    // Symfony's NativePasswordHasher: bcrypt sees only 72 bytes and stops at NUL, so such passwords
    // are first replaced by base64(SHA-512(password)).
    if (Buffer.byteLength(password, "utf8") > 72 || password.includes("\0")) {
      password = createHash("sha512").update(password, "utf8").digest("base64");
    }
    try {
      return bcrypt.hashSync(password, setting);
    } catch {
      return null;
    }
  }
  return null;
}
