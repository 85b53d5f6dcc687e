import { createHash } from "node:crypto";
import type { Kysely } from "kysely";
import { parseDomain } from "../accounts/addresses.ts";
import type { Database } from "../db/schema.ts";

const zBase32Alphabet = "ybndrfg8ejkmcpqxot1uwisza345h769";

function zBase32(data: Uint8Array): string {
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of data) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += zBase32Alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += zBase32Alphabet[(value << (5 - bits)) & 31];
  return out;
}

/** The WKD "hu" name of a local part: z-base-32 of SHA-1 of the lower-cased local part. */
export const wkdHash = (localPart: string): string =>
  zBase32(createHash("sha1").update(localPart.toLowerCase(), "utf8").digest());

export class WkdService {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** The binary key published for hash@domain, or null. */
  async find(rawDomain: string, hash: string): Promise<Buffer | null> {
    const domain = parseDomain(rawDomain);
    if (!domain || !/^[ybndrfg8ejkmcpqxot1uwisza345h769]{32}$/.test(hash.toLowerCase())) return null;
    const row = await this.#db
      .selectFrom("openpgp_keys")
      .innerJoin("domains", "domains.id", "openpgp_keys.domain_id")
      .select("openpgp_keys.key_data")
      .where("domains.name", "=", domain)
      .where("openpgp_keys.wkd_hash", "=", hash.toLowerCase())
      .executeTakeFirst();
    return row ? Buffer.from(row.key_data, "base64") : null;
  }
}
