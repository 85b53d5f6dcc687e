import { hash, randomBytes } from "node:crypto";
import type { Kysely } from "kysely";
import { nowSeconds, parseStringList } from "../accounts/users.ts";
import { preparedByKey } from "../db/prepared.ts";
import type { Database } from "../db/schema.ts";
import { invalid, notFound } from "../errors.ts";
import { andThen, type Eventually } from "../eventually.ts";

export const scopes = ["mailbox-server", "mta", "webmail", "identity", "retention", "admin"] as const;
export type Scope = (typeof scopes)[number];
export const isScope = (value: string): value is Scope => (scopes as readonly string[]).includes(value);

export interface ApiToken {
  id: number;
  name: string;
  scopes: Scope[];
  createdAt: number;
  lastUsedAt: number | null;
}

export interface CreatedToken {
  token: ApiToken;
  /** Shown once; only its SHA-256 is stored. */
  plainToken: string;
}

const lastUsedWriteInterval = 300;

export const hashToken = (plain: string): string => hash("sha256", plain, "hex");

export function checkScopes(value: unknown): Scope[] {
  const list = typeof value === "string" ? value.split(",") : value;
  if (!Array.isArray(list)) throw invalid("scopes: must be a list of scopes");
  const result: Scope[] = [];
  for (const raw of list) {
    const scope = typeof raw === "string" ? raw.trim() : "";
    if (scope === "") continue;
    if (!isScope(scope))
      throw invalid(`scopes: unknown scope "${String(raw).slice(0, 50)}" (known: ${scopes.join(", ")})`);
    if (!result.includes(scope)) result.push(scope);
  }
  if (result.length === 0) throw invalid(`scopes: at least one of ${scopes.join(", ")}`);
  return result;
}

export class TokenService {
  readonly #db: Kysely<Database>;
  /** Asked on every API request: compiled once, and asked once per read batch (SQLite). */
  readonly #byHash;

  constructor(db: Kysely<Database>) {
    this.#db = db;
    this.#byHash = preparedByKey(
      db,
      (tokenHash: string) => db.selectFrom("api_tokens").selectAll().where("token_hash", "=", tokenHash),
      { sameInBatch: true },
    );
  }

  async create(rawName: unknown, rawScopes: unknown): Promise<CreatedToken> {
    const name = typeof rawName === "string" ? rawName.trim() : "";
    if (name.length < 1 || name.length > 64) throw invalid("name: must be 1 to 64 characters");
    const tokenScopes = checkScopes(rawScopes);
    const plainToken = randomBytes(32).toString("hex");
    const now = nowSeconds();
    const tokenHash = hashToken(plainToken);
    await this.#db
      .insertInto("api_tokens")
      .values({
        name,
        scopes: JSON.stringify(tokenScopes),
        token_hash: tokenHash,
        created_at: now,
        last_used_at: null,
      })
      .execute();
    const row = await this.#db
      .selectFrom("api_tokens")
      .selectAll()
      .where("token_hash", "=", tokenHash)
      .executeTakeFirstOrThrow();
    return { token: toToken(row), plainToken };
  }

  async list(): Promise<ApiToken[]> {
    const rows = await this.#db.selectFrom("api_tokens").selectAll().orderBy("id").execute();
    return rows.map(toToken);
  }

  async delete(id: number): Promise<void> {
    const result = await this.#db.deleteFrom("api_tokens").where("id", "=", id).executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) throw notFound("API token not found");
  }

  /**
   * The token a plain value stands for, or null. Records its use at most every five minutes.
   * Asked on every API request: synchronous when the read is (SQLite) and no use is to be recorded.
   */
  authenticate(plain: string): Eventually<ApiToken | null> {
    if (!/^[0-9a-f]{64}$/i.test(plain)) return null;
    return andThen(this.#byHash(hashToken(plain.toLowerCase())), ([row]) => {
      if (!row) return null;
      const now = nowSeconds();
      if (row.last_used_at !== null && row.last_used_at > now - lastUsedWriteInterval) return toToken(row);
      return this.#recordUse(row.id, now).then(() => toToken(row));
    });
  }

  async #recordUse(id: number, now: number): Promise<void> {
    await this.#db
      .updateTable("api_tokens")
      .set({ last_used_at: now })
      .where("id", "=", id)
      .where((eb) =>
        eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<=", now - lastUsedWriteInterval)]),
      )
      .execute();
  }
}

function toToken(row: {
  id: number;
  name: string;
  scopes: string;
  created_at: number;
  last_used_at: number | null;
}): ApiToken {
  return {
    id: row.id,
    name: row.name,
    scopes: parseStringList(row.scopes).filter(isScope),
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
  };
}
