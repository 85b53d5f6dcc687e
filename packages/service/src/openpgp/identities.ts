import type { Kysely } from "kysely";
import { effectiveRoles } from "../accounts/roles.ts";
import type { UserAliasService } from "../accounts/user-aliases.ts";
import type { User } from "../accounts/users.ts";
import type { Database } from "../db/schema.ts";
import { refusal } from "../errors.ts";
import type { OpenPgpKeyInfo, OpenPgpKeyService } from "./keys.ts";

/** The address is none of the user's own (address, aliases), or the user may publish nothing. */
export const notOwnIdentity = refusal(
  "openpgp.not_own_identity",
  "forbidden",
  () => "you are not authorized to manage this identity",
);
export const noStoredKey = refusal("openpgp.no_stored_key", "not_found", () => "no key for this address");

export interface IdentityKey {
  email: string;
  key: Omit<OpenPgpKeyInfo, "email" | "wkdHash"> | null;
}

/**
 * The keys a user publishes through WKD (reference 5.6, 9.2): for the own address and for the
 * sources of the user's own custom (not random) aliases, in every domain. The import itself (one
 * key, only the address's user IDs, no private material) is OpenPgpKeyService's.
 */
export class OpenPgpIdentityService {
  readonly #db: Kysely<Database>;
  readonly #keys: OpenPgpKeyService;
  readonly #aliases: UserAliasService;

  constructor(db: Kysely<Database>, keys: OpenPgpKeyService, aliases: UserAliasService) {
    this.#db = db;
    this.#keys = keys;
    this.#aliases = aliases;
  }

  async identities(user: User): Promise<string[]> {
    return [user.email, ...(await this.#aliases.customSources(user))];
  }

  /** Each identity with its published key, if any. */
  async list(user: User): Promise<IdentityKey[]> {
    const identities = await this.identities(user);
    const rows = await this.#db
      .selectFrom("openpgp_keys")
      .select(["email", "key_id", "fingerprint", "expires_at"])
      .where("email", "in", identities)
      .execute();
    const byEmail = new Map(rows.map((row) => [row.email, row]));
    return identities.map((email) => {
      const row = byEmail.get(email);
      return {
        email,
        key: row
          ? {
              keyId: row.key_id,
              fingerprint: row.fingerprint,
              expiresAt: row.expires_at === null ? null : Number(row.expires_at),
            }
          : null,
      };
    });
  }

  /** Publishes the one key for `email` found in `data` (replacing the one before), uploaded by the user. */
  async upload(user: User, email: string, data: Uint8Array | string): Promise<OpenPgpKeyInfo> {
    await this.#assertIdentity(user, email);
    return this.#keys.import(email, data, user.id);
  }

  /** Stops publishing the key of `email` (the caller has confirmed the user's password). */
  async remove(user: User, email: string): Promise<void> {
    await this.#assertIdentity(user, email);
    const deleted = await this.#db.deleteFrom("openpgp_keys").where("email", "=", email).executeTakeFirst();
    if (Number(deleted.numDeletedRows) === 0) throw noStoredKey();
  }

  async #assertIdentity(user: User, email: string) {
    // A spam-flagged account publishes nothing (the pages refuse it too).
    if (
      user.deleted ||
      effectiveRoles(user.roles).has("ROLE_SPAM") ||
      !(await this.identities(user)).includes(email)
    )
      throw notOwnIdentity();
  }
}
