import type { Kysely } from "kysely";
import { effectiveRoles } from "../accounts/roles.ts";
import type { UserAliasService } from "../accounts/user-aliases.ts";
import type { User } from "../accounts/users.ts";
import type { Database } from "../db/schema.ts";
import { ServiceError } from "../errors.ts";
import type { OpenPgpKeyInfo, OpenPgpKeyService } from "./keys.ts";

/** Why an upload or deletion was refused; each has its own sentence on the page. */
export type KeyRefusal =
  | "not_identity"
  | "no_data"
  | "too_large"
  | "no_key"
  | "several_keys"
  | "no_stored_key";

export class KeyRefused extends ServiceError {
  readonly reason: KeyRefusal;
  constructor(reason: KeyRefusal, message: string) {
    super(reason === "no_stored_key" ? "not_found" : "invalid", message);
    this.reason = reason;
  }
}

export interface IdentityKey {
  email: string;
  key: Omit<OpenPgpKeyInfo, "email" | "wkdHash"> | null;
}

/** The importer's refusals (keys.ts), by the words it uses, as reasons. */
const importRefusals: [RegExp, KeyRefusal][] = [
  [/^key: no OpenPGP data/, "no_data"],
  [/^key: larger than/, "too_large"],
  [/^No key found for /, "no_key"],
  [/^More than one keys? found for /, "several_keys"],
];

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
    try {
      return await this.#keys.import(email, data, user.id);
    } catch (error) {
      if (error instanceof ServiceError && error.kind === "invalid") {
        const refusal = importRefusals.find(([pattern]) => pattern.test(error.message));
        if (refusal) throw new KeyRefused(refusal[1], error.message);
      }
      throw error;
    }
  }

  /** Stops publishing the key of `email` (the caller has confirmed the user's password). */
  async remove(user: User, email: string): Promise<void> {
    await this.#assertIdentity(user, email);
    const deleted = await this.#db.deleteFrom("openpgp_keys").where("email", "=", email).executeTakeFirst();
    if (Number(deleted.numDeletedRows) === 0)
      throw new KeyRefused("no_stored_key", "no key for this address");
  }

  async #assertIdentity(user: User, email: string) {
    // A spam-flagged account publishes nothing (the pages refuse it too).
    if (
      user.deleted ||
      effectiveRoles(user.roles).has("ROLE_SPAM") ||
      !(await this.identities(user)).includes(email)
    )
      throw new KeyRefused("not_identity", "you are not authorized to manage this identity");
  }
}
