import type { Kysely, Transaction } from "kysely";
import * as openpgp from "openpgp";
import { parseAddress } from "../accounts/addresses.ts";
import { activeUserRow, managedDomain } from "../accounts/queries.ts";
import { domainNotManaged, nowSeconds } from "../accounts/users.ts";
import type { Database } from "../db/schema.ts";
import { inTransaction } from "../db/transaction.ts";
import { refusal } from "../errors.ts";
import { wkdHash } from "./wkd.ts";

export interface OpenPgpKeyInfo {
  email: string;
  keyId: string;
  fingerprint: string;
  expiresAt: number | null;
  wkdHash: string;
}

/** The largest key accepted: 1 MiB of binary OpenPGP data. */
const maxKeyBytes = 1024 * 1024;

/**
 * The same limit for armored text: base64 (4 bytes per 3), a CRLF after every 64 characters, and
 * 4 KiB for the BEGIN/END lines, armor headers and checksum.
 */
const maxArmoredKeyBytes = Math.ceil(maxKeyBytes / 3) * 4 * (66 / 64) + 4096;

/**
 * The HTTP body limit of the key upload: an armored key at the importer's limit still fits, also
 * as JSON (`{"key": ...}`, each CRLF escaped to four characters, `/` possibly escaped as `\/`). The
 * importer enforces the key limits above; this only keeps the body from cutting them short.
 */
export const maxKeyUploadBodyBytes = 2 * maxKeyBytes;

const armorMarker = "-----BEGIN PGP ";

/** GnuPG's spaced fingerprint: groups of four, a double space in the middle. */
function formatFingerprint(hex: string): string {
  const groups = hex.toUpperCase().match(/.{1,4}/g) ?? [];
  const half = Math.floor(groups.length / 2);
  return `${groups.slice(0, half).join(" ")}  ${groups.slice(half).join(" ")}`;
}

const userIdMatches = (userId: openpgp.UserIDPacket | null, email: string): boolean => {
  if (!userId) return false;
  if (userId.email.toLowerCase() === email) return true;
  const text = userId.userID.toLowerCase();
  return text === email || text.includes(`<${email}>`);
};

/**
 * OpenPGP keys published through WKD. An import keeps only the user IDs of the target address
 * (third-party identities and their signatures are never published) and needs exactly one key
 * for that address; private key material is never stored.
 */
export const keyNotFound = refusal(
  "openpgp.key_not_found",
  "not_found",
  () => "no OpenPGP key for this address",
);
export const keyAddressInvalid = refusal(
  "openpgp.address_invalid",
  "invalid",
  () => "email: not a valid e-mail address",
);
export const keyNoData = refusal("openpgp.no_data", "invalid", () => "key: no OpenPGP data");
export const keyTooLarge = refusal(
  "openpgp.too_large",
  "invalid",
  () => "key: larger than 1 MiB (binary), or about 1.4 MiB armored",
);
export const keyNoneForAddress = refusal<{ email: string }>(
  "openpgp.no_key_for_address",
  "invalid",
  ({ email }) => `No key found for ${email}`,
);
export const keySeveralForAddress = refusal<{ email: string }>(
  "openpgp.several_keys_for_address",
  "invalid",
  ({ email }) => `More than one keys found for ${email}`,
);
export const keyAddressNotHeld = refusal<{ email: string }>(
  "openpgp.address_not_held",
  "invalid",
  ({ email }) => `email: no active user or alias has the address ${email}`,
);

export class OpenPgpKeyService {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  async import(
    rawEmail: string,
    data: Uint8Array | string,
    uploaderId: number | null = null,
    trx?: Transaction<Database>,
  ): Promise<OpenPgpKeyInfo> {
    // The caller's transaction (an admin action's) is used throughout when given; otherwise only
    // the write is one, after the key is parsed.
    const db = trx ?? this.#db;
    const address = parseAddress(String(rawEmail));
    if (!address) throw keyAddressInvalid();
    const size = typeof data === "string" ? Buffer.byteLength(data) : data.byteLength;
    if (size === 0) throw keyNoData();
    const armored =
      typeof data === "string" ? data.includes(armorMarker) : Buffer.from(data).includes(armorMarker);
    if (size > (armored ? maxArmoredKeyBytes : maxKeyBytes)) throw keyTooLarge();
    const domain = await managedDomain(db, address.domain);
    if (!domain) throw domainNotManaged({ field: "email", domain: address.domain });
    await this.#assertHeld(address.email, db);

    const keys = await readKeys(data);
    const matching = keys.filter((key) =>
      key.users.some((user) => userIdMatches(user.userID, address.email)),
    );
    if (matching.length === 0) throw keyNoneForAddress({ email: address.email });
    if (matching.length > 1) throw keySeveralForAddress({ email: address.email });
    const key = (matching[0] as openpgp.Key).toPublic();
    key.users = key.users.filter((user) => userIdMatches(user.userID, address.email));
    const binary = key.write();
    const expiration = await key.getExpirationTime().catch(() => null);
    const info: OpenPgpKeyInfo = {
      email: address.email,
      keyId: key.getKeyID().toHex().toUpperCase(),
      fingerprint: formatFingerprint(key.getFingerprint()),
      expiresAt: expiration instanceof Date ? Math.floor(expiration.getTime() / 1000) : null,
      wkdHash: wkdHash(address.localPart),
    };
    const now = nowSeconds();
    const row = {
      domain_id: domain.id,
      key_id: info.keyId,
      fingerprint: info.fingerprint,
      expires_at: info.expiresAt,
      key_data: Buffer.from(binary).toString("base64"),
      wkd_hash: info.wkdHash,
      uploader_id: uploaderId,
      updated_at: now,
    };
    await inTransaction(this.#db, trx, async (trx) => {
      const updated = await trx
        .updateTable("openpgp_keys")
        .set(row)
        .where("email", "=", address.email)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) {
        await trx
          .insertInto("openpgp_keys")
          .values({ ...row, email: address.email, created_at: now })
          .execute();
      }
    });
    return info;
  }

  async get(rawEmail: string, db: Kysely<Database> = this.#db): Promise<OpenPgpKeyInfo> {
    const address = parseAddress(String(rawEmail));
    const row = address
      ? await db.selectFrom("openpgp_keys").selectAll().where("email", "=", address.email).executeTakeFirst()
      : undefined;
    if (!row) throw keyNotFound();
    return {
      email: row.email,
      keyId: row.key_id,
      fingerprint: row.fingerprint,
      expiresAt: row.expires_at,
      wkdHash: row.wkd_hash,
    };
  }

  async delete(rawEmail: string, db: Kysely<Database> = this.#db): Promise<OpenPgpKeyInfo> {
    const info = await this.get(rawEmail, db);
    await db.deleteFrom("openpgp_keys").where("email", "=", info.email).execute();
    return info;
  }

  async count(): Promise<number> {
    const row = await this.#db
      .selectFrom("openpgp_keys")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Keys are published only for addresses an active user or alias holds. */
  async #assertHeld(email: string, db: Kysely<Database>) {
    const [user, alias] = await Promise.all([
      activeUserRow(db, email),
      db
        .selectFrom("aliases")
        .select("id")
        .where("source", "=", email)
        .where("deleted", "=", 0)
        .executeTakeFirst(),
    ]);
    if (!user && !alias) throw keyAddressNotHeld({ email });
  }
}

/** Every key in the data: binary packets, or one or more armored blocks (as GnuPG would import them). */
async function readKeys(data: Uint8Array | string): Promise<openpgp.Key[]> {
  try {
    const text = typeof data === "string" ? data : Buffer.from(data).toString("utf8");
    const blocks = text.match(
      /-----BEGIN PGP (PUBLIC|PRIVATE) KEY BLOCK-----[\s\S]*?-----END PGP \1 KEY BLOCK-----/g,
    );
    if (blocks)
      return (await Promise.all(blocks.map((armoredKeys) => openpgp.readKeys({ armoredKeys })))).flat();
    const binary = typeof data === "string" ? Buffer.from(data, "latin1") : data;
    return await openpgp.readKeys({ binaryKeys: binary });
  } catch {
    throw keyNoData();
  }
}
